// SPDX-License-Identifier: MIT
// The machinery of the B4 cases (the watchdog at scale), shared by the single-server case
// (redlease_bench.cpp) and the Redis Cluster one (cluster_bench.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_support.hpp"
#include "redlease/redlease.hpp"

namespace redlease::cli::bench {

/// The lease of the B4 cases' locks (`config::watchdog_timeout`); the watchdog renews each once per
/// third of it.
inline constexpr std::chrono::milliseconds watchdog_lease{3000};
/// The watchdog's interval for `watchdog_lease`, in seconds.
inline constexpr double watchdog_interval_s = 1.0;

/// Acquires every lock of `keys` on `c` for one new owner, 1,000 asynchronous acquisitions in
/// flight, each completion starting the next; each lock's later loss counts into `lost`. The locks
/// stay held (by the watchdog) until the client closes. Returns the seconds it took; `lat_us`
/// receives each acquisition's latency. Throws std::runtime_error if one failed.
double acquire_all(client& c, const std::vector<std::string>& keys, std::atomic<long long>& lost,
                   std::vector<float>& lat_us);

/// Sends `cmd` over `keys`, `per_cmd` keys per command (1 on a cluster: a command never spans
/// slots), every command in one write, and returns what the replies counted.
tally keys_command(raw_conn& c, std::string_view cmd, const std::vector<std::string>& keys, std::size_t per_cmd,
                   std::initializer_list<std::string_view> tail = {});

/// One PTTL per key of `keys`, pipelined: the smallest (a missing key's -2 included), or nothing if
/// a reply was not an integer.
std::optional<long long> min_pttl(raw_conn& c, const std::vector<std::string>& keys);

/// `count` keys spread evenly over `keys` (the PTTL sample).
std::vector<std::string> spread_sample(const std::vector<std::string>& keys, std::size_t count);

/// The calls of a command since the server started (INFO commandstats, `cmdstat_<name>:calls=`).
double command_calls(raw_conn& c, std::string_view name);

}  // namespace redlease::cli::bench
