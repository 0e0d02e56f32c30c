// SPDX-License-Identifier: MIT
/// @file
/// How the rig tests (sentinel_rig_test, cluster_rig_test) measure and print their timings.
#pragma once

#include <chrono>
#include <cstdio>

namespace redlease::test {

/// The clock of the measurements.
using rig_clock = std::chrono::steady_clock;

/// Seconds since `start`.
inline double seconds_since(rig_clock::time_point start) {
  return std::chrono::duration<double>(rig_clock::now() - start).count();
}

/// Prints "[   TIME   ] what: N.NNN s" in gtest's style.
inline void report(const char* what, double seconds) {
  std::printf("[   TIME   ] %s: %.3f s\n", what, seconds);
  std::fflush(stdout);
}

}  // namespace redlease::test
