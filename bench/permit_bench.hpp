// SPDX-License-Identifier: MIT
// B5-permits-watchdog (bench/permit_bench.cpp), a case of the semaphore section
// (semaphore_bench.cpp): permits of a `redlease::permit_semaphore` kept by the watchdog, reported as
// B4 reports its locks.
#pragma once

#include <cstddef>
#include <string>

#include "bench_support.hpp"

namespace redlease::cli::bench {

/// `n` permits of one permit_semaphore named `key`, each acquired alone with no lease (so the
/// client's watchdog keeps it, `config::watchdog_timeout` = `watchdog_lease`), held for `window_s`
/// on the server of `run.cfg`. The row as B4's: an op is one permit renewal; script calls, writes
/// and round trips per interval, renewals per permit per interval, Redis and client CPU, heap per
/// permit, the least lease left (`min_ttl_ms`), every permit still out (`alive`), and the server's
/// floor (one `ZADD XX` member per permit, 1,000 per command, once per interval). Deletes its keys.
row permits_watchdog(const section_run& run, const std::string& key, std::size_t n, double window_s);

}  // namespace redlease::cli::bench
