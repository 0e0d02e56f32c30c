// SPDX-License-Identifier: MIT
// Unit tests of the watchdog's sans-io schedule (src/watchdog/scheduler.hpp), on fabricated time.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <vector>

#include "watchdog/scheduler.hpp"

namespace redlease::detail {
namespace {

using namespace std::chrono_literals;
using ptrs = std::vector<watch_entry*>;

// An arbitrary fixed origin: nothing here depends on the real clock.
const clock::time_point t0 = clock::time_point{} + 1000h;

watch_entry renewable_until(clock::time_point valid_until) {
  watch_entry e;
  e.valid_until = valid_until;
  e.renewable = true;
  return e;
}

watch_entry watched_until(clock::time_point valid_until) {
  watch_entry e;
  e.valid_until = valid_until;
  e.renewable = false;
  return e;
}

TEST(Schedule, EmptySchedule) {
  schedule s(0ms);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.next(), clock::time_point::max());
  auto d = s.take_due(t0);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_TRUE(d.expired.empty());
}

TEST(Schedule, DueEntryIsHandedOutAndStaysScheduledAtItsDeadline) {
  schedule s(0ms);
  watch_entry e = renewable_until(t0 + 30s);
  s.add(&e, t0 + 10s);
  EXPECT_TRUE(e.queued);
  EXPECT_EQ(e.due, t0 + 10s);
  EXPECT_EQ(s.next(), t0 + 10s);

  // Not yet due.
  auto d = s.take_due(t0 + 10s - 1ms);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_TRUE(d.expired.empty());
  EXPECT_FALSE(e.in_flight);

  d = s.take_due(t0 + 10s);
  EXPECT_EQ(d.renew, ptrs{&e});
  EXPECT_TRUE(d.expired.empty());
  EXPECT_TRUE(e.in_flight);
  // Still scheduled, now at its deadline, so a renewal that never answers still ends in `expired`.
  EXPECT_TRUE(e.queued);
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(e.due, t0 + 30s);
  EXPECT_EQ(s.next(), t0 + 30s);

  // In flight: not handed out again before the deadline.
  d = s.take_due(t0 + 20s);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_TRUE(d.expired.empty());
  d = s.take_due(t0 + 30s - 1ms);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_TRUE(d.expired.empty());

  d = s.take_due(t0 + 30s);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_EQ(d.expired, ptrs{&e});
  EXPECT_FALSE(e.queued);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.next(), clock::time_point::max());
}

TEST(Schedule, RenewalAnsweredReschedules) {
  schedule s(0ms);
  watch_entry e = renewable_until(t0 + 30s);
  s.add(&e, t0 + 10s);
  ASSERT_EQ(s.take_due(t0 + 10s).renew, ptrs{&e});

  // The renewal succeeded: the caller extends the lease and schedules the next renewal.
  e.in_flight = false;
  e.valid_until = t0 + 40s;
  s.add(&e, t0 + 20s);
  EXPECT_EQ(s.size(), 1u);  // re-adding replaces the entry
  EXPECT_EQ(s.next(), t0 + 20s);

  EXPECT_TRUE(s.take_due(t0 + 19s).renew.empty());
  auto d = s.take_due(t0 + 20s);
  EXPECT_EQ(d.renew, ptrs{&e});
  EXPECT_TRUE(d.expired.empty());
  EXPECT_EQ(s.next(), t0 + 40s);
}

TEST(Schedule, EntryPastValidUntilExpires) {
  schedule s(0ms);
  // The caller fell behind: when the entry is first looked at, its lease is already over.
  watch_entry late = renewable_until(t0 + 5s);
  watch_entry fine = renewable_until(t0 + 60s);
  s.add(&late, t0 + 4s);
  s.add(&fine, t0 + 6s);
  auto d = s.take_due(t0 + 7s);
  EXPECT_EQ(d.expired, ptrs{&late});
  EXPECT_EQ(d.renew, ptrs{&fine});
  EXPECT_FALSE(late.in_flight);
  EXPECT_FALSE(late.queued);
  EXPECT_TRUE(fine.queued);
  EXPECT_EQ(s.size(), 1u);

  // Exactly at valid_until counts as expired.
  watch_entry edge = renewable_until(t0 + 100s);
  s.add(&edge, t0 + 100s);
  d = s.take_due(t0 + 100s);
  EXPECT_EQ(d.expired, (ptrs{&fine, &edge}));  // fine was rescheduled at t0+60s
  EXPECT_TRUE(d.renew.empty());
  EXPECT_TRUE(s.empty());
}

TEST(Schedule, EarlyWindowBatches) {
  schedule s(1s);
  watch_entry a = renewable_until(t0 + 30s);
  watch_entry b = renewable_until(t0 + 31s);
  watch_entry c = renewable_until(t0 + 32s);
  watch_entry far = renewable_until(t0 + 60s);
  s.add(&a, t0 + 10s);
  s.add(&b, t0 + 10s + 500ms);
  s.add(&c, t0 + 11s);  // exactly at the edge of the window
  s.add(&far, t0 + 11s + 1ms);

  // Nothing is due yet at t0+8.9s (window reaches t0+9.9s).
  EXPECT_TRUE(s.take_due(t0 + 8900ms).renew.empty());

  auto d = s.take_due(t0 + 10s);
  EXPECT_EQ(d.renew, (ptrs{&a, &b, &c}));
  EXPECT_TRUE(d.expired.empty());
  EXPECT_TRUE(a.in_flight);
  EXPECT_TRUE(b.in_flight);
  EXPECT_TRUE(c.in_flight);
  EXPECT_FALSE(far.in_flight);
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(s.next(), t0 + 11s + 1ms);
  EXPECT_EQ(a.due, t0 + 30s);
  EXPECT_EQ(b.due, t0 + 31s);
  EXPECT_EQ(c.due, t0 + 32s);
}

TEST(Schedule, EarlyWindowCanBeTriggeredBeforeAnythingIsDue) {
  // The window is relative to `now`: an entry a little in the future is taken early.
  schedule s(2s);
  watch_entry a = renewable_until(t0 + 30s);
  s.add(&a, t0 + 10s);
  auto d = s.take_due(t0 + 8s);
  EXPECT_EQ(d.renew, ptrs{&a});
}

TEST(Schedule, NonRenewableIsNeverHandedOutAndExpiresAtItsDeadline) {
  schedule s(1s);
  watch_entry n = watched_until(t0 + 10s);
  s.add(&n, t0 + 10s);

  // Inside the early window, but there is nothing to renew.
  auto d = s.take_due(t0 + 9500ms);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_TRUE(d.expired.empty());
  EXPECT_FALSE(n.in_flight);
  EXPECT_TRUE(n.queued);

  d = s.take_due(t0 + 10s);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_EQ(d.expired, ptrs{&n});
  EXPECT_TRUE(s.empty());
}

TEST(Schedule, NonRenewableScheduledEarlyMovesToItsDeadline) {
  schedule s(0ms);
  watch_entry n = watched_until(t0 + 10s);
  s.add(&n, t0 + 3s);
  auto d = s.take_due(t0 + 3s);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_TRUE(d.expired.empty());
  EXPECT_FALSE(n.in_flight);
  EXPECT_TRUE(n.queued);
  EXPECT_EQ(n.due, t0 + 10s);
  EXPECT_EQ(s.next(), t0 + 10s);

  for (auto now : {t0 + 4s, t0 + 9s, t0 + 9999ms}) {
    d = s.take_due(now);
    EXPECT_TRUE(d.renew.empty());
    EXPECT_TRUE(d.expired.empty());
  }
  d = s.take_due(t0 + 11s);
  EXPECT_EQ(d.expired, ptrs{&n});
  EXPECT_TRUE(d.renew.empty());
}

TEST(Schedule, InFlightEntryIsNotHandedOutAgain) {
  schedule s(0ms);
  watch_entry e = renewable_until(t0 + 30s);
  e.in_flight = true;
  s.add(&e, t0 + 10s);
  auto d = s.take_due(t0 + 10s);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_TRUE(d.expired.empty());
  EXPECT_EQ(e.due, t0 + 30s);
  EXPECT_EQ(s.take_due(t0 + 30s).expired, ptrs{&e});
}

TEST(Schedule, MixedRenewableAndWatched) {
  schedule s(500ms);
  watch_entry r = renewable_until(t0 + 30s);
  watch_entry w = watched_until(t0 + 10s + 200ms);
  s.add(&r, t0 + 10s);
  s.add(&w, t0 + 10s + 200ms);
  auto d = s.take_due(t0 + 10s);
  EXPECT_EQ(d.renew, ptrs{&r});
  EXPECT_TRUE(d.expired.empty());
  EXPECT_EQ(s.next(), t0 + 10s + 200ms);
  d = s.take_due(t0 + 10s + 200ms);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_EQ(d.expired, ptrs{&w});
  EXPECT_EQ(s.size(), 1u);
}

TEST(Schedule, Remove) {
  schedule s(0ms);
  watch_entry a = renewable_until(t0 + 30s);
  watch_entry b = renewable_until(t0 + 30s);
  watch_entry c = renewable_until(t0 + 30s);
  s.add(&a, t0 + 1s);
  s.add(&b, t0 + 2s);
  s.add(&c, t0 + 3s);
  EXPECT_EQ(s.size(), 3u);

  s.remove(&b);
  EXPECT_FALSE(b.queued);
  EXPECT_EQ(s.size(), 2u);
  s.remove(&b);  // removing twice is a no-op
  EXPECT_EQ(s.size(), 2u);

  s.remove(&a);
  EXPECT_EQ(s.next(), t0 + 3s);

  watch_entry never = renewable_until(t0 + 30s);
  s.remove(&never);  // never added: no-op
  EXPECT_EQ(s.size(), 1u);

  auto d = s.take_due(t0 + 10s);
  EXPECT_EQ(d.renew, ptrs{&c});
  EXPECT_FALSE(b.in_flight);

  // An entry handed out for renewal can be removed (the hold was released meanwhile).
  s.remove(&c);
  EXPECT_TRUE(s.empty());
  d = s.take_due(t0 + 100s);
  EXPECT_TRUE(d.renew.empty());
  EXPECT_TRUE(d.expired.empty());
}

TEST(Schedule, NextOrdering) {
  schedule s(0ms);
  watch_entry a = renewable_until(t0 + 60s);
  watch_entry b = renewable_until(t0 + 60s);
  watch_entry c = renewable_until(t0 + 60s);
  s.add(&a, t0 + 5s);
  EXPECT_EQ(s.next(), t0 + 5s);
  s.add(&b, t0 + 3s);
  EXPECT_EQ(s.next(), t0 + 3s);
  s.add(&c, t0 + 4s);
  EXPECT_EQ(s.next(), t0 + 3s);

  // Re-adding moves an entry.
  s.add(&b, t0 + 7s);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.next(), t0 + 4s);

  // Entries come out in due order.
  auto d = s.take_due(t0 + 10s);
  EXPECT_EQ(d.renew, (ptrs{&c, &a, &b}));
}

TEST(Schedule, TiesKeepInsertionOrder) {
  schedule s(0ms);
  std::vector<watch_entry> es(5, renewable_until(t0 + 60s));
  for (auto& e : es) s.add(&e, t0 + 1s);
  // Re-adding the first puts it after the others at the same time.
  s.add(&es[0], t0 + 1s);
  EXPECT_EQ(s.size(), 5u);
  auto d = s.take_due(t0 + 1s);
  EXPECT_EQ(d.renew, (ptrs{&es[1], &es[2], &es[3], &es[4], &es[0]}));
}

TEST(Schedule, ManyEntries) {
  schedule s(0ms);
  std::vector<watch_entry> es(1000);
  for (std::size_t i = 0; i < es.size(); ++i) {
    es[i] = renewable_until(t0 + 100s);
    s.add(&es[i], t0 + std::chrono::milliseconds(static_cast<long long>((i * 7919) % 1000)));
  }
  EXPECT_EQ(s.size(), 1000u);
  auto d = s.take_due(t0 + 499ms);
  EXPECT_EQ(d.renew.size(), 500u);
  d = s.take_due(t0 + 999ms);
  EXPECT_EQ(d.renew.size(), 500u);
  EXPECT_EQ(s.size(), 1000u);
  EXPECT_EQ(s.next(), t0 + 100s);
  d = s.take_due(t0 + 100s);
  EXPECT_EQ(d.expired.size(), 1000u);
  EXPECT_TRUE(s.empty());
}

// The schedule against a plain ordered model under random adds, removes and takes: the same
// entries come out, in the same order, and next() agrees.
TEST(Schedule, MatchesAnOrderedModelUnderRandomOperations) {
  std::mt19937 rng(12345);
  constexpr std::size_t n = 300;
  std::vector<watch_entry> es(n);
  for (auto& e : es) e = renewable_until(t0 + 1000s);
  schedule s(0ms);
  std::map<std::pair<clock::time_point, long long>, watch_entry*> model;  // (due, order of adding)
  std::map<watch_entry*, std::pair<clock::time_point, long long>> where;
  long long order = 0;
  auto model_add = [&](watch_entry* e, clock::time_point due) {
    if (auto it = where.find(e); it != where.end()) {
      model.erase(it->second);
      where.erase(it);
    }
    std::pair k{due, ++order};
    model[k] = e;
    where[e] = k;
  };
  auto now = t0;
  for (int step = 0; step < 20000; ++step) {
    auto& e = es[rng() % n];
    switch (rng() % 4) {
      case 0:
      case 1: {
        auto due = now + std::chrono::milliseconds(rng() % 500);
        s.add(&e, due);
        model_add(&e, due);
        break;
      }
      case 2:
        s.remove(&e);
        if (auto it = where.find(&e); it != where.end()) {
          model.erase(it->second);
          where.erase(it);
        }
        break;
      case 3: {
        now += std::chrono::milliseconds(rng() % 50);
        auto d = s.take_due(now);
        ptrs expect;
        while (!model.empty() && model.begin()->first.first <= now) {
          expect.push_back(model.begin()->second);
          where.erase(model.begin()->second);
          model.erase(model.begin());
        }
        ASSERT_EQ(d.renew, expect) << "step " << step;
        for (auto* x : d.renew) {
          x->in_flight = false;  // the renewal "answered": back to its deadline, as the schedule did
          model_add(x, x->valid_until);
        }
        break;
      }
    }
    ASSERT_EQ(s.size(), model.size()) << "step " << step;
    ASSERT_EQ(s.next(), model.empty() ? clock::time_point::max() : model.begin()->first.first) << "step " << step;
  }
}

// A cluster's holds of one slot fall due at the slot's phase of the interval, never later than
// unaligned and at most an interval earlier; different slots at different phases.
TEST(aligned_due, the_holds_of_one_batch_fall_due_together_and_never_late) {
  const clock::duration interval = 1000ms;
  const std::uint64_t count = 16384;
  std::minstd_rand rng(7);  // fixed: repeatable
  for (std::uint64_t batch : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{8191}, std::uint64_t{16383}}) {
    clock::time_point first{};
    for (int i = 0; i < 200; ++i) {
      const auto due = clock::time_point(std::chrono::milliseconds(1'000'000 + rng() % 5'000'000)) +
                       std::chrono::nanoseconds(rng() % 1'000'000);
      const auto at = aligned_due(due, interval, batch, count);
      ASSERT_LE(at, due);
      ASSERT_GT(at, due - interval);
      if (i == 0) first = at;
      // Every due time of the batch is a whole number of intervals from every other.
      ASSERT_EQ((at - first) % interval, clock::duration::zero()) << "batch " << batch;
    }
  }
  const auto due = clock::time_point(12'345'678ms);
  EXPECT_NE(aligned_due(due, interval, 0, count), aligned_due(due, interval, 8192, count));
  EXPECT_EQ(aligned_due(due, interval, 8192, count) - aligned_due(due, interval, 0, count), interval / 2)
      << "batch 8192's phase is half an interval after batch 0's";
  EXPECT_EQ(aligned_due(due, interval, 5, 1), due) << "one batch (one master): unaligned";
}

}  // namespace
}  // namespace redlease::detail
