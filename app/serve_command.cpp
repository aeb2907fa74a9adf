// streamvec serve: placeholder until its owner fills it in.
#include <cstdio>

#include "commands.h"

namespace streamvec::app {

void RegisterServeCommand(CLI::App& root, int* exit_code) {
  CLI::App* cmd = root.add_subcommand("serve", "(not implemented yet)");
  cmd->callback([exit_code]() {
    std::fprintf(stderr, "streamvec serve: not implemented yet\n");
    *exit_code = 1;
  });
}

}  // namespace streamvec::app
