// SPDX-License-Identifier: MIT
// `redlease bench`: a placeholder until the benchmark suite lands.
#include <iostream>

#include "commands.hpp"

namespace redlease::cli {

void setup_bench(CLI::App& app, action_t& action) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks against the Redis server's own ceiling (not yet implemented)");
  cmd->callback([&action] {
    action = [] {
      std::cerr << "redlease bench: not implemented yet\n";
      return exit_code::software;
    };
  });
}

}  // namespace redlease::cli
