// SPDX-License-Identifier: MIT
#include "watchdog/scheduler.hpp"

#include <algorithm>

namespace redlease::detail {

void schedule::place(const node& n, std::size_t i) {
  heap_[i] = n;
  n.e->slot = static_cast<std::uint32_t>(i);
}

void schedule::sift_up(std::size_t i) {
  node n = heap_[i];
  while (i > 0) {
    std::size_t parent = (i - 1) / arity;
    if (!(n < heap_[parent])) break;
    place(heap_[parent], i);
    i = parent;
  }
  place(n, i);
}

void schedule::sift_down(std::size_t i) {
  node n = heap_[i];
  const std::size_t size = heap_.size();
  for (;;) {
    std::size_t first = arity * i + 1;
    if (first >= size) break;
    std::size_t child = first;
    for (std::size_t c = first + 1; c < std::min(first + arity, size); ++c)
      if (heap_[c] < heap_[child]) child = c;
    if (!(heap_[child] < n)) break;
    place(heap_[child], i);
    i = child;
  }
  place(n, i);
}

void schedule::push(watch_entry* e) {
  e->queued = true;
  heap_.push_back(node{e->due, e->seq, e});
  sift_up(heap_.size() - 1);
}

watch_entry* schedule::pop() {
  watch_entry* top = heap_.front().e;
  top->queued = false;
  node last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) {
    place(last, 0);
    sift_down(0);
  }
  return top;
}

void schedule::add(watch_entry* e, clock::time_point due) {
  e->due = due;
  e->seq = ++seq_;
  if (!e->queued) return push(e);
  // Already scheduled: move it in place (one sift instead of a remove and a push).
  std::size_t i = e->slot;
  heap_[i].due = due;
  heap_[i].seq = e->seq;
  if (i > 0 && heap_[i] < heap_[(i - 1) / arity]) sift_up(i);
  else sift_down(i);
}

void schedule::remove(watch_entry* e) {
  if (!e->queued) return;
  e->queued = false;
  std::size_t i = e->slot;
  node last = heap_.back();
  heap_.pop_back();
  if (last.e == e) return;
  place(last, i);
  if (i > 0 && last < heap_[(i - 1) / arity]) sift_up(i);
  else sift_down(i);
}

clock::time_point schedule::next() const { return heap_.empty() ? clock::time_point::max() : heap_.front().due; }

schedule::due_items schedule::take_due(clock::time_point now) {
  due_items out;
  std::vector<watch_entry*> waiting;
  auto horizon = now + early_;
  // Entries that stay scheduled are moved to their deadline in place (one sift, no pop and push).
  auto to_deadline = [&](watch_entry* e) {
    e->due = e->valid_until;
    e->seq = ++seq_;
    heap_.front().due = e->due;
    heap_.front().seq = e->seq;
    sift_down(0);
  };
  while (!heap_.empty() && heap_.front().due <= horizon) {
    watch_entry* e = heap_.front().e;
    if (now >= e->valid_until) {
      pop();
      out.expired.push_back(e);
    } else if (e->renewable && !e->in_flight) {
      // Renewing a little early is harmless and lets nearby renewals share one script call.
      e->in_flight = true;
      out.renew.push_back(e);
      to_deadline(e);
    } else if (e->due <= now) {
      to_deadline(e);  // nothing to do before its deadline
    } else {
      pop();
      waiting.push_back(e);  // due within the early window, but nothing to send early: keeps its place
    }
  }
  for (auto* e : waiting) push(e);
  return out;
}

clock::time_point aligned_due(clock::time_point due, clock::duration interval, std::uint64_t batch,
                              std::uint64_t count) noexcept {
  if (count <= 1 || interval <= clock::duration::zero()) return due;
  const auto span = interval.count();
  // batch / count of the interval, in the clock's ticks (no overflow: batch < count <= 2^14, and
  // an interval beyond 2^49 ns, six days, is not a watchdog's).
  const auto phase = static_cast<clock::rep>(static_cast<unsigned long long>(span) * (batch % count) / count);
  auto past = (due.time_since_epoch().count() - phase) % span;
  if (past < 0) past += span;
  return due - clock::duration(past);
}

}  // namespace redlease::detail
