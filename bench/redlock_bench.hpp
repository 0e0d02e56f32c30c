// SPDX-License-Identifier: MIT
// The RedLock cases of redlease-bench (issue 38, bench/redlock_bench.cpp): acquisition latency over
// 1, 3 and 5 servers (R1-*) and many handles over 3 servers (B2-async-redlock-3), against private
// redis-servers of their own, with the ceilings of those servers measured in the same run.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_support.hpp"
#include "redlease/config.hpp"

namespace redlease::cli::bench {

/// What the RedLock section takes from the run (bench_support.hpp).
using redlock_run = section_run;

/// The section's case names, in the order they run (for --only, --check and the listing).
const std::vector<std::string>& redlock_case_names();

/// Runs the wanted cases: starts the private redis-servers they need (3, or 5 with R1-redlock-5,
/// each on a free loopback port), measures their ceilings, the cases, and stops the servers. A case
/// that fails is emitted with its error; without redis-server on PATH every wanted case is.
void run_redlock_cases(const redlock_run& run);

}  // namespace redlease::cli::bench
