// SPDX-License-Identifier: MIT
// The semaphore cases of redlease-bench (issue 40, bench/semaphore_bench.cpp): acquire(1) +
// release(1) pairs on one `redlease::semaphore` with ample permits, blocking (16 threads, as
// B2-sync) and async (256 owners, as B2-async), against the pair ceiling of the same two scripts
// driven raw in the same run; and the hand-off of 2 permits among 16 contending threads (as B3t).
#pragma once

#include <string>
#include <vector>

#include "bench_support.hpp"

namespace redlease::cli::bench {

/// The section's case names, in the order they run (for --only, --check and the listing):
/// B5-sem-sync, B5-sem-sync-raw (the yardstick of a blocking client without the library),
/// B5-sem-async, B5-sem-handoff, B5-permits-watchdog (permit_bench.hpp).
const std::vector<std::string>& semaphore_case_names();

/// Runs the wanted cases against the run's own server (`run.cfg`): measures the semaphore pair
/// ceiling first (only when a pair case is wanted), then the cases. `floor_rtt_us` is the run's
/// sequential PING round trip, the unit of the hand-off bound. B5-permits-watchdog holds
/// `run.watchdog_locks` permits for `run.watchdog_window_s` (none: no such case). A case that fails
/// is emitted with its error.
void run_semaphore_cases(const section_run& run, double floor_rtt_us);

}  // namespace redlease::cli::bench
