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
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "redlease/config.hpp"
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

// The counters of one name prefix.
struct prefix_cell {
  std::string name;  // written once, before the cell is published
  std::array<std::atomic<std::uint64_t>, acquire_outcome_count> acquisitions{};
  histogram_counter wait, hold;
  std::atomic<std::uint64_t> losses{0};
};

// The prefixes counted apart (config::metrics_prefix), at most `max` and `_other`. A prefix seen
// before, or any once the table is full, is found without a lock (the published cells never change
// names); a new one takes the mutex once. Allocated only when the option is on.
class prefix_table {
 public:
  void configure(const metrics_prefix_options& o) {
    if (o.depth == 0) return;
    opts_ = o;
    cells_ = std::make_unique<prefix_cell[]>(o.max_prefixes + 1);
    cells_[o.max_prefixes].name = lock_metrics::other_prefix;
  }
  bool on() const noexcept { return cells_ != nullptr; }
  // The cell of `lock_name`'s prefix; nullptr when the option is off.
  prefix_cell* cell(std::string_view lock_name) {
    if (!cells_) return nullptr;
    const auto p = prefix_of(lock_name);
    const auto n = used_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < n; ++i)
      if (cells_[i].name == p) return &cells_[i];
    if (n == opts_.max_prefixes) return &cells_[n];  // full: no lock for the prefixes beyond the cap
    std::lock_guard g(add_);
    const auto m = used_.load(std::memory_order_relaxed);
    for (std::size_t i = n; i < m; ++i)
      if (cells_[i].name == p) return &cells_[i];
    if (m == opts_.max_prefixes) return &cells_[m];
    cells_[m].name = std::string(p);
    used_.store(m + 1, std::memory_order_release);
    return &cells_[m];
  }
  void fill(std::vector<prefix_metrics>& out) const {
    if (!cells_) return;
    const auto n = used_.load(std::memory_order_acquire);
    auto one = [&out](const prefix_cell& c) {
      prefix_metrics m;
      m.prefix = c.name;
      for (std::size_t o = 0; o < acquire_outcome_count; ++o)
        m.acquisitions[o] = c.acquisitions[o].load(std::memory_order_relaxed);
      m.wait_seconds = c.wait.snapshot();
      m.hold_seconds = c.hold.snapshot();
      m.losses = c.losses.load(std::memory_order_relaxed);
      out.push_back(std::move(m));
    };
    for (std::size_t i = 0; i < n; ++i) one(cells_[i]);
    if (n == opts_.max_prefixes) one(cells_[n]);
  }

 private:
  std::string_view prefix_of(std::string_view name) const noexcept {
    std::size_t at = 0;
    for (unsigned d = 0; d < opts_.depth; ++d) {
      at = name.find(opts_.separator, d == 0 ? 0 : at + 1);
      if (at == std::string_view::npos) return name;
    }
    return name.substr(0, at);
  }

  metrics_prefix_options opts_;
  std::unique_ptr<prefix_cell[]> cells_;
  std::atomic<std::size_t> used_{0};
  std::mutex add_;
};

struct lock_counters {
  std::array<std::array<std::atomic<std::uint64_t>, acquire_outcome_count>, lock_kind_count> acquisitions{};
  histogram_counter wait, hold, handoff;
  std::array<std::atomic<std::uint64_t>, loss_cause_count> losses{};
  std::atomic<std::uint64_t> renewals_failed{0};
  std::atomic<std::uint64_t> failovers{0};
  std::atomic<std::uint64_t> wakeups{0};
  prefix_table prefixes;

  void count(std::atomic<std::uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }
  void acquired(std::size_t kind, acquire_outcome o) noexcept {
    if (kind < lock_kind_count) count(acquisitions[kind][static_cast<std::size_t>(o)]);
  }
  // Everything but the parts another layer keeps (NOSCRIPT fallbacks, redirects). Throws
  // std::bad_alloc only (the prefixes' names).
  void fill(lock_metrics& m) const {
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
    prefixes.fill(m.by_prefix);
  }
};

}  // namespace redlease::detail
