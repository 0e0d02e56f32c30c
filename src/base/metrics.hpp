// SPDX-License-Identifier: MIT
// The counters behind redlease::lock_metrics: relaxed atomics and fixed-bucket histograms, written
// on the client's executor (and by a blocking caller standing in for it) and read by client::stats
// from any thread. No lock on the hot path: an observation is a bucket search and three relaxed adds.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "redlease/metrics.hpp"

namespace redlease::detail {

class histogram_counter {
 public:
  void observe(std::chrono::nanoseconds d) noexcept {
    const double s = std::max(0.0, std::chrono::duration<double>(d).count());
    const auto& b = duration_histogram::bounds;
    const auto i = static_cast<std::size_t>(std::lower_bound(b.begin(), b.end(), s) - b.begin());
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<std::uint64_t>(std::max<std::int64_t>(0, d.count())), std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
  }
  duration_histogram snapshot() const noexcept {
    duration_histogram h;
    for (std::size_t i = 0; i < h.counts.size(); ++i) h.counts[i] = counts_[i].load(std::memory_order_relaxed);
    h.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
    h.count = count_.load(std::memory_order_relaxed);
    return h;
  }

 private:
  std::array<std::atomic<std::uint64_t>, duration_histogram::bounds.size() + 1> counts_{};
  std::atomic<std::uint64_t> sum_ns_{0};
  std::atomic<std::uint64_t> count_{0};
};

struct lock_counters {
  std::array<std::array<std::atomic<std::uint64_t>, acquire_outcome_count>, lock_kind_count> acquisitions{};
  histogram_counter wait, hold, handoff;
  std::array<std::atomic<std::uint64_t>, loss_cause_count> losses{};
  std::atomic<std::uint64_t> renewals_failed{0};
  std::atomic<std::uint64_t> failovers{0};
  std::atomic<std::uint64_t> wakeups{0};

  void count(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }
  void acquired(std::size_t kind, acquire_outcome o) noexcept {
    if (kind < lock_kind_count) count(acquisitions[kind][static_cast<std::size_t>(o)]);
  }
  // Everything but the parts another layer keeps (NOSCRIPT fallbacks, redirects).
  void fill(lock_metrics& m) const noexcept {
    for (std::size_t k = 0; k < lock_kind_count; ++k)
      for (std::size_t o = 0; o < acquire_outcome_count; ++o)
        m.acquisitions[k][o] = acquisitions[k][o].load(std::memory_order_relaxed);
    m.wait_seconds = wait.snapshot();
    m.hold_seconds = hold.snapshot();
    m.handoff_seconds = handoff.snapshot();
    for (std::size_t i = 0; i < loss_cause_count; ++i) m.losses[i] = losses[i].load(std::memory_order_relaxed);
    m.renewals_failed = renewals_failed.load(std::memory_order_relaxed);
    m.failovers = failovers.load(std::memory_order_relaxed);
    m.wakeups = wakeups.load(std::memory_order_relaxed);
  }
};

}  // namespace redlease::detail
