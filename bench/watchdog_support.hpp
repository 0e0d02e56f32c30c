// SPDX-License-Identifier: MIT
// The machinery of the B4 cases (the watchdog at scale), shared by the single-server case
// (redlease_bench.cpp) and the Redis Cluster one (cluster_bench.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
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

/// Process, server and client counters at one moment (before and after a measured stretch).
struct snap {
  steady::time_point t;
  double cpu = 0, redis = 0, mem = 0;  // process CPU s, Redis CPU s (INFO cpu), Redis used_memory
  long long csw = 0;                   // the process's context switches
  client_stats st;                     // `c`'s, when given
};
/// The counters now, the server's read on `meter`.
snap take(raw_conn& meter, const client* c);

/// What a B4-style case held: its holds (locks, or permits) and what became of them.
struct held_figures {
  double holds = 0, alive = 0, watched = 0, lost = 0;
  double heap_growth = 0, rss_growth = 0;  // bytes, over taking them
  double min_ttl_ms = -1, acquire_s = 0;   // the least TTL seen; the time taking them took
};
/// B4's fields of `r` from `h` and the client's counters at the start and the end of the `secs` the
/// holds were held, per hold and per watchdog interval: "locks", "alive", "watched", "lost",
/// "round_trips_per_interval", "renew_calls_per_interval", "writes_per_interval",
/// "renewals_per_lock_per_interval", "bytes_per_lock", "rss_bytes_per_lock", "min_ttl_ms",
/// "acquire_per_s".
void fill_held(row& r, const held_figures& h, const client_stats& a, const client_stats& b, double secs);

/// Runs `start(i, finish)` for every i below `n`, at most 1,000 at once: each call's `finish(error)`
/// (empty: done) starts the next. Returns the seconds it took; `lat_us` receives each one's time from
/// its start to its finish. Throws std::runtime_error with the first error.
double run_chained(std::size_t n, const std::function<void(std::size_t, std::function<void(std::string)>)>& start,
                   std::vector<float>& lat_us);

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
