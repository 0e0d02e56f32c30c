// SPDX-License-Identifier: MIT
// The count-down latch (Redisson's RCountDownLatch layout) against a real redis-server: the count's
// calls, waiters released by the message of the last count_down (well within the poll cap), await
// timeouts, a deleted and an expired latch, exactly-once count_down across a lost reply, and
// interoperation with a Redisson peer played with raw commands.
#include <gtest/gtest.h>

#include <asio/use_future.hpp>

#include <atomic>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

std::string channel_of(const std::string& name) { return "redisson_countdownlatch__channel__{" + name + "}"; }

// Redisson 4.7.0's latch calls, as its scripts behave (KEYS [name, channel]).
constexpr const char* redisson_try_set_count =
    "if redis.call('exists', KEYS[1]) == 0 then redis.call('set', KEYS[1], ARGV[2]); "
    "redis.call(ARGV[3], KEYS[2], ARGV[1]); return 1; else return 0; end";
constexpr const char* redisson_count_down =
    "local v = redis.call('decr', KEYS[1]); if v <= 0 then redis.call('del', KEYS[1]) end; "
    "if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";

class latch_test : public lock_fixture {
 protected:
  // Subscribers on the latch's channel (one per client that waits on it).
  long long subscribers(const std::string& name) {
    auto r = raw()({"PUBSUB", "NUMSUB", channel_of(name)});
    return r.elements.size() == 2 ? r.elements[1].integer : -1;
  }
};

TEST_F(latch_test, try_set_count_once_count_down_to_zero_deletes_the_key) {
  client c{cfg()};
  auto l = c.count_down_latch("gate");
  EXPECT_EQ(l.count(), 0);  // a missing latch reads 0
  EXPECT_TRUE(l.try_set_count(2));
  EXPECT_FALSE(l.try_set_count(5));
  EXPECT_EQ(l.count(), 2);
  EXPECT_EQ(raw()({"GET", "gate"}).str, "2");
  EXPECT_EQ(raw()({"TYPE", "gate"}).str, "string");
  EXPECT_EQ(raw()({"PTTL", "gate"}).integer, -1);  // no TTL unless asked for
  l.count_down();
  EXPECT_EQ(l.count(), 1);
  l.count_down();
  EXPECT_EQ(l.count(), 0);
  EXPECT_EQ(raw()({"EXISTS", "gate"}).integer, 0);
  l.count_down();  // past zero: stays 0, no key
  EXPECT_EQ(raw()({"EXISTS", "gate"}).integer, 0);
  EXPECT_TRUE(l.await_for(0ms));  // at 0: passes at once
  l.await();
  std::error_code ec;
  EXPECT_FALSE(l.try_set_count(0, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(l.try_set_count(1, 0ms, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(l.await_for(-1ms, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_THROW(c.count_down_latch(""), error);
  EXPECT_EQ(raw()({"EXISTS", "gate"}).integer, 0);
}

TEST_F(latch_test, a_value_that_is_not_a_count_is_an_error) {
  client c{cfg()};
  auto l = c.count_down_latch("junk");
  raw()({"SET", "junk", "abc"});
  std::error_code ec;
  EXPECT_EQ(l.count(ec), 0);
  EXPECT_EQ(ec, errc::bad_reply);
  EXPECT_FALSE(l.await_for(100ms, ec));
  EXPECT_TRUE(ec) << "await on a value that is not a count";
  raw()({"HSET", "junk2", "a", "1"});
  auto h = c.count_down_latch("junk2");
  h.count_down(ec);
  EXPECT_TRUE(ec);
  EXPECT_EQ(raw()({"TYPE", "junk2"}).str, "hash");
}

TEST_F(latch_test, waiters_are_released_by_the_last_count_down_message) {
  // A poll cap far above the bound below: a release within it came from the message.
  auto conf = cfg();
  conf.mutex_poll_cap = 5000ms;
  client a{conf}, b{conf};
  auto la = a.count_down_latch("rendezvous");
  auto lb = b.count_down_latch("rendezvous");
  ASSERT_TRUE(la.try_set_count(2));
  constexpr int threads = 3;
  std::atomic<int> started{0};
  std::vector<std::future<std::pair<bool, steady::time_point>>> done;
  for (int i = 0; i < threads + 1; ++i) {
    auto& l = i < threads ? la : lb;
    done.push_back(std::async(std::launch::async, [&l, &started] {
      ++started;
      bool ok = l.await_for(20s);
      return std::pair{ok, steady::now()};
    }));
  }
  ASSERT_TRUE(eventually([&] { return started.load() == threads + 1 && subscribers("rendezvous") == 2; }));
  // The threads' first checks have no outside sign once both clients subscribed: a short margin.
  std::this_thread::sleep_for(200ms);
  lb.count_down();
  for (auto& f : done) EXPECT_EQ(f.wait_for(300ms), std::future_status::timeout) << "released at count 1";
  const auto t0 = steady::now();
  la.count_down();
  for (auto& f : done) {
    ASSERT_EQ(f.wait_for(3s), std::future_status::ready);
    auto [ok, at] = f.get();
    EXPECT_TRUE(ok);
    EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(at - t0).count(), 1500)
        << "released by the poll, not the message";
  }
  EXPECT_EQ(raw()({"EXISTS", "rendezvous"}).integer, 0);
}

TEST_F(latch_test, await_for_times_out_while_the_count_is_above_zero) {
  client c{cfg()};
  auto l = c.count_down_latch("slow");
  ASSERT_TRUE(l.try_set_count(1));
  auto t0 = steady::now();
  EXPECT_FALSE(l.await_for(300ms));
  EXPECT_GE(ms_since(t0), 290);
  EXPECT_LT(ms_since(t0), 3000);
  EXPECT_FALSE(l.await_for(0ms));
  EXPECT_EQ(l.count(), 1);
  // count_down_and_await: the last party passes at once; an earlier one times out.
  ASSERT_TRUE(c.count_down_latch("pair").try_set_count(2));
  auto p = c.count_down_latch("pair");
  EXPECT_FALSE(p.count_down_and_await(200ms));
  EXPECT_EQ(p.count(), 1);
  EXPECT_TRUE(p.count_down_and_await(5s));
}

TEST_F(latch_test, a_deleted_latch_lets_its_waiters_through) {
  auto conf = cfg();
  conf.mutex_poll_cap = 5000ms;  // the deletion's message wakes them, not the poll
  client c{conf};
  auto l = c.count_down_latch("doomed");
  EXPECT_FALSE(l.delete_latch());  // nothing to delete
  ASSERT_TRUE(l.try_set_count(3));
  auto w = std::async(std::launch::async, [&] { return l.await_for(20s); });
  ASSERT_TRUE(eventually([&] { return subscribers("doomed") == 1; }));
  const auto t0 = steady::now();
  EXPECT_TRUE(l.delete_latch());
  ASSERT_EQ(w.wait_for(3s), std::future_status::ready);
  EXPECT_TRUE(w.get());
  EXPECT_LT(ms_since(t0), 1500);
  EXPECT_EQ(l.count(), 0);
  EXPECT_TRUE(l.try_set_count(1));  // a new round after the deletion
}

TEST_F(latch_test, an_expired_latch_releases_its_waiters_within_a_poll_interval) {
  client c{cfg()};
  auto l = c.count_down_latch("lease");
  ASSERT_TRUE(l.try_set_count(2, 400ms));
  auto ttl = raw()({"PTTL", "lease"}).integer;
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 400);
  const auto t0 = steady::now();
  std::vector<std::future<bool>> ws;
  for (int i = 0; i < 3; ++i) ws.push_back(std::async(std::launch::async, [&] { return l.await_for(20s); }));
  for (auto& w : ws) {
    ASSERT_EQ(w.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(w.get());
  }
  // Expiry at 400 ms publishes nothing: the waiters saw it by their PTTL hint or within a poll cap.
  EXPECT_LT(ms_since(t0), 400 + 100 + 1000);
  EXPECT_EQ(l.count(), 0);

  // A TTL set from outside after the wait began: only the poll cap finds it.
  ASSERT_TRUE(l.try_set_count(1));
  auto w = std::async(std::launch::async, [&] { return l.await_for(20s); });
  ASSERT_TRUE(eventually([&] { return subscribers("lease") == 1; }));
  raw()({"PEXPIRE", "lease", "100"});
  const auto t1 = steady::now();
  ASSERT_EQ(w.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(w.get());
  EXPECT_LT(ms_since(t1), 100 + 100 + 1000);
}

TEST_F(latch_test, count_down_is_applied_once_across_a_lost_reply) {
  fault_proxy proxy(server().port());
  auto conf = cfg();
  conf.host = "127.0.0.1";
  conf.port = proxy.port();
  conf.sync_lane = false;  // one command connection: the lost reply is the count_down's
  conf.on_error = [](const background_error&) {};
  client c{conf};
  auto l = c.count_down_latch("once");
  ASSERT_TRUE(l.try_set_count(3));
  l.count_down();  // the script is loaded: the next sending is one EVALSHA
  ASSERT_EQ(l.count(), 2);
  proxy.lose_next_reply();
  l.count_down();  // its reply is lost: sent again under the same request id
  EXPECT_EQ(proxy.replies_lost(), 1u);
  EXPECT_EQ(l.count(), 1) << "a count_down sent again after a lost reply counted twice";
  // The resent call's request latch keeps its minute; the answered calls' were deleted in passing.
  EXPECT_EQ(raw()({"KEYS", describe(lock_kind::latch, "once").latch_key("*")}).elements.size(), 1u);
  // The same for try_set_count: the resent call hears the first one's "set".
  ASSERT_TRUE(l.delete_latch());
  proxy.lose_next_reply();
  EXPECT_TRUE(l.try_set_count(4));
  EXPECT_EQ(proxy.replies_lost(), 2u);
  EXPECT_EQ(l.count(), 4);
}

// A call whose one sending was answered leaves its request latch to be deleted by the client's next
// call on the latch: 50 count_downs leave one key, not 51 for a minute.
TEST_F(latch_test, settled_request_latches_are_deleted_in_passing) {
  client c{cfg()};
  auto l = c.count_down_latch("swept");
  ASSERT_TRUE(l.try_set_count(100));
  for (int i = 0; i < 50; ++i) l.count_down();
  EXPECT_EQ(l.count(), 50);
  EXPECT_EQ(raw()({"KEYS", describe(lock_kind::latch, "swept").latch_key("*")}).elements.size(), 1u);
}

// The channel wraps the name in braces even when it has a hash tag (Redisson's name); describe() says
// so, and a waiter on such a name is woken by its message.
TEST_F(latch_test, a_hash_tagged_name_keeps_redissons_channel) {
  const std::string name = "{tenant}:gate";
  auto lay = describe(lock_kind::latch, name);
  ASSERT_EQ(lay.keys.size(), 1u);
  EXPECT_EQ(lay.keys[0].key, name);
  EXPECT_EQ(lay.keys[0].type, "string");
  EXPECT_TRUE(lay.token_key.empty());
  ASSERT_EQ(lay.channels.size(), 1u);
  EXPECT_EQ(lay.channels[0].channel, channel_of(name));
  EXPECT_EQ(lay.latch_key_pattern, "redisson_unlock_latch:{tenant}:gate:*");
  auto conf = cfg();
  conf.mutex_poll_cap = 5000ms;
  client c{conf};
  auto l = c.count_down_latch(name);
  ASSERT_TRUE(l.try_set_count(1));
  auto w = std::async(std::launch::async, [&] { return l.await_for(20s); });
  ASSERT_TRUE(eventually([&] { return subscribers(name) == 1; }));
  const auto t0 = steady::now();
  l.count_down();
  ASSERT_EQ(w.wait_for(3s), std::future_status::ready);
  EXPECT_TRUE(w.get());
  EXPECT_LT(ms_since(t0), 1500);
}

TEST_F(latch_test, async_count_down_and_await_for) {
  client c{cfg()};
  auto l = c.count_down_latch("async");
  EXPECT_EQ(l.async_count(asio::use_future).get(), 0);
  ASSERT_TRUE(l.async_try_set_count(2, std::nullopt, asio::use_future).get());
  EXPECT_FALSE(l.async_try_set_count(3, 10s, asio::use_future).get());
  EXPECT_EQ(l.async_count(asio::use_future).get(), 2);
  EXPECT_EQ(raw()({"PTTL", "async"}).integer, -1);
  auto w = l.async_await_for(20s, asio::use_future);
  EXPECT_FALSE(l.async_await_for(100ms, asio::use_future).get());
  l.async_count_down(asio::use_future).get();
  EXPECT_EQ(l.count(), 1);
  EXPECT_EQ(w.wait_for(200ms), std::future_status::timeout);
  l.async_count_down(asio::use_future).get();
  ASSERT_EQ(w.wait_for(3s), std::future_status::ready);
  EXPECT_TRUE(w.get());
  EXPECT_TRUE(l.async_await_for(0ms, asio::use_future).get());
  auto bad = l.async_await_for(-1ms, asio::use_future);
  try {
    bad.get();
    ADD_FAILURE() << "a negative timeout was taken";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  EXPECT_THROW(l.async_try_set_count(0, std::nullopt, asio::use_future).get(), std::system_error);
  // A TTL; a deletion through the async form.
  ASSERT_TRUE(l.async_try_set_count(1, 60s, asio::use_future).get());
  EXPECT_GT(raw()({"PTTL", "async"}).integer, 50000);
  EXPECT_TRUE(l.async_delete_latch(asio::use_future).get());
  EXPECT_FALSE(l.async_delete_latch(asio::use_future).get());
  raw()({"HSET", "async", "f", "v"});
  EXPECT_THROW(l.async_count_down(asio::use_future).get(), std::system_error);
  EXPECT_THROW(l.async_count(asio::use_future).get(), std::system_error);
}

TEST_F(latch_test, interoperates_with_a_redisson_peer) {
  client c{cfg()};
  auto l = c.count_down_latch("shared");
  const std::string ch = channel_of("shared");
  // The peer sets the count; its countDown releases our waiter.
  auto set = raw()({"EVAL", redisson_try_set_count, "2", "shared", ch, "1", "2", "publish"});
  ASSERT_EQ(set.integer, 1);
  EXPECT_FALSE(l.try_set_count(7));  // the peer's count stands
  EXPECT_EQ(l.count(), 2);
  auto w = std::async(std::launch::async, [&] { return l.await_for(20s); });
  ASSERT_TRUE(eventually([&] { return subscribers("shared") == 1; }));
  raw()({"EVAL", redisson_count_down, "2", "shared", ch, "0", "publish"});
  EXPECT_EQ(w.wait_for(300ms), std::future_status::timeout);
  raw()({"EVAL", redisson_count_down, "2", "shared", ch, "0", "publish"});
  ASSERT_EQ(w.wait_for(3s), std::future_status::ready);
  EXPECT_TRUE(w.get());

  // We set the count and count down; the peer's getCount sees it, and its await (subscribed to the
  // channel) hears our "1" for the new count and our "0" at zero.
  raw_client peer_sub(server().client());
  auto sub = peer_sub.command({"SUBSCRIBE", ch});
  ASSERT_TRUE(sub.is_array());
  ASSERT_TRUE(l.try_set_count(2));
  auto m1 = peer_sub.read_reply();
  ASSERT_EQ(m1.elements.size(), 3u);
  EXPECT_EQ(m1.elements[2].str, "1");
  l.count_down();
  EXPECT_EQ(raw()({"GET", "shared"}).str, "1");  // the peer's getCount
  l.count_down();
  auto m0 = peer_sub.read_reply();
  ASSERT_EQ(m0.elements.size(), 3u);
  EXPECT_EQ(m0.elements[1].str, ch);
  EXPECT_EQ(m0.elements[2].str, "0");
  EXPECT_TRUE(raw()({"GET", "shared"}).is_nil());  // getCount: 0
  // Our delete publishes "1", as Redisson's does.
  ASSERT_TRUE(l.try_set_count(1));
  EXPECT_EQ(peer_sub.read_reply().elements.at(2).str, "1");
  EXPECT_TRUE(l.delete_latch());
  EXPECT_EQ(peer_sub.read_reply().elements.at(2).str, "1");
}

}  // namespace
}  // namespace redlease::test
