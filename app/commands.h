// Subcommands of the `streamvec` executable. main() only parses flags and wires modules; each
// Register* adds one subcommand to `root`. When the subcommand runs, its exit status goes into
// *exit_code: 0 success, 1 runtime failure, 2 bad input or usage (message on stderr naming the
// flag, file or byte offset).
#ifndef STREAMVEC_APP_COMMANDS_H_
#define STREAMVEC_APP_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace streamvec::app {

void RegisterTrainCommand(CLI::App& root, int* exit_code);
void RegisterEvalCommand(CLI::App& root, int* exit_code);
void RegisterNeighborsCommand(CLI::App& root, int* exit_code);
void RegisterExportCommand(CLI::App& root, int* exit_code);
void RegisterBrokerCommand(CLI::App& root, int* exit_code);
void RegisterIngestCommand(CLI::App& root, int* exit_code);
void RegisterServeCommand(CLI::App& root, int* exit_code);
void RegisterRunCommand(CLI::App& root, int* exit_code);
void RegisterCrawlCommand(CLI::App& root, int* exit_code);
void RegisterExtractCommand(CLI::App& root, int* exit_code);
void RegisterTokenizeCommand(CLI::App& root, int* exit_code);
void RegisterParamNodeCommand(CLI::App& root, int* exit_code);
void RegisterStateCommand(CLI::App& root, int* exit_code);
void RegisterVectorsCommand(CLI::App& root, int* exit_code);

}  // namespace streamvec::app

#endif  // STREAMVEC_APP_COMMANDS_H_
