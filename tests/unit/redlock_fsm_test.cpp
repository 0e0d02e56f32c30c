// SPDX-License-Identifier: MIT
// The RedLock's decisions (src/multi/redlock_fsm.hpp) branch by branch, without a server: the quorum
// for every mask of nodes held by another value, leftovers of our own, the validity, the release on
// every node after a failed attempt, the retry delay, and the watchdog's rounds that keep the quorum.
#include <gtest/gtest.h>

#include <bit>
#include <optional>
#include <string>
#include <vector>

#include "multi/redlock_fsm.hpp"

namespace redlease::detail {
namespace {

using namespace std::chrono_literals;
using acq = redlock_acquire_fsm::next;
using ext = redlock_extend_fsm::next;
using tp = redlock_clock::time_point;

const tp t0 = tp{} + 1h;  // any steady time: the machines only compare and subtract

TEST(redlock_fsm_test, quorum_drift_and_validity_follow_the_spec) {
  EXPECT_EQ(redlock_quorum(1), 1u);
  EXPECT_EQ(redlock_quorum(2), 2u);
  EXPECT_EQ(redlock_quorum(3), 2u);
  EXPECT_EQ(redlock_quorum(4), 3u);
  EXPECT_EQ(redlock_quorum(5), 3u);
  EXPECT_EQ(redlock_drift(10s), 102ms);  // 1 % + 2 ms
  EXPECT_EQ(redlock_valid_until(t0, 10s), t0 + 10s - 102ms);
}

// redsync's TestMutexQuorum, for 3 and 5 nodes and in both orders of answers: the nodes in `mask`
// hold a foreign value, the others grant. Acquired iff the free nodes are a majority, and decided at
// the very answer that settles it.
TEST(redlock_fsm_test, the_quorum_for_every_mask_of_nodes_prefilled_with_a_foreign_value) {
  for (std::size_t n : {3u, 5u}) {
    for (unsigned mask = 0; mask < (1u << n); ++mask) {
      for (bool reverse : {false, true}) {
        redlock_acquire_fsm fsm(n, 10s);
        const auto attempt = fsm.start(t0);
        std::size_t free_nodes = 0, granted = 0, refused = 0;
        std::optional<acq> decision;
        for (std::size_t k = 0; k < n; ++k) {
          const std::size_t i = reverse ? n - 1 - k : k;
          const bool foreign = mask & (1u << i);
          free_nodes += !foreign;
          (foreign ? refused : granted) += 1;
          const auto answer = foreign ? node_answer::taken : node_answer::granted;
          const auto got = fsm.resume(attempt, i, answer, t0 + 1ms);
          acq want = acq::wait;
          if (decision) {
            want = acq::none;
          } else if (granted >= redlock_quorum(n)) {
            want = acq::acquired;
          } else if (refused > n - redlock_quorum(n)) {
            want = acq::release_all;
          }
          ASSERT_EQ(got, want) << "n=" << n << " mask=" << mask << " answer " << k;
          if (got != acq::wait && got != acq::none) decision = got;
        }
        const unsigned popcount = static_cast<unsigned>(std::popcount(mask));
        ASSERT_EQ(free_nodes, n - popcount);
        EXPECT_EQ(decision, free_nodes >= redlock_quorum(n) ? acq::acquired : acq::release_all)
            << "n=" << n << " mask=" << mask;
      }
    }
  }
}

TEST(redlock_fsm_test, one_answer_per_node_and_attempt_counts) {
  redlock_acquire_fsm fsm(3, 10s);
  EXPECT_EQ(fsm.resume(1, 0, node_answer::granted, t0), acq::none) << "before any attempt";
  const auto a = fsm.start(t0);
  EXPECT_EQ(fsm.resume(a, 0, node_answer::granted, t0 + 1ms), acq::wait);
  EXPECT_EQ(fsm.resume(a, 0, node_answer::granted, t0 + 1ms), acq::none) << "a second answer";
  EXPECT_EQ(fsm.held(), 1u);
  EXPECT_EQ(fsm.resume(a, 7, node_answer::granted, t0 + 1ms), acq::none) << "no such node";
  EXPECT_EQ(fsm.resume(a, 1, node_answer::missing, t0 + 1ms), acq::wait) << "no SET NX answer";
  EXPECT_EQ(fsm.state(1), node_state::unknown);
}

TEST(redlock_fsm_test, one_node_is_its_own_majority_and_none_never_succeeds) {
  redlock_acquire_fsm one(1, 10s);
  EXPECT_EQ(one.resume(one.start(t0), 0, node_answer::granted, t0 + 1ms), acq::acquired);
  redlock_acquire_fsm refused(1, 10s);
  EXPECT_EQ(refused.resume(refused.start(t0), 0, node_answer::taken, t0 + 1ms), acq::release_all);
  redlock_acquire_fsm none(0, 10s);
  none.start(t0);
  EXPECT_EQ(none.resume(t0 + 1ms), acq::release_all);
}

TEST(redlock_fsm_test, a_leftover_of_our_own_counts_as_granted) {
  redlock_acquire_fsm fsm(3, 10s);
  const auto a = fsm.start(t0);
  EXPECT_EQ(fsm.resume(a, 0, node_answer::taken, t0 + 1ms), acq::wait);
  EXPECT_EQ(fsm.resume(a, 1, node_answer::ours, t0 + 1ms), acq::wait);
  EXPECT_EQ(fsm.resume(a, 2, node_answer::ours, t0 + 2ms), acq::acquired);
  EXPECT_EQ(fsm.state(1), node_state::held);
  EXPECT_EQ(fsm.valid_until(), t0 + 10s - 102ms);
}

// A quorum granted late is granted with less validity, and not at all once the validity is gone.
TEST(redlock_fsm_test, validity_shrinks_with_a_slow_node_until_an_attempt_fails_though_a_quorum_granted) {
  const auto ttl = 1000ms;  // drift 12 ms: valid until t0 + 988 ms
  for (auto slow : {1ms, 100ms, 500ms, 900ms, 987ms, 988ms, 1500ms}) {
    redlock_acquire_fsm fsm(3, ttl);
    const auto a = fsm.start(t0);
    EXPECT_EQ(fsm.resume(a, 0, node_answer::granted, t0 + 1ms), acq::wait);
    EXPECT_EQ(fsm.resume(a, 2, node_answer::taken, t0 + 1ms), acq::wait);
    const auto got = fsm.resume(a, 1, node_answer::granted, t0 + slow);
    EXPECT_EQ(fsm.held(), 2u) << "a quorum granted";
    if (slow < 988ms) {
      EXPECT_EQ(got, acq::acquired) << slow.count();
      EXPECT_EQ(fsm.valid_until() - (t0 + slow), 988ms - slow) << "the validity left to the holder";
    } else {
      EXPECT_EQ(got, acq::release_all) << slow.count() << " ms: validity ≤ 0 never succeeds";
    }
  }
}

TEST(redlock_fsm_test, a_ttl_below_the_drift_never_succeeds) {
  redlock_acquire_fsm fsm(1, 2ms);  // drift 2.02 ms
  const auto a = fsm.start(t0);
  EXPECT_EQ(fsm.resume(a, 0, node_answer::granted, t0), acq::release_all);
}

TEST(redlock_fsm_test, an_undecided_attempt_fails_when_its_validity_runs_out) {
  redlock_acquire_fsm fsm(3, 1s);
  EXPECT_EQ(fsm.resume(t0), acq::none) << "no attempt yet";
  const auto a = fsm.start(t0);
  EXPECT_EQ(fsm.resume(a, 0, node_answer::granted, t0 + 1ms), acq::wait);
  EXPECT_EQ(fsm.resume(fsm.decide_by() - 1ns), acq::wait);
  EXPECT_EQ(fsm.resume(fsm.decide_by()), acq::release_all);
  EXPECT_EQ(fsm.resume(fsm.decide_by() + 1ms), acq::none) << "decided once";
  EXPECT_EQ(fsm.resume(a, 1, node_answer::granted, fsm.decide_by()), acq::none);
}

// A quorum that can no longer be reached ends the attempt without waiting for the other nodes;
// unknowns (errors, timeouts) count against it like refusals.
TEST(redlock_fsm_test, an_attempt_fails_as_soon_as_a_quorum_is_impossible) {
  redlock_acquire_fsm fsm(5, 10s);
  const auto a = fsm.start(t0);
  EXPECT_EQ(fsm.resume(a, 0, node_answer::taken, t0 + 1ms), acq::wait);
  EXPECT_EQ(fsm.resume(a, 1, node_answer::unknown, t0 + 2ms), acq::wait);
  EXPECT_EQ(fsm.resume(a, 2, node_answer::granted, t0 + 2ms), acq::wait);
  EXPECT_EQ(fsm.resume(a, 3, node_answer::unknown, t0 + 3ms), acq::release_all) << "node 4 not awaited";
  EXPECT_EQ(fsm.state(4), node_state::pending);
  EXPECT_EQ(fsm.resume(a, 4, node_answer::granted, t0 + 4ms), acq::none);
  EXPECT_EQ(fsm.state(4), node_state::held) << "a late grant is recorded";
}

// Five simulated nodes run the engine's commands. Node 1 runs the SET but its reply times out,
// node 3 holds another client's value, node 4 answers after the decision. After `release_all` the
// engine releases on every node, and none of our keys is left: releasing only where the SET was
// granted would have left node 1's.
TEST(redlock_fsm_test, a_failed_attempt_releases_on_every_node_including_timed_out_ones) {
  std::vector<std::optional<std::string>> server(5);
  server[3] = "theirs";
  const std::string ours = "our-value";
  const auto set_nx = [&](std::size_t i) {
    if (!server[i]) {
      server[i] = ours;
      return node_answer::granted;
    }
    return *server[i] == ours ? node_answer::ours : node_answer::taken;
  };
  redlock_acquire_fsm fsm(5, 10s);
  const auto a = fsm.start(t0);
  EXPECT_EQ(fsm.resume(a, 0, set_nx(0), t0 + 1ms), acq::wait);
  set_nx(1);  // ran, but the reply never came
  EXPECT_EQ(fsm.resume(a, 1, node_answer::unknown, t0 + 50ms), acq::wait);
  EXPECT_EQ(fsm.resume(a, 2, node_answer::unknown, t0 + 50ms), acq::wait);  // never ran
  EXPECT_EQ(fsm.resume(a, 3, set_nx(3), t0 + 2ms), acq::release_all);
  set_nx(4);  // its SET ran before the release the engine sends next on the same connection

  redlock_release_fsm release(5);
  for (std::size_t i = 0; i < 5; ++i) {
    node_answer r = node_answer::missing;
    if (server[i] && *server[i] == ours) {
      server[i].reset();
      r = node_answer::granted;
    } else if (server[i]) {
      r = node_answer::taken;
    }
    const auto want = i == 4 ? redlock_release_fsm::next::done : redlock_release_fsm::next::wait;
    EXPECT_EQ(release.resume(i, r), want);
  }
  for (std::size_t i = 0; i < 5; ++i) EXPECT_NE(server[i], ours) << "node " << i;
  EXPECT_EQ(server[3], "theirs") << "compare-and-delete leaves another's key alone";
  EXPECT_EQ(release.state(1), node_state::released);
  EXPECT_EQ(release.state(3), node_state::taken);
}

TEST(redlock_fsm_test, answers_of_an_earlier_attempt_are_dropped_and_its_leftover_counts_next_time) {
  redlock_acquire_fsm fsm(3, 10s);
  const auto first = fsm.start(t0);
  EXPECT_EQ(fsm.resume(first, 0, node_answer::taken, t0 + 1ms), acq::wait);
  EXPECT_EQ(fsm.resume(first, 1, node_answer::taken, t0 + 1ms), acq::release_all);
  const auto r = fsm.after_release(t0 + 2ms, t0 + 10s, 0.5);
  ASSERT_TRUE(r.again);
  const auto second = fsm.start(t0 + 2ms + r.delay);
  EXPECT_EQ(second, first + 1);
  EXPECT_EQ(fsm.state(2), node_state::pending);
  EXPECT_EQ(fsm.resume(first, 2, node_answer::granted, t0 + 100ms), acq::none) << "the first attempt's";
  EXPECT_EQ(fsm.state(2), node_state::pending);
  // Node 2's key from the first attempt outlived its release (a reply reordered by a reconnect): ours.
  EXPECT_EQ(fsm.resume(second, 2, node_answer::ours, t0 + 100ms), acq::wait);
  EXPECT_EQ(fsm.resume(second, 0, node_answer::granted, t0 + 100ms), acq::acquired);
  EXPECT_EQ(fsm.valid_until(), t0 + 2ms + r.delay + 10s - 102ms) << "counted from the second attempt";
}

TEST(redlock_fsm_test, the_retry_delay_is_a_bounded_random_backoff_that_fits_the_wait) {
  const redlock_backoff b;  // windows 50, 100, 200, 400, 400, ... ms; the delay in the upper half
  EXPECT_EQ(b.delay(0, 0.0), 25ms);
  EXPECT_EQ(b.delay(0, 1.0), 50ms);
  EXPECT_EQ(b.delay(1, 0.5), 75ms);
  EXPECT_EQ(b.delay(3, 0.0), 200ms);
  EXPECT_EQ(b.delay(1000, 0.999), b.delay(1000, 0.999)) << "deterministic";
  EXPECT_LE(b.delay(1000, 1.0), 400ms) << "bounded after many retries";
  const redlock_backoff huge{1ms, redlock_clock::duration::max()};
  EXPECT_GT(huge.delay(4'000'000'000u, 1.0), 24h) << "no overflow with an unbounded cap";
  EXPECT_EQ(b.delay(0, -3.0), 25ms) << "clamped";
  EXPECT_EQ(b.delay(0, 7.0), 50ms) << "clamped";

  redlock_acquire_fsm fsm(3, 10s);
  fsm.start(t0);
  auto r = fsm.after_release(t0, t0 + 1s, 0.0);
  EXPECT_TRUE(r.again);
  EXPECT_EQ(r.delay, 25ms);
  r = fsm.after_release(t0, t0 + 1s, 0.0);
  EXPECT_EQ(r.delay, 50ms) << "the window doubled";
  r = fsm.after_release(t0, t0 + 10ms, 0.0);
  EXPECT_TRUE(r.again);
  EXPECT_EQ(r.delay, 10ms) << "the last attempt starts as the wait ends";
  EXPECT_FALSE(fsm.after_release(t0 + 10ms, t0 + 10ms, 0.5).again) << "the wait is over";
  EXPECT_FALSE(fsm.after_release(t0, t0, 0.5).again) << "a try without a wait";
}

redlock_extend_fsm held_until(std::size_t n, tp valid_until, bool retake = true) {
  return redlock_extend_fsm(n, 10s, valid_until, retake);
}

TEST(redlock_fsm_test, the_lease_moves_only_once_a_majority_extended) {
  auto fsm = held_until(3, t0 + 9s);
  const tp sent = t0 + 3s;
  EXPECT_EQ(fsm.start(sent), ext::wait);
  EXPECT_EQ(fsm.resume(fsm.round(), 0, node_answer::granted, sent + 1ms), ext::wait);
  EXPECT_EQ(fsm.valid_until(), t0 + 9s) << "one node is not a majority";
  EXPECT_EQ(fsm.resume(fsm.round(), 1, node_answer::granted, sent + 2ms), ext::extended);
  EXPECT_EQ(fsm.valid_until(), sent + 10s - 102ms);
  EXPECT_EQ(fsm.extensions(), 1u);
  EXPECT_EQ(fsm.resume(fsm.round(), 2, node_answer::granted, sent + 3ms), ext::none);
  EXPECT_EQ(fsm.resume(fsm.round() - 1, 2, node_answer::granted, sent + 3ms), ext::none) << "stale round";
}

// A node restarted empty answers `missing`: it is taken again with our value, and counts for the
// quorum once re-taken; the next round finds it extended.
TEST(redlock_fsm_test, an_extension_retakes_a_node_restarted_empty_and_keeps_the_quorum) {
  auto fsm = held_until(3, t0 + 9s);
  const tp sent = t0 + 3s;
  ASSERT_EQ(fsm.start(sent), ext::wait);
  const auto r = fsm.round();
  EXPECT_EQ(fsm.resume(r, 2, node_answer::missing, sent + 1ms), ext::retake);
  EXPECT_EQ(fsm.state(2), node_state::retaking);
  EXPECT_EQ(fsm.resume(r, 0, node_answer::granted, sent + 1ms), ext::wait);
  EXPECT_EQ(fsm.resume(r, 1, node_answer::taken, sent + 2ms), ext::wait) << "the re-take may still make it";
  EXPECT_EQ(fsm.resume(r, 2, node_answer::granted, sent + 3ms), ext::extended);
  EXPECT_EQ(fsm.state(2), node_state::held);
  EXPECT_EQ(fsm.valid_until(), sent + 10s - 102ms);

  // A node found empty after the round was decided is re-taken all the same.
  const tp next = sent + 3s;
  ASSERT_EQ(fsm.start(next), ext::wait);
  EXPECT_EQ(fsm.resume(fsm.round(), 0, node_answer::granted, next + 1ms), ext::wait);
  EXPECT_EQ(fsm.resume(fsm.round(), 2, node_answer::granted, next + 1ms), ext::extended);
  EXPECT_EQ(fsm.resume(fsm.round(), 1, node_answer::missing, next + 2ms), ext::retake);
  EXPECT_EQ(fsm.resume(fsm.round(), 1, node_answer::granted, next + 3ms), ext::none);
  EXPECT_EQ(fsm.state(1), node_state::held);
}

TEST(redlock_fsm_test, a_retake_refused_counts_as_taken_and_one_unknown_as_unknown) {
  auto fsm = held_until(3, t0 + 9s);
  ASSERT_EQ(fsm.start(t0 + 3s), ext::wait);
  const auto r = fsm.round();
  EXPECT_EQ(fsm.resume(r, 0, node_answer::missing, t0 + 3s), ext::retake);
  EXPECT_EQ(fsm.resume(r, 1, node_answer::missing, t0 + 3s), ext::retake);
  EXPECT_EQ(fsm.resume(r, 0, node_answer::taken, t0 + 3s + 1ms), ext::wait);
  EXPECT_EQ(fsm.resume(r, 1, node_answer::taken, t0 + 3s + 1ms), ext::lost) << "another took both";
  EXPECT_EQ(fsm.loss(), redlock_loss::taken);

  auto unsure = held_until(3, t0 + 9s);
  ASSERT_EQ(unsure.start(t0 + 3s), ext::wait);
  EXPECT_EQ(unsure.resume(1, 0, node_answer::missing, t0 + 3s), ext::retake);
  EXPECT_EQ(unsure.resume(1, 0, node_answer::unknown, t0 + 3s), ext::wait);
  EXPECT_EQ(unsure.state(0), node_state::unknown);
}

TEST(redlock_fsm_test, two_of_three_taken_by_another_is_a_loss_told_within_the_round) {
  auto fsm = held_until(3, t0 + 9s);
  ASSERT_EQ(fsm.start(t0 + 3s), ext::wait);
  EXPECT_EQ(fsm.resume(1, 0, node_answer::taken, t0 + 3s + 1ms), ext::wait);
  EXPECT_EQ(fsm.resume(1, 1, node_answer::taken, t0 + 3s + 2ms), ext::lost) << "node 2 not awaited";
  EXPECT_EQ(fsm.loss(), redlock_loss::taken);
  EXPECT_EQ(fsm.valid_until(), t0 + 9s);
  EXPECT_EQ(fsm.resume(1, 2, node_answer::granted, t0 + 3s + 3ms), ext::none);
  EXPECT_EQ(fsm.start(t0 + 6s), ext::none) << "lost for good";
  EXPECT_EQ(fsm.resume(t0 + 20s), ext::none) << "told once";
}

TEST(redlock_fsm_test, without_retake_missing_keys_are_a_loss_deleted_and_a_mix_a_loss_of_quorum) {
  auto deleted = held_until(3, t0 + 9s, false);
  ASSERT_EQ(deleted.start(t0 + 3s), ext::wait);
  EXPECT_EQ(deleted.resume(1, 0, node_answer::missing, t0 + 3s), ext::wait);
  EXPECT_EQ(deleted.resume(1, 1, node_answer::missing, t0 + 3s), ext::lost);
  EXPECT_EQ(deleted.loss(), redlock_loss::deleted);

  auto mixed = held_until(5, t0 + 9s, false);
  ASSERT_EQ(mixed.start(t0 + 3s), ext::wait);
  EXPECT_EQ(mixed.resume(1, 0, node_answer::missing, t0 + 3s), ext::wait);
  EXPECT_EQ(mixed.resume(1, 1, node_answer::taken, t0 + 3s), ext::wait);
  EXPECT_EQ(mixed.resume(1, 2, node_answer::granted, t0 + 3s), ext::wait);
  EXPECT_EQ(mixed.resume(1, 3, node_answer::taken, t0 + 3s), ext::lost);
  EXPECT_EQ(mixed.loss(), redlock_loss::quorum);
}

TEST(redlock_fsm_test, an_extension_after_the_validity_ran_out_is_lost_expired) {
  auto late = held_until(3, t0 + 9s);
  EXPECT_EQ(late.start(t0 + 9s), ext::lost) << "the validity is over: no re-take may revive it";
  EXPECT_EQ(late.loss(), redlock_loss::expired);

  auto slow = held_until(3, t0 + 9s);  // the round's answers come after the validity
  ASSERT_EQ(slow.start(t0 + 8s), ext::wait);
  EXPECT_EQ(slow.resume(1, 0, node_answer::granted, t0 + 8s + 500ms), ext::wait);
  EXPECT_EQ(slow.resume(1, 1, node_answer::granted, t0 + 9s), ext::lost);
  EXPECT_EQ(slow.loss(), redlock_loss::expired);
  EXPECT_EQ(slow.valid_until(), t0 + 9s);

  auto timer = held_until(3, t0 + 9s);  // no answer at all: the timer at valid_until() tells
  ASSERT_EQ(timer.start(t0 + 8s), ext::wait);
  EXPECT_EQ(timer.resume(t0 + 9s - 1ns), ext::wait);
  EXPECT_EQ(timer.resume(t0 + 9s), ext::lost);
  EXPECT_EQ(timer.loss(), redlock_loss::expired);
}

// Errors and timeouts alone prove no loss: the lease stands until its validity, and the loss is
// told when it runs out if no later round extends it.
TEST(redlock_fsm_test, errors_leave_the_lease_standing_until_its_validity) {
  auto fsm = held_until(3, t0 + 9s);
  ASSERT_EQ(fsm.start(t0 + 3s), ext::wait);
  EXPECT_EQ(fsm.resume(1, 0, node_answer::unknown, t0 + 3s), ext::wait);
  EXPECT_EQ(fsm.resume(1, 1, node_answer::taken, t0 + 3s), ext::not_extended);
  EXPECT_EQ(fsm.valid_until(), t0 + 9s);
  EXPECT_FALSE(fsm.loss());
  EXPECT_EQ(fsm.resume(t0 + 5s), ext::none);

  ASSERT_EQ(fsm.start(t0 + 6s), ext::wait);  // the next round finds the keys again
  EXPECT_EQ(fsm.resume(2, 0, node_answer::granted, t0 + 6s), ext::wait);
  EXPECT_EQ(fsm.resume(2, 2, node_answer::granted, t0 + 6s), ext::extended);
  EXPECT_EQ(fsm.valid_until(), t0 + 16s - 102ms);

  ASSERT_EQ(fsm.start(t0 + 9s), ext::wait);  // and one that does not
  EXPECT_EQ(fsm.resume(3, 0, node_answer::unknown, t0 + 9s), ext::wait);
  EXPECT_EQ(fsm.resume(3, 1, node_answer::unknown, t0 + 9s), ext::not_extended);
  EXPECT_EQ(fsm.resume(t0 + 16s - 102ms), ext::lost);
  EXPECT_EQ(fsm.loss(), redlock_loss::expired);
}

// Rounds a third of the TTL apart keep two more chances before the lease ends; after a round that
// did not extend it, the next comes sooner, and a loss is told within one interval of a round.
TEST(redlock_fsm_test, the_next_round_is_due_an_interval_after_the_last_extension_or_sooner) {
  const auto interval = std::chrono::milliseconds(10s) / 3;  // 3,333 ms
  auto fsm = held_until(3, redlock_valid_until(t0, 10s));  // acquired with requests sent at t0
  EXPECT_EQ(fsm.due(t0 + 1ms, interval), t0 + interval);

  const tp first = t0 + interval;
  ASSERT_EQ(fsm.start(first), ext::wait);
  EXPECT_EQ(fsm.resume(1, 0, node_answer::granted, first + 1ms), ext::wait);
  EXPECT_EQ(fsm.resume(1, 1, node_answer::granted, first + 2ms), ext::extended);
  EXPECT_EQ(fsm.due(first + 2ms, interval), first + interval) << "from the round's send time";

  const tp second = first + interval;
  ASSERT_EQ(fsm.start(second), ext::wait);
  EXPECT_EQ(fsm.resume(2, 0, node_answer::unknown, second + 50ms), ext::wait);
  EXPECT_EQ(fsm.resume(2, 1, node_answer::unknown, second + 50ms), ext::not_extended);
  const tp now = second + 50ms;
  const auto halfway = now + (fsm.valid_until() - now) / 2;
  EXPECT_LT(halfway, second + interval) << "sooner than the usual interval";
  EXPECT_EQ(fsm.due(now, interval), halfway);
  EXPECT_EQ(fsm.due(second + interval + 1ms, interval), second + interval + 1ms) << "never before now";

  ASSERT_EQ(fsm.start(halfway), ext::wait);  // that round finds two of three taken: told at once
  EXPECT_EQ(fsm.resume(3, 0, node_answer::taken, halfway + 1ms), ext::wait);
  EXPECT_EQ(fsm.resume(3, 2, node_answer::taken, halfway + 1ms), ext::lost);
  EXPECT_EQ(fsm.due(halfway + 1ms, interval), tp::max());
}

TEST(redlock_fsm_test, extensions_have_no_cap) {
  auto fsm = held_until(5, redlock_valid_until(t0, 10s));
  tp sent = t0;
  for (int i = 0; i < 10'000; ++i) {
    sent += std::chrono::milliseconds(10s) / 3;
    ASSERT_EQ(fsm.start(sent), ext::wait) << i;
    for (std::size_t n = 0; n < 2; ++n) {
      ASSERT_EQ(fsm.resume(fsm.round(), n, node_answer::granted, sent), ext::wait);
    }
    ASSERT_EQ(fsm.resume(fsm.round(), 2, node_answer::granted, sent + 1ms), ext::extended) << i;
  }
  EXPECT_EQ(fsm.extensions(), 10'000u);
  EXPECT_EQ(fsm.valid_until(), redlock_valid_until(sent, 10s));
  EXPECT_FALSE(fsm.loss());
}

TEST(redlock_fsm_test, a_release_tells_per_node_and_in_all) {
  using rel = redlock_release_fsm;
  rel ok(3);
  EXPECT_EQ(ok.resume(0, node_answer::granted), rel::next::wait);
  EXPECT_EQ(ok.resume(1, node_answer::unknown), rel::next::wait);
  EXPECT_EQ(ok.resume(1, node_answer::granted), rel::next::wait) << "one answer per node";
  EXPECT_EQ(ok.resume(2, node_answer::granted), rel::next::done);
  EXPECT_EQ(ok.outcome(), rel::result::released);
  EXPECT_EQ(ok.state(1), node_state::unknown);

  rel gone(3);
  gone.resume(0, node_answer::missing);
  gone.resume(1, node_answer::taken);
  EXPECT_EQ(gone.resume(2, node_answer::granted), rel::next::done);
  EXPECT_EQ(gone.outcome(), rel::result::not_held);

  rel unsure(3);
  unsure.resume(0, node_answer::granted);
  unsure.resume(1, node_answer::unknown);
  unsure.resume(2, node_answer::missing);
  EXPECT_EQ(unsure.outcome(), rel::result::unknown);
}

}  // namespace
}  // namespace redlease::detail
