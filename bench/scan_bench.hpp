// SPDX-License-Identifier: MIT
// T1-scan (bench/scan_bench.cpp): the scan pass of `redlease top` and `redlease exporter`
// (tools/lock_scan.hpp) over many held locks on the run's server.
#pragma once

#include <cstddef>
#include <string>

#include "bench_support.hpp"

namespace redlease::cli::bench {

/// `n` held locks (Redisson's reentrant hash, one holder, a 5-minute TTL) under `run.prefix`, then
/// three scan passes over them (match `<prefix>scan:*`): the median pass's wall time and the Redis
/// CPU it cost (INFO cpu), the share of one Redis core that top takes at one refresh a second and
/// the exporter at a 15 s interval, and the interval top's load cap (20 x the pass) picks. Deletes
/// its keys.
row scan_pass(const section_run& run, const std::string& name, std::size_t n);

}  // namespace redlease::cli::bench
