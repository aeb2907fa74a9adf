// Running the built `streamvec` binary from the CLI tests.
#ifndef STREAMVEC_TESTS_APP_CLI_UTIL_H_
#define STREAMVEC_TESTS_APP_CLI_UTIL_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace streamvec {

struct CliRun {
  int exit_code = -1;  // -1 when killed by a signal or not started
  std::string output;  // stdout and stderr
};

// Runs a shell command line with the streamvec binary substituted for "SV".
inline CliRun Shell(const std::string& line) {
  std::string command;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line.compare(i, 2, "SV") == 0) {
      command += std::string("'") + STREAMVEC_BINARY + "'";
      ++i;
    } else {
      command += line[i];
    }
  }
  CliRun run;
  std::FILE* pipe = popen(("(" + command + ") 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, pipe)) > 0) run.output.append(buf, got);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace streamvec

#endif  // STREAMVEC_TESTS_APP_CLI_UTIL_H_
