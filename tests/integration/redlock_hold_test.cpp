// SPDX-License-Identifier: MIT
// What a RedLock hold carries besides the lock (redlease::redlock over 3 real servers): the per-node
// fencing tokens, the lost stop token; and how an async acquisition ends early: cancelled, or its
// first client closed while its requests are on the wire.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/post.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <stop_token>
#include <string>

#include "redlock_test_support.hpp"

namespace redlease::test {
namespace {

using redlock_hold_test = redlock_fixture;

redlock_options fenced_1s() {
  redlock_options o;
  o.ttl = 1000ms;
  o.fencing_tokens = true;
  return o;
}

// How many scripts the server ran (EVAL and EVALSHA), from INFO commandstats.
long long script_calls(raw_client& r) {
  const std::string info = r({"INFO", "commandstats"}).str;
  long long n = 0;
  for (const char* cmd : {"cmdstat_eval:calls=", "cmdstat_evalsha:calls="}) {
    auto at = info.find(cmd);
    if (at != std::string::npos) n += std::stoll(info.substr(at + std::strlen(cmd)));
  }
  return n;
}

std::string token_key(const std::string& name) { return "redlease_redlock_token:{" + name + "}"; }

// The handle's tokens by node, once every node granted (the last grants may land after the
// majority's).
std::map<std::size_t, std::uint64_t> all_tokens(const redlock& rl, std::size_t n) {
  std::map<std::size_t, std::uint64_t> m;
  eventually([&] {
    m.clear();
    for (const auto& t : rl.fencing_tokens()) m[t.node] = t.token;
    return m.size() == n;
  });
  return m;
}

TEST_F(redlock_hold_test, each_granting_node_gives_a_token_that_grows_per_node) {
  start(3);
  redlock first(nodes(), "fenced", fenced_1s());
  EXPECT_TRUE(first.fencing_tokens().empty()) << "not held";
  ASSERT_TRUE(first.try_lock());
  auto t1 = all_tokens(first, 3);
  ASSERT_EQ(t1.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(std::to_string(t1.at(i)), raw(i)({"GET", token_key("fenced")}).str) << "node " << i;
    EXPECT_GT(t1.at(i), 1'000'000'000'000'000u) << "started from the server's clock";
  }
  first.unlock();
  EXPECT_TRUE(first.fencing_tokens().empty()) << "released";

  redlock second(nodes(), "fenced", fenced_1s());
  ASSERT_TRUE(second.try_lock());
  auto t2 = all_tokens(second, 3);
  ASSERT_EQ(t2.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_GT(t2.at(i), t1.at(i)) << "node " << i << ": a later grant's token is larger";
  second.unlock();

  // Without the option no token key is touched and no token is given.
  auto plain = make("plain");
  ASSERT_TRUE(plain.try_lock());
  EXPECT_TRUE(plain.fencing_tokens().empty());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(raw(i)({"EXISTS", token_key("plain")}).integer, 0);
  plain.unlock();
}

TEST_F(redlock_hold_test, a_retaken_node_gives_a_new_token_and_a_taken_node_none) {
  start(3);
  redlock rl(nodes(), "retoken", fenced_1s());
  ASSERT_TRUE(rl.try_lock());
  auto before = all_tokens(rl, 3);
  ASSERT_EQ(before.size(), 3u);

  ASSERT_TRUE(raw(1)({"FLUSHALL"}).is_ok());  // node 1 restarted empty: re-taken by the watchdog
  EXPECT_TRUE(eventually([&] { return raw(1)({"GET", "retoken"}).str == rl.value(); }, 3000ms));
  std::uint64_t retaken = 0;
  EXPECT_TRUE(eventually([&] {
    for (const auto& t : rl.fencing_tokens())
      if (t.node == 1) retaken = t.token;
    return retaken != 0 && std::to_string(retaken) == raw(1)({"GET", token_key("retoken")}).str;
  }, 3000ms)) << "the re-take's token is the node's new one";
  EXPECT_GT(retaken, before.at(1)) << "drawn from the clock again, above the lost sequence";

  // Node 2 taken by another value: the lock stands on 0 and 1, node 2's token is gone.
  ASSERT_EQ(raw(2)({"DEL", "retoken"}).integer, 1);
  ASSERT_TRUE(raw(2)({"SET", "retoken", "other", "PX", "10000"}).is_ok());
  EXPECT_TRUE(eventually([&] { return rl.fencing_tokens().size() == 2; }, 3000ms));
  for (const auto& t : rl.fencing_tokens()) EXPECT_NE(t.node, 2u);
  EXPECT_TRUE(rl.valid());
  rl.unlock();
}

TEST_F(redlock_hold_test, the_lost_token_stops_when_the_quorum_is_lost) {
  start(3);
  lost_log lost;
  redlock rl(nodes(), "stoptoken", ttl_1s());
  EXPECT_FALSE(rl.lost_token().stop_possible()) << "not held: a token that never stops";
  rl.on_lost(lost.hook());
  ASSERT_TRUE(rl.try_lock());
  ASSERT_TRUE(all_hold("stoptoken", rl.value()));
  auto token = rl.lost_token();
  std::atomic<bool> called{false};
  std::stop_callback cb(token, [&] { called = true; });
  EXPECT_FALSE(token.stop_requested());
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(raw(i)({"DEL", "stoptoken"}).integer, 1);
    ASSERT_TRUE(raw(i)({"SET", "stoptoken", "other", "PX", "10000"}).is_ok());
  }
  ASSERT_TRUE(eventually([&] { return token.stop_requested(); }, 3000ms));
  EXPECT_TRUE(called.load());
  EXPECT_TRUE(eventually([&] { return lost.count() == 1; }));
  std::error_code ec;
  rl.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);

  // The next hold has a fresh token.
  for (int i = 0; i < 2; ++i) raw(i)({"DEL", "stoptoken"});
  ASSERT_TRUE(rl.try_lock());
  EXPECT_TRUE(rl.lost_token().stop_possible());
  EXPECT_FALSE(rl.lost_token().stop_requested());
  rl.unlock();
}

TEST_F(redlock_hold_test, a_cancelled_acquisition_aborts_between_attempts_and_leaves_nothing) {
  start(3);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(raw(i)({"SET", "cancelled", "foreign", "PX", "20000"}).is_ok());
  auto rl = make("cancelled");
  asio::cancellation_signal sig;
  std::promise<std::pair<std::error_code, bool>> got;
  rl.async_try_lock(10'000ms, asio::bind_cancellation_slot(sig.slot(), [&](std::error_code ec, bool ok) {
                      got.set_value({ec, ok});
                    }));
  // Attempts are refused and retried: wait until two reached the free node (a script each, and a
  // release each).
  ASSERT_TRUE(eventually([&] { return script_calls(raw(2)) >= 4; }, 3000ms));
  auto f = got.get_future();
  const auto t0 = steady::now();
  asio::post(rl.executor(), [&] { sig.emit(asio::cancellation_type::terminal); });
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  auto [ec, ok] = f.get();
  EXPECT_EQ(ec, errc::operation_aborted);
  EXPECT_FALSE(ok);
  EXPECT_LT(ms_since(t0), 500) << "not at the end of the wait";
  EXPECT_TRUE(none_left("cancelled", rl.value()));
  EXPECT_FALSE(rl.valid());
  for (int i = 0; i < 2; ++i) raw(i)({"DEL", "cancelled"});
  EXPECT_TRUE(rl.try_lock()) << "the handle acquires again afterwards";
  rl.unlock();
}

TEST_F(redlock_hold_test, a_cancelled_attempt_on_the_wire_is_released_behind_its_grants) {
  start(3);
  redlock_options o;
  o.ttl = 10'000ms;
  o.node_timeout = 3000ms;  // the stopped nodes' answers are awaited
  redlock rl(nodes(), "onwire", o);
  srv(1).pause();
  srv(2).pause();
  asio::cancellation_signal sig;
  std::promise<std::error_code> got;
  rl.async_try_lock(0ms, asio::bind_cancellation_slot(sig.slot(), [&](std::error_code ec, bool) { got.set_value(ec); }));
  ASSERT_TRUE(eventually([&] {
    auto v = rl.value();
    return !v.empty() && raw(0)({"GET", "onwire"}).str == v;
  }, 3000ms));
  const std::string value = rl.value();
  auto f = got.get_future();
  const auto t0 = steady::now();
  asio::post(rl.executor(), [&] { sig.emit(asio::cancellation_type::terminal); });
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(f.get(), errc::operation_aborted);
  EXPECT_LT(ms_since(t0), 1000) << "not at the nodes' timeout";
  srv(1).resume();
  srv(2).resume();
  EXPECT_TRUE(none_left("onwire", value, 2000ms)) << "the releases land behind the stopped nodes' SETs";
}

TEST_F(redlock_hold_test, closing_the_first_client_completes_an_async_attempt_in_flight) {
  start(3);
  redlock_options o;
  o.ttl = 10'000ms;
  o.node_timeout = 3000ms;
  redlock rl(nodes(), "closed", o);
  srv(1).pause();
  srv(2).pause();
  std::promise<std::error_code> got;
  rl.async_try_lock(5000ms, [&](std::error_code ec, bool) { got.set_value(ec); });
  ASSERT_TRUE(eventually([&] {
    auto v = rl.value();
    return !v.empty() && raw(0)({"GET", "closed"}).str == v;
  }, 3000ms));
  auto f = got.get_future();
  const auto t0 = steady::now();
  clients_.at(0)->close();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready) << "the handler is not left hanging";
  EXPECT_EQ(f.get(), errc::client_closed);
  EXPECT_LT(ms_since(t0), 1500);
  srv(1).resume();
  srv(2).resume();
  std::error_code ec;
  EXPECT_FALSE(rl.try_lock(ec));
  EXPECT_EQ(ec, errc::client_closed);
}

TEST_F(redlock_hold_test, keys_of_another_type_on_a_majority_end_the_wait_with_wrong_type) {
  start(3);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(raw(i)({"HSET", "typed", "f", "v"}).integer, 1);
  auto rl = make("typed");
  std::error_code ec;
  const auto t0 = steady::now();
  EXPECT_FALSE(rl.try_lock(5000ms, ec));
  EXPECT_EQ(ec, errc::wrong_type) << ec.message();
  EXPECT_NE(last_error_text().find("WRONGTYPE"), std::string::npos) << last_error_text();
  EXPECT_LT(ms_since(t0), 1000) << "said at the first attempt, not retried until the wait ends";
  EXPECT_TRUE(none_left("typed", rl.value()));
  // On one node only, a majority is still there.
  ASSERT_EQ(raw(1)({"DEL", "typed"}).integer, 1);
  EXPECT_TRUE(rl.try_lock(ec)) << ec.message();
  rl.unlock();
}

}  // namespace
}  // namespace redlease::test
