// The streamvec executable: parses flags and hands over to one subcommand (see commands.h).
#include <spdlog/cfg/env.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.h"

#ifdef STREAMVEC_LEAK_CHECK_BEFORE_EXIT
#include <sanitizer/lsan_interface.h>
#endif

int main(int argc, char** argv) {
  // SPDLOG_LEVEL=debug (or e.g. "info,kafka=debug") sets the log level from the environment.
  spdlog::cfg::load_env_levels();
  CLI::App root{"streamvec: word embeddings learned from a text stream, served while they learn"};
  root.require_subcommand(1);
  root.set_version_flag("--version", "streamvec 0.1.0");
  int exit_code = 0;
  streamvec::app::RegisterTrainCommand(root, &exit_code);
  streamvec::app::RegisterEvalCommand(root, &exit_code);
  streamvec::app::RegisterNeighborsCommand(root, &exit_code);
  streamvec::app::RegisterExportCommand(root, &exit_code);
  streamvec::app::RegisterBrokerCommand(root, &exit_code);
  streamvec::app::RegisterIngestCommand(root, &exit_code);
  streamvec::app::RegisterServeCommand(root, &exit_code);
  streamvec::app::RegisterRunCommand(root, &exit_code);
  streamvec::app::RegisterCrawlCommand(root, &exit_code);
  streamvec::app::RegisterExtractCommand(root, &exit_code);
  streamvec::app::RegisterTokenizeCommand(root, &exit_code);
  streamvec::app::RegisterParamNodeCommand(root, &exit_code);
  streamvec::app::RegisterStateCommand(root, &exit_code);
  streamvec::app::RegisterVectorsCommand(root, &exit_code);
  try {
    root.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; every real usage error exits 2.
    const int code = root.exit(e);
    return code == 0 ? 0 : 2;
  }
#ifdef STREAMVEC_LEAK_CHECK_BEFORE_EXIT
  // AddressSanitizer builds: leaks are looked for now, before cpprestsdk's thread pool is torn
  // down at exit (scripts/sanitizers/leak_check_before_exit.cpp).
  __lsan_do_leak_check();
#endif
  return exit_code;
}
