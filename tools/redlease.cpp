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
  // Each subcommand sets its own footer (a subcommand without one would show this one).
  app.footer(
      "Exit status (each subcommand's --help has its own list): 64 usage error; 69 Redis unavailable\n"
      "(unreachable, authentication, TLS, no Sentinel, not Redis, or refusing for now: maxclients, OOM,\n"
      "NOREPLICAS, LOADING, BUSY); 70 an unexpected error; 78 a configuration problem (an ACL permission\n"
      "the user lacks, a renamed command), and for `doctor` a check that FAILs; 65 a key that is not a\n"
      "lock of that kind (run, unlock). `run`: the command's status (128+N if killed by signal N), 75 not\n"
      "acquired within --wait, 76 lock lost, 79 the command succeeded but the lock was not released,\n"
      "126/127 command not executable/not found. `status`, `unlock`, `doctor`: 0 done (doctor: no check\n"
      "FAILs). `demo`, `bench`: 0 every step (every --check) passed, 1 one failed.\n"
      "\n"
      "Environment: REDLEASE_URL (default redis://127.0.0.1:6379), REDLEASE_PASSWORD,\n"
      "REDLEASE_SENTINEL_PASSWORD, REDLEASE_CACERT, REDLEASE_CERT, REDLEASE_KEY.");
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
