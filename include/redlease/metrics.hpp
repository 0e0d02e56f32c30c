// SPDX-License-Identifier: MIT
/// @file
/// What a client counts about its locks (`client_stats::locks`, from `client::stats()`): plain data,
/// a snapshot. The counters behind it are relaxed atomics and fixed-bucket histograms, cheap enough
/// to stay on; `docs/metrics.md` maps them to Prometheus names.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace redlease {

/// How an acquisition ended.
enum class acquire_outcome : std::uint8_t {
  granted,    ///< the lock (permits, the latch's zero) was granted
  timed_out,  ///< its wait ran out, or a backoff wait gave up (`errc::attempts_exhausted`)
  cancelled,  ///< cancelled (`errc::operation_aborted`)
  refused,    ///< refused for a reason the caller or the server's setup gives: a re-entry of a lost
              ///< hold, a lock that cannot be re-entered, a key of another type, an ACL, bad
              ///< arguments, too few replicas
  error,      ///< anything else: the connection, a timeout of a request, the client closed
};
/// The number of `acquire_outcome` values.
inline constexpr std::size_t acquire_outcome_count = 5;
/// The number of `lock_kind` values (redlease/lock.hpp).
inline constexpr std::size_t lock_kind_count = 8;

/// Why a hold was lost, as the metrics count it: `lost_reason` (`failover` when the cause was a
/// master that changed: `errc::master_switched`).
enum class loss_cause : std::uint8_t { expired, deleted, taken, failover, quorum, max_hold };
/// The number of `loss_cause` values.
inline constexpr std::size_t loss_cause_count = 6;

/// A histogram of durations with fixed buckets (Prometheus' shape): `counts[i]` observations of at
/// most `bounds[i]` seconds and more than the bound before (not cumulative); the last count, above
/// every bound.
struct duration_histogram {
  /// The buckets' upper bounds in seconds, from 100 µs to an hour.
  static constexpr std::array<double, 18> bounds{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                 0.1,    0.25,    0.5,    1,     2.5,    10,    60,   600,   3600};
  /// Observations per bucket; the last is above every bound.
  std::array<std::uint64_t, bounds.size() + 1> counts{};
  /// The sum of the observations in seconds.
  double sum_seconds = 0;
  /// The number of observations.
  std::uint64_t count = 0;
};

/// Redirects a cluster node answered (MOVED, ASK), by the node that answered.
struct node_redirects {
  std::string node;    ///< "host:port"
  std::uint64_t moved = 0;  ///< MOVED replies
  std::uint64_t ask = 0;    ///< ASK replies
};

/// The lock metrics of one name prefix (`config::metrics_prefix`).
struct prefix_metrics {
  /// The prefix, or `lock_metrics::other_prefix` for the prefixes beyond the cap.
  std::string prefix;
  /// Acquisitions ended, by `acquire_outcome` (index), every kind together.
  std::array<std::uint64_t, acquire_outcome_count> acquisitions{};
  /// How long the granted acquisitions waited.
  duration_histogram wait_seconds;
  /// How long the holds lasted.
  duration_histogram hold_seconds;
  /// Holds lost, every cause together.
  std::uint64_t losses = 0;
};

/// The lock metrics of one client (a snapshot; each field read with a relaxed load, so fields may be
/// a few events apart from each other).
struct lock_metrics {
  /// Acquisitions ended, by `lock_kind` (index) and `acquire_outcome` (index). Every acquisition
  /// call counts once: a lock, a try_lock, a semaphore's or a latch's wait.
  std::array<std::array<std::uint64_t, acquire_outcome_count>, lock_kind_count> acquisitions{};
  /// How long acquisitions that were granted waited (from the call to the grant).
  duration_histogram wait_seconds;
  /// How long holds lasted, from the grant to the release that freed them or to their loss.
  duration_histogram hold_seconds;
  /// Hand-off: from the message that woke a waiter (an unlock, a release of permits) to its grant.
  duration_histogram handoff_seconds;
  /// Holds lost, by `loss_cause` (index).
  std::array<std::uint64_t, loss_cause_count> losses{};
  /// Renewals by the watchdog that failed (the hold was found lost, or the call failed).
  std::uint64_t renewals_failed = 0;
  /// Failovers seen (a master that changed under a Sentinel or a cluster).
  std::uint64_t failovers = 0;
  /// Waiters woken by a message on their channel.
  std::uint64_t wakeups = 0;
  /// Scripts sent again as EVAL after the server answered NOSCRIPT.
  std::uint64_t noscript_fallbacks = 0;
  /// MOVED and ASK replies per cluster node (empty outside a cluster).
  std::vector<node_redirects> redirects;
  /// The same by name prefix, in the order the prefixes were first seen, `other_prefix` last when
  /// the cap was reached; empty unless `config::metrics_prefix.depth` is set.
  std::vector<prefix_metrics> by_prefix;
  /// The prefix that counts the prefixes beyond `config::metrics_prefix.max_prefixes`.
  static constexpr const char* other_prefix = "_other";
};

}  // namespace redlease
