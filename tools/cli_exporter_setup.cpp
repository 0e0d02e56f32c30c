// SPDX-License-Identifier: MIT
// The `redlease exporter` subcommand's options, the same in every build (so that --help, the man page
// and the completions do not depend on it); without Prometheus support it says so and exits 69.
#include <iostream>

#include "exporter.hpp"

namespace redlease::cli {

#ifndef REDLEASE_CLI_EXPORTER
int run_exporter(const exporter_options&) {
  std::cerr << "redlease exporter: this redlease was built without Prometheus support (REDLEASE_WITH_PROMETHEUS)\n";
  return exit_code::unavailable;
}
#endif

void setup_exporter(CLI::App& app, action_t& action) {
  auto [cmd, o] = add_command<exporter_options>(
      app, action, "exporter",
      "Serve Prometheus metrics of the locks in Redis (held, waiters, oldest hold, permits), one SCAN pass per "
      "--interval",
      "One thread scans Redis every --interval (SCAN, never KEYS; every master of a cluster) and a scrape of\n"
      "http://ADDR/metrics serves the last pass: scrapes never cause passes. A failed pass sets\n"
      "redlease_exporter_up to 0 and drops the lock samples until a pass succeeds. Labels never carry lock\n"
      "names: only the kind, and with --prefix-depth the first segments of the names. Runs until SIGINT or\n"
      "SIGTERM.\n"
      "Exit status: 0 stopped by SIGINT or SIGTERM; 64 usage (a bad --listen, an --interval under a second);\n"
      "69 Redis unavailable at start (unreachable, authentication, TLS, no Sentinel, not Redis), ADDR\n"
      "cannot be bound, or this redlease was built without Prometheus support; 78 an ACL permission the\n"
      "user lacks or a renamed command; 70 an unexpected error.",
      run_exporter);
  cmd->add_option("pattern", o->pattern, "Glob over the lock names to export (default: *)")
      ->check(lock_name_validator());
  cmd->add_option("--listen", o->listen,
                  "HOST:PORT to serve /metrics on, HOST an IP address ([::1]:PORT for IPv6; port 0: any free "
                  "port, printed) (default: 127.0.0.1:9716)");
  cmd->add_option("--interval", o->interval, "Time between scan passes (default 15s, at least 1s)")
      ->check(duration_validator());
  cmd->add_option("--prefix-depth", o->prefix_depth,
                  "Label the metrics with prefix=: the first N segments of the lock names (default 0: no prefix "
                  "label)")
      ->check(CLI::Range(0u, 16u));
  cmd->add_option("--prefix-separator", o->prefix_separator,
                  "The character between the segments of a name, with --prefix-depth (default :)");
  cmd->add_option("--max-prefixes", o->max_prefixes,
                  "At most N prefix labels, kept once given; the rest are counted under prefix=\"_other\" (default "
                  "100, at most 10000)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{10000}));
  cmd->add_flag("--by-node", o->by_node, "Also label redlease_redis_locks with the master (node=HOST:PORT)");
  add_connection_flags(cmd, o->url);
}

}  // namespace redlease::cli
