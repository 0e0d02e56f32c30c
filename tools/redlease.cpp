// SPDX-License-Identifier: MIT
// The redlease command-line tool.
#include <CLI/CLI.hpp>

#include <iostream>

#include "redlease/redlease.hpp"

int main(int argc, char** argv) {
  CLI::App app{"redlease: distributed locks on Redis"};
  app.set_version_flag("--version", std::string("redlease ") + redlease::version);
  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 64;
  }
  std::cout << app.help();
  return 0;
}
