// SPDX-License-Identifier: MIT
// The redlease command-line tool: a Redis lock as easy as flock(1).
#include <iostream>
#include <string>
#include <utility>

#include "commands.hpp"
#include "redlease/redlease.hpp"
#include "redlease/version.hpp"

namespace {

// The benchmark is its own program (bench/, not installed): `redlease bench` says so, whatever
// options follow. Hidden from the list of subcommands.
void setup_bench_pointer(CLI::App& app, redlease::cli::action_t& action) {
  auto* cmd = app.add_subcommand("bench", "The benchmark is a separate program: redlease-bench")->group("");
  cmd->allow_extras();
  cmd->footer("Exit status: 64 always (run redlease-bench instead).");
  cmd->callback([&action] {
    action = [] {
      std::cerr << "redlease bench: the benchmark is a separate program now: run redlease-bench with the same "
                   "options (built with -DREDLEASE_BUILD_BENCH=ON, in build/bench/; not installed)\n";
      return redlease::cli::exit_code::usage;
    };
  });
}

}  // namespace

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
      "lock of that kind (run, unlock, semaphore, latch). `run`: the command's status (128+N if killed by\n"
      "signal N), 75 not acquired within --wait, 76 lock lost, 79 the command succeeded but the lock was\n"
      "not released, 126/127 command not executable/not found. `status`, `unlock`, `doctor`, `top`: 0\n"
      "done (doctor: no check FAILs). `semaphore`, `latch`: 0 done, 75 `set` found one already, or `acquire`,\n"
      "`wait` ran out of --wait. `demo`: 0 every step passed, 1 one failed. `exporter`: 0 stopped by\n"
      "SIGINT or SIGTERM, 69 also when ADDR cannot be bound or Prometheus support was not built in. The\n"
      "benchmark is redlease-bench.\n"
      "\n"
      "Environment: REDLEASE_URL (default redis://127.0.0.1:6379; for --redlock, the masters' URLs separated\n"
      "by spaces), REDLEASE_PASSWORD,\n"
      "REDLEASE_SENTINEL_PASSWORD, REDLEASE_CACERT, REDLEASE_CERT, REDLEASE_KEY.");
  action_t action;
  setup_run(app, action);
  setup_status(app, action);
  setup_unlock(app, action);
  setup_demo(app, action);
  setup_bench_pointer(app, action);
  setup_doctor(app, action);
  setup_semaphore(app, action);
  setup_latch(app, action);
  setup_top(app, action);
  setup_exporter(app, action);
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
  return parse_and_run(app, argc, argv, action, "redlease");
}
