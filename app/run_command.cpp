// streamvec run: placeholder until its owner fills it in.
#include <cstdio>

#include "commands.h"

namespace streamvec::app {

void RegisterRunCommand(CLI::App& root, int* exit_code) {
  CLI::App* cmd = root.add_subcommand("run", "(not implemented yet)");
  cmd->callback([exit_code]() {
    std::fprintf(stderr, "streamvec run: not implemented yet\n");
    *exit_code = 1;
  });
}

}  // namespace streamvec::app
