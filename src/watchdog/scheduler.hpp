// SPDX-License-Identifier: MIT
// The watchdog's schedule: one ordered queue of due times for every hold of a client, so that a
// single timer serves them all and renewals due close together go out in one batch.
// Sans-io: the caller feeds it the time and acts on what `take_due` hands back.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace redlease::detail {

using clock = std::chrono::steady_clock;

/// A scheduled item: what the schedule needs to know of a hold.
struct watch_entry {
  clock::time_point due{};          // when the schedule next looks at it
  clock::time_point valid_until{};  // lease deadline known to the client
  bool renewable = false;           // watchdog on: renew; off: only watch the deadline
  bool in_flight = false;           // a renewal of it is on the wire
  bool queued = false;
  std::uint32_t slot = 0;           // position in the schedule's heap, while queued
  std::uint64_t seq = 0;            // tie-breaker, set by the schedule
};

/// When a hold of batch `batch` (of `count`) whose renewal falls due at `due` is renewed instead, so
/// that the holds of one batch (a cluster slot) fall due together and go out in one script call: the
/// last time at or before `due` at the batch's phase of `interval` (`interval * batch / count` past a
/// multiple of `interval` on the steady clock). Never later than `due`, and later than
/// `due - interval`: at most one renewal more than unaligned, the first. `count` <= 1: `due`.
clock::time_point aligned_due(clock::time_point due, clock::duration interval, std::uint64_t batch,
                              std::uint64_t count) noexcept;

class schedule {
 public:
  /// What `take_due` found.
  struct due_items {
    std::vector<watch_entry*> renew;    // renew these now (they are marked in_flight)
    std::vector<watch_entry*> expired;  // their deadline passed: lost (removed from the schedule)
  };

  /// `early`: how much before its due time a renewal may go out to share a batch.
  explicit schedule(clock::duration early) : early_(early) {}

  void add(watch_entry* e, clock::time_point due);
  void remove(watch_entry* e);
  /// How much before its due time a renewal may go out (the constructor's `early`).
  clock::duration early() const { return early_; }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  /// The next time something is due, or time_point::max().
  clock::time_point next() const;
  /// Takes what is due at `now`. Entries handed out for renewal stay scheduled at their deadline
  /// (so a renewal that never answers still ends in `expired`).
  due_items take_due(clock::time_point now);

 private:
  // A 4-ary min-heap of (due, seq) keys, each entry knowing its slot. The keys live in the heap
  // itself, so sifting reads one contiguous array instead of chasing entry pointers, and four
  // children per node halve the depth (each level moved writes one entry's slot, a cache miss with
  // 100,000 holds): 24 bytes per scheduled hold (a tree node would be about sixty), O(log n) add and
  // remove.
  static constexpr std::size_t arity = 4;
  struct node {
    clock::time_point due;
    std::uint64_t seq;
    watch_entry* e;
    bool operator<(const node& o) const { return due < o.due || (due == o.due && seq < o.seq); }
  };
  void push(watch_entry* e);
  watch_entry* pop();
  void place(const node& n, std::size_t i);
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);

  clock::duration early_;
  std::vector<node> heap_;
  std::uint64_t seq_ = 0;
};

}  // namespace redlease::detail
