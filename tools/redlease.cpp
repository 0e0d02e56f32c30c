// SPDX-License-Identifier: MIT
// The redlease command-line tool: a Redis lock as easy as flock(1).
#include <iostream>
#include <string>
#include <utility>

#include "commands.hpp"
#include "redlease/redlease.hpp"
#include "redlease/version.hpp"

int main(int argc, char** argv) {
  using namespace redlease::cli;
  CLI::App app{"redlease: distributed locks on Redis (Redisson-compatible), from the shell"};
  app.set_version_flag("--version", "redlease " REDLEASE_VERSION_STRING);
  app.require_subcommand(1);
  app.footer(
      "Exit status: the child's status for `run` (128+N if killed by signal N); 75 lock not acquired\n"
      "within --wait; 76 lock lost while the child ran; 64 usage error; 65 the key is not a lock of that\n"
      "kind; 69 Redis unreachable or authentication failed; 126/127 command not executable/not found;\n"
      "78 `doctor` found a check that FAILs.\n"
      "Environment: REDLEASE_URL (default redis://127.0.0.1:6379), REDLEASE_PASSWORD.");
  action_t action;
  setup_run(app, action);
  setup_status(app, action);
  setup_unlock(app, action);
  setup_demo(app, action);
  setup_bench(app, action);
  setup_doctor(app, action);
  // A first word that is no option must name a subcommand: CLI11 would call it an extra argument and
  // say "A subcommand is required", as if none had been given.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : std::as_const(app).get_subcommands([](const CLI::App*) { return true; })) {
      found = found || sub->check_name(argv[1]);
      if (!sub->get_group().empty()) known += (known.empty() ? "" : ", ") + sub->get_name();  // not the hidden ones
    }
    if (!found) {
      std::cerr << "redlease: unknown command '" << printable(argv[1]) << "' (commands: " << known
                << "; see redlease --help)\n";
      return exit_code::usage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : exit_code::usage;
  }
  if (!action) {
    std::cerr << app.help();
    return exit_code::usage;
  }
  try {
    return action();
  } catch (const redlease::error& e) {
    std::cerr << "redlease: " << e.what() << "\n";
    return exit_code_for(e.code());
  } catch (const std::exception& e) {
    std::cerr << "redlease: " << e.what() << "\n";
    return exit_code::software;
  }
}
