// SPDX-License-Identifier: MIT
/// @file
/// Commands timed by the server itself (SLOWLOG), for tests that show a script does less work than
/// another on the same data.
#pragma once

#include <algorithm>

#include "raw_client.hpp"

namespace redlease::test {

/// Makes the server log every command (slowlog-log-slower-than 0, room for 1024 of them) and empties
/// the log. A fixed bound on a script's time (100 ms) fails on a loaded machine, where the server's
/// time scales with everything else: compare it with a reference command run in the same minute.
inline void log_every_command(raw_client& c) {
  c({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
  c({"CONFIG", "SET", "slowlog-max-len", "1024"});
  c({"SLOWLOG", "RESET"});
}

/// The server's time, in microseconds, of the slowest command it logged since its log was last
/// emptied; -1 if it logged none. Empties the log again.
inline long long slowest_logged_us(raw_client& c) {
  auto r = c({"SLOWLOG", "GET", "-1"});
  long long slowest = -1;
  for (const auto& e : r.elements)
    if (e.elements.size() > 2) slowest = std::max(slowest, e.elements[2].integer);
  c({"SLOWLOG", "RESET"});
  return slowest;
}

}  // namespace redlease::test
