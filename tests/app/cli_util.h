// Running the built `streamvec` binary from the CLI tests.
#ifndef STREAMVEC_TESTS_APP_CLI_UTIL_H_
#define STREAMVEC_TESTS_APP_CLI_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>

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


// One HTTP/1.0 request over a plain socket (Connection: close), with an optional bearer token:
// the status code and body; status 0 if the connection failed.
inline std::pair<int, std::string> Http(int port, const std::string& method, const std::string& path,
                                 const std::string& token = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return {0, ""};
  }
  std::string request = method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n";
  if (method == "POST") request += "Content-Length: 0\r\n";
  if (!token.empty()) request += "Authorization: Bearer " + token + "\r\n";
  request += "Connection: close\r\n\r\n";
  (void)!::write(fd, request.data(), request.size());
  std::string response;
  char buf[4096];
  ssize_t got;
  while ((got = ::read(fd, buf, sizeof buf)) > 0) response.append(buf, got);
  ::close(fd);
  int status = 0;
  std::sscanf(response.c_str(), "HTTP/%*s %d", &status);
  const size_t body = response.find("\r\n\r\n");
  return {status, body == std::string::npos ? "" : response.substr(body + 4)};
}

inline std::pair<int, std::string> HttpGet(int port, const std::string& path) {
  return Http(port, "GET", path);
}

// The value of the sample `name` (with its labels, if any) in Prometheus text, or -1.
inline double Metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}
}  // namespace streamvec

#endif  // STREAMVEC_TESTS_APP_CLI_UTIL_H_
