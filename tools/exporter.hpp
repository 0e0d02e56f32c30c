// SPDX-License-Identifier: MIT
// `redlease exporter`: its options, parsed in every build, and the exporter itself, compiled only
// with Prometheus support (REDLEASE_CLI_EXPORTER, from REDLEASE_WITH_PROMETHEUS).
#pragma once

#include <cstddef>
#include <string>

#include "commands.hpp"

namespace redlease::cli {

struct exporter_options {
  std::string url = default_url();
  std::string pattern = "*";
  std::string listen = "127.0.0.1:9716";
  std::string interval = "15s";
  std::string prefix_separator = ":";
  unsigned prefix_depth = 0;  // 0: no prefix label
  std::size_t max_prefixes = 100;
  bool by_node = false;
};

/// Runs the exporter until SIGINT or SIGTERM; returns the exit status. Throws redlease::error (a
/// usage error, Redis unavailable at start) for parse_and_run to report.
int run_exporter(const exporter_options& o);

}  // namespace redlease::cli
