// streamvec broker: placeholder until its owner fills it in.
#include <cstdio>

#include "commands.h"

namespace streamvec::app {

void RegisterBrokerCommand(CLI::App& root, int* exit_code) {
  CLI::App* cmd = root.add_subcommand("broker", "(not implemented yet)");
  cmd->callback([exit_code]() {
    std::fprintf(stderr, "streamvec broker: not implemented yet\n");
    *exit_code = 1;
  });
}

}  // namespace streamvec::app
