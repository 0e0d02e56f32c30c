// SPDX-License-Identifier: MIT
// redlease::semaphore against real redis-server: the accounting, exclusion at the permit count,
// wake-ups by count, and interoperation with a Redisson peer (played with Redisson's RSemaphore
// logic as raw EVALs).
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/use_future.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

// Redisson 4.7.0's RedissonSemaphore, as the Java side sends it.
const char* java_try_acquire =
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "redis.call('decrby', KEYS[1], ARGV[1]); return 1; end; return 0;";
const char* java_release =
    "local value = redis.call('incrby', KEYS[1], ARGV[1]); redis.call(ARGV[2], KEYS[2], value);";

class semaphore_test : public lock_fixture {
 protected:
  static std::string channel_of(const std::string& name) { return "redisson_sc:{" + name + "}"; }
  long long subscribers(const std::string& name) {
    auto r = raw()({"PUBSUB", "NUMSUB", channel_of(name)});
    return r.elements.size() == 2 ? r.elements[1].integer : -1;
  }
  long long java_acquire(const std::string& name, long long n) {
    return raw().command({"EVAL", java_try_acquire, "1", name, std::to_string(n)}).integer;
  }
  // A configuration through `proxy`, on one connection (a reply the proxy loses is the call's).
  config through(const fault_proxy& proxy) {
    auto conf = cfg();
    conf.port = proxy.port();
    conf.sync_lane = false;
    return conf;
  }
  void java_give(const std::string& name, long long n) {
    raw().command({"EVAL", java_release, "2", name, channel_of(name), std::to_string(n), "publish"});
  }
};

TEST_F(semaphore_test, accounting_matches_redissons_layout) {
  client c{cfg()};
  auto s = c.semaphore("pool");
  EXPECT_EQ(s.available_permits(), 0);
  EXPECT_TRUE(s.try_set_permits(5));
  EXPECT_FALSE(s.try_set_permits(7));  // once only
  EXPECT_EQ(raw()({"GET", "pool"}).str, "5");
  EXPECT_EQ(raw()({"PTTL", "pool"}).integer, -1);
  EXPECT_TRUE(s.try_acquire(2));
  EXPECT_EQ(s.available_permits(), 3);
  EXPECT_FALSE(s.try_acquire(4));
  EXPECT_EQ(s.available_permits(), 3);
  s.release(2);
  EXPECT_EQ(s.available_permits(), 5);
  EXPECT_EQ(s.add_permits(3), 8);
  EXPECT_EQ(s.add_permits(-1), 7);
  EXPECT_EQ(s.drain_permits(), 7);
  EXPECT_EQ(s.available_permits(), 0);
  EXPECT_FALSE(s.try_acquire_for(0ms));

  // A TTL with the permits; adding and releasing keep it.
  auto t = c.semaphore("pool:ttl");
  EXPECT_TRUE(t.try_set_permits(4, 60s));
  auto ttl0 = raw()({"PTTL", "pool:ttl"}).integer;
  EXPECT_GT(ttl0, 50000);
  EXPECT_EQ(t.add_permits(2), 6);
  t.acquire(3);
  t.release(1);
  EXPECT_EQ(t.available_permits(), 4);
  auto ttl1 = raw()({"PTTL", "pool:ttl"}).integer;
  EXPECT_GT(ttl1, 50000);
  EXPECT_LE(ttl1, ttl0);

  // Hash-tagged names keep their tag on the channel.
  EXPECT_EQ(describe(lock_kind::semaphore, "{app}:sem").channel(), "redisson_sc:{app}:sem");
  EXPECT_EQ(describe(lock_kind::semaphore, "sem").channel(), "redisson_sc:{sem}");

  std::error_code ec;
  EXPECT_FALSE(s.try_acquire(0, 0ms, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  s.release(0, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(s.try_set_permits(-1, std::nullopt, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_THROW(c.semaphore(""), error);
}

TEST_F(semaphore_test, guard_holds_permits_for_a_scope) {
  client c{cfg()};
  auto s = c.semaphore("guarded");
  ASSERT_TRUE(s.try_set_permits(3));
  {
    semaphore_guard g(s, 2);
    EXPECT_EQ(s.available_permits(), 1);
  }
  EXPECT_EQ(s.available_permits(), 3);
}

TEST_F(semaphore_test, never_more_inside_than_permits) {
  client a{cfg()};
  client b{cfg()};
  ASSERT_TRUE(a.semaphore("gate").try_set_permits(3));
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&, i] {
      auto s = (i % 2 ? a : b).semaphore("gate");
      for (int k = 0; k < 15; ++k) {
        std::error_code ec;
        if (!s.try_acquire(1, 20s, ec) || ec) {
          ++failures;
          continue;
        }
        int now = ++inside;
        int m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        std::this_thread::sleep_for(1ms);
        --inside;
        s.release(1, ec);
        if (ec) ++failures;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(most.load(), 3);
  EXPECT_GE(most.load(), 1);
  EXPECT_EQ(a.semaphore("gate").available_permits(), 3);
}

// A waiter for 3 among waiters for 1: messages saying 1 is free do not wake it (its client sends
// nothing meanwhile), and the one saying 3 are free does, at once.
TEST_F(semaphore_test, a_waiter_for_three_is_woken_by_count) {
  client big{cfg()};
  client small{cfg()};
  client giver{cfg()};
  auto s = giver.semaphore("counted");
  ASSERT_TRUE(s.try_set_permits(0));
  // Connected first: the replies counted below are the waiters' attempts.
  EXPECT_EQ(big.semaphore("counted").available_permits(), 0);
  EXPECT_EQ(small.semaphore("counted").available_permits(), 0);
  const auto big0 = big.stats().replies;
  const auto small0 = small.stats().replies;
  auto b = std::async(std::launch::async, [&] {
    bool got = big.semaphore("counted").try_acquire(3, 20s);
    return std::make_pair(got, steady::now());
  });
  ASSERT_TRUE(eventually([&] { return subscribers("counted") == 1; }));
  // Its attempt after the subscription's confirmation (its second command) is answered.
  ASSERT_TRUE(eventually([&] { return big.stats().replies >= big0 + 2; }));
  auto s1 = std::async(std::launch::async, [&] { return small.semaphore("counted").try_acquire(1, 20s); });
  auto s2 = std::async(std::launch::async, [&] { return small.semaphore("counted").try_acquire(1, 20s); });
  ASSERT_TRUE(eventually([&] { return subscribers("counted") == 2; }));
  // Each waiter's first attempt, and the first's again after the subscription's confirmation.
  ASSERT_TRUE(eventually([&] { return small.stats().replies >= small0 + 3; }));
  const auto big_commands = big.stats().commands;
  s.release(1);
  s.release(1);
  EXPECT_TRUE(s1.get());
  EXPECT_TRUE(s2.get());
  EXPECT_EQ(big.stats().commands, big_commands) << "a message saying 1 is free woke the waiter for 3";
  EXPECT_EQ(b.wait_for(0s), std::future_status::timeout);
  auto t0 = steady::now();
  s.release(3);
  auto [got, at] = b.get();
  EXPECT_TRUE(got);
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(at - t0).count(), 2000);
  EXPECT_EQ(s.available_permits(), 0);
}

// A Redisson peer's release (INCRBY and PUBLISH of the new count) wakes our waiter at once; our
// release is seen by its tryAcquire, and our waiter does not poll meanwhile.
TEST_F(semaphore_test, interop_with_a_redisson_peer) {
  client c{cfg()};
  auto s = c.semaphore("shared:sem");
  ASSERT_TRUE(s.try_set_permits(1));
  const auto replies0 = c.stats().replies;
  EXPECT_EQ(java_acquire("shared:sem", 1), 1);
  EXPECT_EQ(java_acquire("shared:sem", 1), 0);
  auto w = std::async(std::launch::async, [&] {
    bool got = s.try_acquire(1, 20s);
    return std::make_pair(got, steady::now());
  });
  ASSERT_TRUE(eventually([&] { return subscribers("shared:sem") == 1; }));
  // Its attempt, and its attempt after the subscription's confirmation (a third may follow when
  // the first reply came after the confirmation: under TSan it did). Then nothing more: the count of
  // commands settles (a poller's never would, with a poll cap of 100 ms).
  ASSERT_TRUE(eventually([&] { return c.stats().replies >= replies0 + 2; }));
  ASSERT_TRUE(eventually([&] {
    const auto before = c.stats().commands;
    std::this_thread::sleep_for(150ms);
    return c.stats().commands == before;
  }));
  const auto commands = c.stats().commands;
  std::this_thread::sleep_for(300ms);  // a window in which a polling waiter would show
  EXPECT_EQ(c.stats().commands, commands) << "the waiter polls";
  auto t0 = steady::now();
  java_give("shared:sem", 1);
  auto [got, at] = w.get();
  EXPECT_TRUE(got);
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(at - t0).count(), 2000);
  EXPECT_EQ(java_acquire("shared:sem", 1), 0);
  s.release(1);
  EXPECT_EQ(java_acquire("shared:sem", 1), 1);
  EXPECT_EQ(s.available_permits(), 0);
}

// Our release publishes the new count on Redisson's channel, which its waiters read.
TEST_F(semaphore_test, release_publishes_the_new_count) {
  client c{cfg()};
  auto s = c.semaphore("told");
  ASSERT_TRUE(s.try_set_permits(2));
  auto sub = server().client();
  auto r = sub.command({"SUBSCRIBE", channel_of("told")});
  ASSERT_TRUE(r.is_array());
  s.release(3);
  auto m = sub.read_reply();
  ASSERT_TRUE(m.is_array());
  ASSERT_EQ(m.elements.size(), 3u);
  EXPECT_EQ(m.elements[2].str, "5");
}

// A cancelled (timed-out) wait leaves the count as it was, and a release's latch makes a resend
// with the same request id add nothing.
TEST_F(semaphore_test, release_latch_makes_a_resend_add_nothing) {
  client c{cfg()};
  auto s = c.semaphore("latched");
  ASSERT_TRUE(s.try_set_permits(0));
  EXPECT_FALSE(s.try_acquire(2, 100ms));
  EXPECT_EQ(s.available_permits(), 0);
  // The release script, sent twice under one request id (as after a lost reply).
  std::string body;
  for (const auto& e : embedded_scripts())
    if (e.name == "semaphore_release") body = std::string(e.body);
  ASSERT_FALSE(body.empty());
  auto latch = describe(lock_kind::semaphore, "latched").latch_key("req1");
  for (int i = 0; i < 2; ++i) {
    auto r = raw().command({"EVAL", body, "2", "latched", latch, channel_of("latched"), "2", "60000", "publish"});
    EXPECT_EQ(r.integer, 2);
  }
  EXPECT_EQ(s.available_permits(), 2);
}

// The exactly-once keys of calls whose one sending was answered (an acquisition's grant mark, a
// release's latch) are deleted in passing by the client's next call on the name: 200 pairs leave the
// last call's key alone, where each pair's two keys used to stay a minute (about 450 bytes a pair).
TEST_F(semaphore_test, settled_exactly_once_keys_are_deleted_in_passing) {
  client c{cfg()};
  auto s = c.semaphore("swept");
  ASSERT_TRUE(s.try_set_permits(3));
  auto keys = [&] { return raw()({"KEYS", describe(lock_kind::semaphore, "swept").latch_key("*")}).elements.size(); };
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(s.try_acquire(1, 0ms));
    s.release(1);
  }
  EXPECT_EQ(keys(), 1u);  // the last release's latch, which the next call deletes
  EXPECT_EQ(s.add_permits(2), 5);
  EXPECT_EQ(keys(), 1u);  // add_permits' own latch now
  ASSERT_TRUE(s.try_acquire(5, 0ms));
  EXPECT_EQ(keys(), 1u);  // the grant's mark (the latch before it deleted)
  // A refused attempt writes no mark, and still deletes what is settled: the grant's mark.
  EXPECT_FALSE(s.try_acquire(1, 0ms));
  EXPECT_EQ(keys(), 0u);
  s.release(5);
  EXPECT_EQ(keys(), 1u);
  EXPECT_EQ(s.available_permits(), 5);
}

// A release whose reply is lost (the script ran) is sent again under the same request id: its latch
// makes it add the permits once.
TEST_F(semaphore_test, a_release_whose_reply_is_lost_adds_once) {
  fault_proxy proxy(server().port());
  client c{through(proxy)};
  auto s = c.semaphore("lost:release");
  ASSERT_TRUE(s.try_set_permits(1));
  proxy.lose_next_reply();
  s.release(2);
  EXPECT_EQ(proxy.replies_lost(), 1u);
  EXPECT_EQ(raw()({"GET", "lost:release"}).str, "3");
  EXPECT_EQ(s.add_permits(0), 3);
  // The resent release's latch is kept for its minute (a sending of it may still be on the way),
  // not deleted in passing by the next call as a settled one is; add_permits' own is there too.
  EXPECT_EQ(raw()({"KEYS", describe(lock_kind::semaphore, "lost:release").latch_key("*")}).elements.size(), 2u);
}

// An acquisition whose reply is lost (the script took the permits) is undone: the permits come
// back, once.
TEST_F(semaphore_test, an_acquisition_whose_reply_is_lost_is_given_back) {
  fault_proxy proxy(server().port());
  client c{through(proxy)};
  auto s = c.semaphore("lost:acquire");
  ASSERT_TRUE(s.try_set_permits(3));
  proxy.lose_next_reply();
  std::error_code ec;
  EXPECT_FALSE(s.try_acquire(2, 0ms, ec));
  EXPECT_EQ(ec, errc::connection_lost) << ec.message();
  EXPECT_EQ(proxy.replies_lost(), 1u);
  ASSERT_TRUE(eventually([&] { return raw()({"GET", "lost:acquire"}).str == "3"; }));
  std::this_thread::sleep_for(200ms);  // an undo applied twice would show as 5
  EXPECT_EQ(raw()({"GET", "lost:acquire"}).str, "3");
}

// The async calls: a wait woken by an async release, and a cancelled wait that takes nothing (the
// release after it goes to nobody but the count).
TEST_F(semaphore_test, async_acquire_release_and_cancellation) {
  client c{cfg()};
  auto s = c.semaphore("async");
  ASSERT_TRUE(s.try_set_permits(0));
  auto f = s.async_try_acquire(2, std::nullopt, asio::use_future);
  ASSERT_TRUE(eventually([&] { return subscribers("async") == 1; }));
  s.async_release(1, asio::use_future).get();
  EXPECT_EQ(f.wait_for(300ms), std::future_status::timeout);  // 1 free: not enough
  s.async_release(1, asio::use_future).get();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(f.get());
  EXPECT_EQ(s.available_permits(), 0);

  asio::cancellation_signal sig;
  auto g = s.async_try_acquire(1, std::nullopt, asio::bind_cancellation_slot(sig.slot(), asio::use_future));
  ASSERT_TRUE(eventually([&] { return subscribers("async") == 1; }));
  asio::post(c.get_executor(), [&] { sig.emit(asio::cancellation_type::terminal); });
  ASSERT_EQ(g.wait_for(5s), std::future_status::ready);
  try {
    g.get();
    ADD_FAILURE() << "the cancelled wait completed without an error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::operation_aborted) << e.what();
  }
  s.release(1);
  EXPECT_EQ(s.available_permits(), 1);
  std::error_code ec;
  auto bad = s.async_try_acquire(0, 0ms, asio::use_future);
  try {
    bad.get();
  } catch (const std::system_error& e) {
    ec = e.code();
  }
  EXPECT_EQ(ec, errc::invalid_argument);
}

// The async forms of the other calls: each completes with the value the server shows, through a
// future and through a plain callback that never runs inside its initiating call; a bad argument, a
// closed client and a key that holds no count complete with their errors, asynchronously too; and
// async_add_permits is exactly once across a lost reply (the latched call of add_permits).
TEST_F(semaphore_test, async_queries_and_updates) {
  using std::nullopt;
  client c{cfg()};
  auto s = c.semaphore("async:q");
  EXPECT_EQ(s.async_available_permits(asio::use_future).get(), 0);
  EXPECT_TRUE(s.async_try_set_permits(5, nullopt, asio::use_future).get());
  EXPECT_FALSE(s.async_try_set_permits(7, nullopt, asio::use_future).get());  // once only
  EXPECT_EQ(raw()({"GET", "async:q"}).str, "5");
  EXPECT_EQ(raw()({"PTTL", "async:q"}).integer, -1);
  EXPECT_EQ(s.async_add_permits(3, asio::use_future).get(), 8);
  EXPECT_EQ(raw()({"GET", "async:q"}).str, "8");
  EXPECT_EQ(s.async_add_permits(-2, asio::use_future).get(), 6);
  EXPECT_EQ(raw()({"GET", "async:q"}).str, "6");
  EXPECT_EQ(s.async_available_permits(asio::use_future).get(), 6);

  // Plain callbacks, each run outside the call that started it.
  EXPECT_EQ(value_by_callback<long long>([&](auto h) { s.async_add_permits(1, std::move(h)); }), 7);
  EXPECT_EQ(raw()({"GET", "async:q"}).str, "7");
  EXPECT_EQ(value_by_callback<long long>([&](auto h) { s.async_available_permits(std::move(h)); }), 7);
  EXPECT_FALSE(value_by_callback<bool>([&](auto h) { s.async_try_set_permits(1, nullopt, std::move(h)); }));
  EXPECT_EQ(value_by_callback<long long>([&](auto h) { s.async_drain_permits(std::move(h)); }), 7);
  EXPECT_EQ(raw()({"GET", "async:q"}).str, "0");
  EXPECT_EQ(s.async_add_permits(2, asio::use_future).get(), 2);
  EXPECT_EQ(s.async_drain_permits(asio::use_future).get(), 2);
  EXPECT_EQ(s.async_drain_permits(asio::use_future).get(), 0);
  auto t = c.semaphore("async:q:ttl");
  EXPECT_TRUE(value_by_callback<bool>([&](auto h) { t.async_try_set_permits(4, 60s, std::move(h)); }));
  EXPECT_GT(raw()({"PTTL", "async:q:ttl"}).integer, 50000);

  // Bad arguments: refused asynchronously, nothing sent.
  auto b = c.semaphore("async:q:bad");
  EXPECT_EQ(error_by_callback<bool>([&](auto h) { b.async_try_set_permits(-1, nullopt, std::move(h)); }),
            errc::invalid_argument);
  EXPECT_EQ(error_by_callback<bool>([&](auto h) { b.async_try_set_permits(1, 0ms, std::move(h)); }),
            errc::invalid_argument);
  EXPECT_EQ(error_of(b.async_try_set_permits(-1, nullopt, asio::use_future)), errc::invalid_argument);
  EXPECT_EQ(raw()({"EXISTS", "async:q:bad"}).integer, 0);
  // A key that holds something else than a count.
  raw()({"SET", "async:q:bad", "abc"});
  EXPECT_EQ(error_by_callback<long long>([&](auto h) { b.async_available_permits(std::move(h)); }), errc::bad_reply);

  // async_add_permits whose reply is lost is sent again under its request id and adds once.
  fault_proxy proxy(server().port());
  client pc{through(proxy)};
  auto ps = pc.semaphore("async:q:lost");
  ASSERT_TRUE(ps.try_set_permits(1));
  proxy.lose_next_reply();
  EXPECT_EQ(ps.async_add_permits(2, asio::use_future).get(), 3);
  EXPECT_EQ(proxy.replies_lost(), 1u);
  EXPECT_EQ(raw()({"GET", "async:q:lost"}).str, "3");

  // A closed client: client_closed, asynchronously as well.
  pc.close();
  EXPECT_EQ(error_by_callback<long long>([&](auto h) { ps.async_available_permits(std::move(h)); }),
            errc::client_closed);
  EXPECT_EQ(error_of(ps.async_drain_permits(asio::use_future)), errc::client_closed);
  EXPECT_EQ(raw()({"GET", "async:q:lost"}).str, "3");
}

}  // namespace
}  // namespace redlease::test
