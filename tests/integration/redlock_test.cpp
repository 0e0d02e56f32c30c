// SPDX-License-Identifier: MIT
// RedLock (redlease::redlock) over 3 and 5 real redis-server processes: the quorum, a stopped
// node, the watchdog that keeps the quorum, the loss, contention, and the layout shared with
// redsync and node-redlock (played with raw commands).
#include <gtest/gtest.h>

#include <asio/use_future.hpp>

#include <atomic>
#include <future>
#include <bit>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "redlock_test_support.hpp"
#include "redlease_lua.hpp"

namespace redlease::test {
namespace {

using redlock_test = redlock_fixture;

TEST_F(redlock_test, quorum_for_every_mask_of_3_nodes_and_nothing_of_ours_left) { check_every_mask(3); }

TEST_F(redlock_test, quorum_for_every_mask_of_5_nodes_and_nothing_of_ours_left) { check_every_mask(5); }

// The per-node scripts answer what the driver maps to the fsm's node_answer.
TEST_F(redlock_test, the_scripts_answer_granted_ours_taken_missing) {
  start(1);
  auto eval = [&](const detail::lua_script& sc, std::vector<std::string> args) {
    std::vector<std::string> cmd{"EVAL", std::string(sc.body), "1", "k"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    return raw(0).command(cmd);
  };
  const auto& acquire = detail::lua::redlock_acquire;
  const auto& extend = detail::lua::redlock_extend;
  const auto& release = detail::lua::redlock_release;
  EXPECT_EQ(eval(acquire, {"v", "1000"}).integer, 1);  // granted
  EXPECT_EQ(eval(acquire, {"v", "5000"}).integer, 2);  // ours: a leftover, its TTL set again
  EXPECT_GT(raw(0)({"PTTL", "k"}).integer, 4000);
  EXPECT_EQ(eval(acquire, {"w", "1000"}).integer, 0);  // taken
  EXPECT_EQ(eval(extend, {"v", "9000"}).integer, 1);   // extended
  EXPECT_GT(raw(0)({"PTTL", "k"}).integer, 8000);
  EXPECT_EQ(eval(extend, {"w", "1000"}).integer, -1);  // taken
  EXPECT_EQ(eval(release, {"w"}).integer, -1);         // not ours: left alone
  EXPECT_EQ(raw(0)({"GET", "k"}).str, "v");
  EXPECT_EQ(eval(release, {"v"}).integer, 1);          // released
  EXPECT_EQ(eval(release, {"v"}).integer, 0);          // missing
  EXPECT_EQ(eval(extend, {"v", "1000"}).integer, 0);   // missing: to be re-taken
  EXPECT_EQ(raw(0)({"EXISTS", "k"}).integer, 0);
}

TEST_F(redlock_test, defaults_and_misuse) {
  start(3);
  redlock rl(nodes(), "defaults");
  EXPECT_EQ(rl.size(), 3u);
  EXPECT_EQ(rl.ttl(), 1000ms);  // the first client's watchdog_timeout
  EXPECT_EQ(rl.node_timeout(), 50ms);
  EXPECT_FALSE(rl.valid());
  std::error_code ec;
  rl.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
  ASSERT_TRUE(rl.try_lock());
  EXPECT_FALSE(rl.try_lock(100ms, ec));
  EXPECT_EQ(ec, errc::would_deadlock);
  EXPECT_GT(rl.valid_until(), steady::now() + 500ms);
  rl.unlock();
  EXPECT_FALSE(rl.valid());
  redlock braced({*clients_[0], *clients_[1], *clients_[2]}, "braced");  // as docs/redlock.md writes it
  EXPECT_EQ(braced.size(), 3u);
  EXPECT_THROW(redlock({}, "x"), error);
  EXPECT_THROW(redlock(nodes(), ""), error);
}

TEST_F(redlock_test, async_calls_complete_outside_the_initiating_call) {
  start(3);
  auto rl = make("async");
  // Inside the call means on this thread before it returned: the completion may well run on the
  // first client's I/O thread before this thread gets to its next statement, which is no fault.
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> in_call{true};
  std::atomic<bool> inline_call{false};
  std::promise<std::pair<std::error_code, bool>> got;
  rl.async_try_lock(1000ms, [&](std::error_code ec, bool ok) {
    if (in_call.load() && std::this_thread::get_id() == caller) inline_call = true;
    got.set_value({ec, ok});
  });
  in_call = false;
  auto [ec, ok] = got.get_future().get();
  EXPECT_FALSE(ec);
  EXPECT_TRUE(ok);
  EXPECT_FALSE(inline_call.load());
  EXPECT_TRUE(rl.valid());
  EXPECT_THROW(rl.async_try_lock(0ms, asio::use_future).get(), std::system_error);  // would_deadlock
  rl.async_unlock(asio::use_future).get();
  EXPECT_FALSE(rl.valid());
  EXPECT_TRUE(none_left("async", rl.value(), 100ms));
  EXPECT_THROW(rl.async_unlock(asio::use_future).get(), std::system_error);  // not_owner
}

TEST_F(redlock_test, a_stopped_node_costs_at_most_its_timeout_and_two_of_three_grant) {
  start(3);
  srv(2).pause();
  auto rl = make("stopped");
  auto t0 = steady::now();
  ASSERT_TRUE(rl.try_lock());
  EXPECT_LT(ms_since(t0), 500);
  EXPECT_TRUE(rl.valid());
  rl.unlock();  // node 2 times out; the two others delete: released

  // Two nodes stopped: no quorum; the attempt ends at the per-node timeout, not later.
  srv(1).pause();
  auto other = make("stopped2");
  t0 = steady::now();
  EXPECT_FALSE(other.try_lock());
  EXPECT_LT(ms_since(t0), 500);
  const std::string value = other.value();
  srv(1).resume();
  srv(2).resume();
  EXPECT_TRUE(none_left("stopped2", value)) << "the release reaches the stopped nodes behind the SET";
}

TEST_F(redlock_test, the_watchdog_keeps_the_lock_and_retakes_a_node_restarted_empty) {
  start(3);
  auto rl = make("kept");
  ASSERT_TRUE(rl.try_lock());
  const std::string value = rl.value();
  ASSERT_TRUE(all_hold("kept", value));
  auto t0 = steady::now();
  bool always_valid = true;
  while (ms_since(t0) < 3500) {  // three and a half TTLs
    always_valid = always_valid && rl.valid();
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(always_valid);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(raw(i)({"GET", "kept"}).str, value);

  ASSERT_TRUE(raw(1)({"FLUSHALL"}).is_ok());
  EXPECT_TRUE(eventually([&] { return raw(1)({"GET", "kept"}).str == value; }, 3000ms)) << "re-taken after FLUSHALL";

  raws_.at(2).reset();
  srv(2).restart();  // empty: no persistence
  raws_.at(2) = std::make_unique<raw_client>(srv(2).client());
  EXPECT_TRUE(eventually([&] { return raw(2)({"GET", "kept"}).str == value; }, 5000ms)) << "re-taken after a restart";
  EXPECT_TRUE(rl.valid());
  rl.unlock();
  EXPECT_TRUE(none_left("kept", value, 100ms));
}

TEST_F(redlock_test, two_of_three_taken_while_held_is_lost_within_about_one_interval) {
  start(3);
  lost_log lost;
  auto rl = held("taken", lost);
  const std::string value = rl.value();
  for (int i = 0; i < 2; ++i) {  // DEL + SET another value
    ASSERT_EQ(raw(i)({"DEL", "taken"}).integer, 1);
    ASSERT_TRUE(raw(i)({"SET", "taken", "other", "PX", "10000"}).is_ok());
  }
  auto t0 = steady::now();
  ASSERT_TRUE(eventually([&] { return lost.count() > 0; }, 3000ms));
  EXPECT_LT(ms_since(t0), 1000);  // a round every 333 ms
  EXPECT_EQ(lost.at(0).reason, lost_reason::taken);
  EXPECT_EQ(lost.at(0).name, "taken");
  EXPECT_FALSE(rl.valid());
  EXPECT_TRUE(none_left("taken", value)) << "our value left on node 2 is released";
  EXPECT_EQ(raw(0)({"GET", "taken"}).str, "other");
  std::error_code ec;
  rl.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(lost.count(), 1u);
}

TEST_F(redlock_test, two_of_three_restarted_empty_at_once_are_retaken_not_lost) {
  start(3);
  lost_log lost;
  auto rl = held("eroded", lost);
  const std::string value = rl.value();
  ASSERT_TRUE(raw(0)({"FLUSHALL"}).is_ok());
  ASSERT_TRUE(raw(2)({"FLUSHALL"}).is_ok());
  EXPECT_TRUE(all_hold("eroded", value, ~0u, 2000ms)) << "both re-taken";
  EXPECT_TRUE(rl.valid());
  EXPECT_EQ(lost.count(), 0u);
  rl.unlock();
}

TEST_F(redlock_test, without_retake_two_of_three_deleted_is_lost_deleted) {
  start(3);
  auto o = ttl_1s();
  o.retake = false;
  lost_log lost;
  auto rl = held("deleted", lost, o);
  ASSERT_EQ(raw(0)({"DEL", "deleted"}).integer, 1);
  ASSERT_EQ(raw(1)({"DEL", "deleted"}).integer, 1);
  auto t0 = steady::now();
  ASSERT_TRUE(eventually([&] { return lost.count() > 0; }, 3000ms));
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_EQ(lost.at(0).reason, lost_reason::deleted);
  EXPECT_FALSE(rl.valid());
  EXPECT_TRUE(none_left("deleted", rl.value()));
  std::error_code ec;
  rl.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
}

TEST_F(redlock_test, a_majority_that_stops_answering_is_lost_when_the_validity_ends) {
  start(3);
  lost_log lost;
  auto rl = held("silent", lost);
  srv(1).pause();
  srv(2).pause();
  auto until = rl.valid_until();
  ASSERT_TRUE(eventually([&] { return lost.count() > 0; }, 3000ms));
  EXPECT_GE(steady::now(), until);  // the lease stood until its validity, not longer
  EXPECT_LT(steady::now(), until + 500ms);
  EXPECT_EQ(lost.at(0).reason, lost_reason::expired);
  EXPECT_FALSE(rl.valid());
  srv(1).resume();
  srv(2).resume();
  std::error_code ec;
  rl.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  EXPECT_EQ(lost.count(), 1u);
}

TEST_F(redlock_test, the_validity_shrinks_with_slow_nodes_and_an_attempt_past_the_ttl_fails) {
  start(3);
  redlock_options o;
  // Renewals are due a third of the TTL after the attempt's send time: with a TTL of 3 s the first
  // is due a second after the grant's 400 ms, so the validity read below is the grant's, not a
  // renewal's (with 1 s, a renewal fell due at the grant and could land before the read).
  o.ttl = 3000ms;
  o.node_timeout = 3000ms;  // let the slow nodes' answers count
  {
    redlock rl(nodes(), "slow", o);
    ASSERT_TRUE(raw(1)({"CLIENT", "PAUSE", "400"}).is_ok());
    ASSERT_TRUE(raw(2)({"CLIENT", "PAUSE", "400"}).is_ok());
    const auto t0 = steady::now();
    ASSERT_TRUE(rl.try_lock());
    EXPECT_GE(ms_since(t0), 300);
    EXPECT_LT(rl.valid_until() - steady::now(), 2700ms);  // the TTL minus the attempt's time
    rl.unlock();
  }

  o.ttl = 1000ms;
  redlock rl(nodes(), "slow", o);

  ASSERT_TRUE(raw(1)({"CLIENT", "PAUSE", "1300"}).is_ok());
  ASSERT_TRUE(raw(2)({"CLIENT", "PAUSE", "1300"}).is_ok());
  const auto t0 = steady::now();
  EXPECT_FALSE(rl.try_lock()) << "a majority granted only after the validity ran out";
  EXPECT_LT(ms_since(t0), 1200);  // decided when the validity ran out
  const std::string value = rl.value();
  EXPECT_TRUE(none_left("slow", value, 1000ms)) << "released behind the late grants, before their TTL";
}

TEST_F(redlock_test, eight_contenders_exclude_each_other_and_all_finish) {
  start(3);
  constexpr int threads = 8;
  constexpr int rounds = 5;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> done{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  auto t0 = steady::now();
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      auto rl = make("contended", 2000ms);
      for (int r = 0; r < rounds; ++r) {
        std::error_code ec;
        rl.lock(ec);
        if (ec) {
          ++errors;
          return;
        }
        if (inside.fetch_add(1) != 0) ++overlaps;
        std::this_thread::sleep_for(5ms);
        inside.fetch_sub(1);
        rl.unlock(ec);
        if (ec) ++errors;
        ++done;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(done.load(), threads * rounds);
  EXPECT_LT(ms_since(t0), 60000);
}

TEST_F(redlock_test, closed_clients_fail_the_calls_without_hanging) {
  start(3);
  auto rl = make("closing");
  ASSERT_TRUE(rl.try_lock());
  const std::string value = rl.value();
  clients_.at(2)->close();  // a minority gone: the release still reaches a majority
  std::error_code ec;
  rl.unlock(ec);
  EXPECT_FALSE(ec) << ec.message();
  ASSERT_TRUE(rl.try_lock());  // 2 of 3
  clients_.at(0)->close();     // the first client runs the handle's timers: nothing completes now
  auto t0 = steady::now();
  rl.unlock(ec);
  EXPECT_EQ(ec, errc::client_closed);
  EXPECT_FALSE(rl.try_lock(ec));
  EXPECT_EQ(ec, errc::client_closed);
  EXPECT_LT(ms_since(t0), 1000);
}

TEST_F(redlock_test, interop_with_the_redsync_and_node_redlock_layout) {
  start(3);
  // Their holder: SET name value NX PX ttl on a majority.
  ASSERT_TRUE(raw(0)({"SET", "shared", "theirs", "NX", "PX", "5000"}).is_ok());
  ASSERT_TRUE(raw(1)({"SET", "shared", "theirs", "NX", "PX", "5000"}).is_ok());
  auto rl = make("shared");
  EXPECT_FALSE(rl.try_lock(200ms));
  EXPECT_EQ(raw(0)({"GET", "shared"}).str, "theirs");
  EXPECT_EQ(raw(1)({"GET", "shared"}).str, "theirs");
  EXPECT_TRUE(none_left("shared", rl.value()));

  // Their release (compare-and-delete) of their value.
  const char* release = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
  for (int i = 0; i < 2; ++i) EXPECT_EQ(raw(i)({"EVAL", release, "1", "shared", "theirs"}).integer, 1);

  ASSERT_TRUE(rl.try_lock());
  const std::string value = rl.value();
  ASSERT_TRUE(all_hold("shared", value));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(raw(i)({"TYPE", "shared"}).str, "string");
    EXPECT_EQ(raw(i)({"GET", "shared"}).str, value);
    auto pttl = raw(i)({"PTTL", "shared"}).integer;
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1000);
  }
  // Their SET NX is refused, their release of their own value leaves ours.
  EXPECT_TRUE(raw(2)({"SET", "shared", "theirs", "NX", "PX", "5000"}).is_nil());
  EXPECT_EQ(raw(2)({"EVAL", release, "1", "shared", "theirs"}).integer, 0);
  EXPECT_EQ(raw(2)({"GET", "shared"}).str, value);
  rl.unlock();
  EXPECT_TRUE(none_left("shared", value, 100ms));
}

}  // namespace
}  // namespace redlease::test
