// SPDX-License-Identifier: MIT
// The release's decisions (src/lock/release_fsm.hpp) branch by branch, without a server: retries of
// a release whose reply never came, the TYPE check after WRONGTYPE, and what each reply does to the
// hold and tells the caller.
#include <gtest/gtest.h>

#include "lock/release_fsm.hpp"
#include "redlease/error.hpp"

namespace redlease::detail {
namespace {

using next = release_fsm::next;
using level = release_outcome::level;

release_facts held(std::size_t levels) {
  release_facts f;
  f.has_hold = true;
  f.levels = levels;
  f.not_held_reason = lost_reason::deleted;
  f.sets_remaining_lease = true;
  return f;
}

// What resume reads: whether there is a hold, whether it left the table, whether it was lost, and
// whether the client is closed.
release_facts facts(bool has_hold, bool removed, bool lost, bool closed) {
  release_facts f;
  f.has_hold = has_hold;
  f.removed = removed;
  f.lost = lost;
  f.closed = closed;
  return f;
}

TEST(release_fsm_test, a_lost_reply_is_sent_again_three_times_then_left_in_doubt) {
  release_fsm fsm(0, 1);
  for (int i = 1; i <= release_fsm::max_attempt; ++i) {
    EXPECT_EQ(fsm.resume(errc::request_timeout, facts(true, false, false, false)), next::send_again);
    EXPECT_EQ(fsm.attempt(), i);
    EXPECT_EQ(fsm.expected(), 1) << "a retry expects the count the first sending expected";
  }
  EXPECT_EQ(fsm.resume(errc::connection_lost, facts(true, false, false, false)), next::settle);
  auto f = held(1);
  f.seen = lost_reason::taken;
  auto o = fsm.settle(f, errc::connection_lost, release_result::bad);
  EXPECT_TRUE(o.set_in_doubt) << "the next unlock continues it under the same request id";
  EXPECT_TRUE(o.report_seen);
  EXPECT_EQ(o.change, level::none);
  EXPECT_EQ(o.result, errc::connection_lost);
}

TEST(release_fsm_test, nothing_is_retried_once_closed_or_when_the_hold_left) {
  release_fsm a(0, 1);
  EXPECT_EQ(a.resume(errc::request_timeout, facts(true, false, false, true)), next::settle);
  release_fsm b(0, 1);
  EXPECT_EQ(b.resume(errc::request_timeout, facts(true, true, false, false)), next::settle);
  release_fsm c(0, 0);  // an unlock of a hold the client never saw is retried all the same
  EXPECT_EQ(c.resume(errc::protocol_error, facts(false, false, false, false)), next::send_again);
  release_fsm d(0, 1);  // a definite error is not
  EXPECT_EQ(d.resume(errc::no_permission, facts(true, false, false, false)), next::settle);
}

TEST(release_fsm_test, wrongtype_asks_the_keys_type_unless_the_hold_is_known_lost) {
  release_fsm fsm(0, 1);
  EXPECT_EQ(fsm.resume(errc::wrong_type, facts(true, false, false, false)), next::ask_type);
  EXPECT_EQ(fsm.resume(errc::wrong_type, facts(true, false, true, false)), next::settle);
  EXPECT_EQ(fsm.resume(errc::wrong_type, facts(false, false, false, false)), next::settle);
  EXPECT_EQ(fsm.resume(errc::wrong_type, facts(true, false, false, true)), next::settle);
}

TEST(release_fsm_test, a_lock_key_of_another_type_is_a_loss_and_another_keys_is_not) {
  release_fsm fsm(0, 1);
  auto f = held(1);
  auto replaced = fsm.settle_type(f, {}, "string", "hash");
  EXPECT_EQ(replaced.result, errc::lock_lost);
  EXPECT_EQ(replaced.change, level::drop_lost);
  EXPECT_EQ(replaced.drop_reason, lost_reason::taken);
  auto gone = fsm.settle_type(f, {}, "none", "hash");
  EXPECT_EQ(gone.drop_reason, lost_reason::deleted);
  auto own = fsm.settle_type(f, {}, "hash", "hash");  // a fair queue of the wrong type: the hold stands
  EXPECT_EQ(own.result, errc::wrong_type);
  EXPECT_EQ(own.change, level::none);
  EXPECT_FALSE(own.mark_lost);
  f.seen = lost_reason::deleted;  // ... unless a renewal found it gone meanwhile
  EXPECT_EQ(fsm.settle_type(f, {}, "hash", "hash").mark_lost, lost_reason::deleted);
  auto unknown = fsm.settle_type(held(1), errc::request_timeout, "", "hash");
  EXPECT_EQ(unknown.result, errc::wrong_type);
  EXPECT_EQ(unknown.change, level::none);
  auto closed = held(1);
  closed.closed = true;
  EXPECT_EQ(fsm.settle_type(closed, {}, "string", "hash").result, errc::client_closed);
}

TEST(release_fsm_test, the_last_level_freed_erases_the_hold) {
  release_fsm fsm(0, 1);
  auto o = fsm.settle(held(1), {}, release_result::freed);
  EXPECT_EQ(o.change, level::erase);
  EXPECT_TRUE(o.clear_in_doubt);
  EXPECT_FALSE(o.result);
}

TEST(release_fsm_test, a_level_given_back_keeps_the_others_renewed_from_now) {
  release_fsm fsm(0, 2);
  auto o = fsm.settle(held(2), {}, release_result::decremented);
  EXPECT_EQ(o.change, level::pop);
  EXPECT_TRUE(o.set_deadline);
  EXPECT_TRUE(o.reschedule);
  EXPECT_TRUE(o.report_seen) << "levels remain: a renewal's 'gone' was not this unlock's doing";
  EXPECT_FALSE(o.result);
}

TEST(release_fsm_test, freed_with_levels_left_is_a_loss_told_after_a_successful_unlock) {
  release_fsm fsm(0, 3);
  auto o = fsm.settle(held(3), {}, release_result::freed);
  EXPECT_EQ(o.change, level::pop);
  EXPECT_EQ(o.mark_lost, lost_reason::deleted);
  EXPECT_FALSE(o.result);
}

TEST(release_fsm_test, not_held_is_a_loss_except_on_a_retry_of_the_last_level) {
  release_fsm first(0, 1);
  auto lost = first.settle(held(1), {}, release_result::not_held);
  EXPECT_EQ(lost.result, errc::lock_lost);
  EXPECT_EQ(lost.change, level::drop_lost);
  EXPECT_EQ(lost.drop_reason, lost_reason::deleted);
  auto seen = held(1);
  seen.seen = lost_reason::expired;
  EXPECT_EQ(first.settle(seen, {}, release_result::not_held).drop_reason, lost_reason::expired);

  release_fsm retry(1, 1);  // the first sending freed it
  auto freed = retry.settle(held(1), {}, release_result::not_held);
  EXPECT_EQ(freed.change, level::erase);
  EXPECT_FALSE(freed.result);
  release_fsm retry_deeper(1, 2);
  EXPECT_EQ(retry_deeper.settle(held(2), {}, release_result::not_held).result, errc::lock_lost);

  release_facts none;  // no local hold, nothing on the server
  EXPECT_EQ(first.settle(none, {}, release_result::not_held).result, errc::not_owner);
  EXPECT_FALSE(first.settle(none, {}, release_result::freed).result);  // held without our knowing
}

TEST(release_fsm_test, a_hold_known_lost_loses_a_level_whatever_the_server_says) {
  auto f = held(2);
  f.lost = true;
  release_fsm fsm(0, 2);
  auto o = fsm.settle(f, {}, release_result::decremented);
  EXPECT_EQ(o.change, level::drop_lost);
  EXPECT_EQ(o.result, errc::lock_lost);
  auto refused = fsm.settle(f, errc::no_permission, release_result::bad);
  EXPECT_EQ(refused.change, level::drop_lost);
  EXPECT_EQ(refused.result, errc::lock_lost);
  auto unknown = fsm.settle(f, errc::request_timeout, release_result::bad);  // may still run
  EXPECT_EQ(unknown.change, level::none);
  EXPECT_EQ(unknown.result, errc::request_timeout);
}

TEST(release_fsm_test, a_reply_no_script_sends_is_bad_and_leaves_the_hold) {
  release_fsm fsm(0, 1);
  auto o = fsm.settle(held(1), {}, release_result::bad);
  EXPECT_EQ(o.result, errc::bad_reply);
  EXPECT_EQ(o.change, level::none);
  EXPECT_TRUE(o.report_seen);
}

}  // namespace
}  // namespace redlease::detail
