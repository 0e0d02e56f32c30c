// SPDX-License-Identifier: MIT
// The non-reentrant mutex, and interoperation with a Redisson service (played with raw commands
// and Redisson's own scripts).
#include <gtest/gtest.h>

#include <asio/use_future.hpp>

#include <future>
#include <sstream>
#include <thread>
#include <vector>

#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

class mutex_test : public lock_fixture {};

TEST_F(mutex_test, set_nx_px_layout_with_random_token) {
  client c{cfg()};
  auto m = c.mutex("jobs:nightly");
  m.lock();
  auto v = raw()({"GET", "jobs:nightly"});
  ASSERT_TRUE(v.is_string());
  EXPECT_EQ(v.str.size(), 32u);  // 128 random bits, hex
  EXPECT_EQ(v.str.find_first_not_of("0123456789abcdef"), std::string::npos);
  auto ttl = raw()({"PTTL", "jobs:nightly"}).integer;
  EXPECT_GT(ttl, 29000);
  EXPECT_EQ(m.hold_count(), 1);
  m.unlock();
  EXPECT_EQ(raw()({"EXISTS", "jobs:nightly"}).integer, 0);
  m.lock();
  auto v2 = raw()({"GET", "jobs:nightly"});
  EXPECT_NE(v.str, v2.str);  // a fresh token per acquisition
  m.unlock();
}

TEST_F(mutex_test, reacquire_by_owner_is_would_deadlock_not_a_hang) {
  client c{cfg()};
  auto m = c.mutex("nr");
  m.lock();
  std::error_code ec;
  auto t0 = steady::now();
  m.lock(ec);
  EXPECT_EQ(ec, errc::would_deadlock);
  EXPECT_FALSE(m.try_lock(1s, ec));
  EXPECT_EQ(ec, errc::would_deadlock);
  EXPECT_LT(ms_since(t0), 200);
  m.unlock();
}

// Two acquisitions of one mutex by one async owner on the wire at once: the second waits (busy)
// behind the first's grant. When the first's key vanishes from the server (deleted here) before the
// client notices, the second must not be granted into the first's hold: it fails with
// would_deadlock, as a re-acquisition by the holder does at the start. Before, its grant joined the
// first hold as a second level and kept the first's token: the release then compared the wrong
// token (lock_lost), and the second grant's key stayed for a whole lease.
TEST_F(mutex_test, a_second_acquisition_by_the_holder_on_the_wire_is_would_deadlock) {
  client c{cfg()};
  auto m = c.mutex("dup");
  const owner_id o = c.new_owner();
  auto first = m.async_try_lock(o, 0ms, asio::use_future);
  auto second = m.async_try_lock(o, 5s, asio::use_future);
  ASSERT_TRUE(first.get());
  const auto token = raw()({"GET", "dup"}).str;
  raw()({"DEL", "dup"});  // the first hold's key vanishes; its next renewal is 10 s away
  ASSERT_EQ(second.wait_for(2s), std::future_status::ready);
  try {
    EXPECT_FALSE(second.get());
    ADD_FAILURE() << "the second acquisition ended without an error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::would_deadlock) << e.what();
  }
  EXPECT_EQ(raw()({"EXISTS", "dup"}).integer, 0) << "the second acquisition took the key";
  std::error_code ec;
  try {
    m.async_unlock(o, asio::use_future).get();
  } catch (const std::system_error& e) {
    ec = e.code();
  }
  EXPECT_EQ(ec, errc::lock_lost);  // the first hold's key was deleted
  EXPECT_EQ(raw()({"EXISTS", "dup"}).integer, 0);
  EXPECT_FALSE(m.valid(o));
  EXPECT_FALSE(token.empty());
}

TEST_F(mutex_test, compare_and_delete_never_deletes_another_holders_key) {
  client c{cfg()};
  auto m = c.mutex("cad");
  m.lock();
  raw()({"SET", "cad", "someone-elses-token", "PX", "30000"});
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  EXPECT_EQ(raw()({"GET", "cad"}).str, "someone-elses-token");
  m.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
}

TEST_F(mutex_test, watchdog_renews_with_compare_and_pexpire) {
  client c{cfg(300ms)};
  auto m = c.mutex("mwd");
  std::promise<lost_info> p;
  m.on_lost([&](const lost_info& i) { p.set_value(i); });
  m.lock();
  std::this_thread::sleep_for(900ms);
  EXPECT_GT(raw()({"PTTL", "mwd"}).integer, 0);
  EXPECT_TRUE(m.valid());
  raw()({"SET", "mwd", "intruder", "PX", "30000"});
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(f.get().reason, lost_reason::taken);
  EXPECT_GT(raw()({"PTTL", "mwd"}).integer, 20000);  // the intruder's TTL, not renewed by us
}

TEST_F(mutex_test, redlease_release_wakes_waiter_at_once) {
  auto conf = cfg();
  conf.mutex_poll_cap = 10s;  // only the release's message can wake it within the bound below
  client c{conf};
  auto m = c.mutex("mwake");
  m.lock();
  auto waiter = std::async(std::launch::async, [&] {
    auto m2 = c.mutex("mwake");
    bool got = m2.try_lock(10s);
    auto at = steady::now();
    if (got) m2.unlock();
    return std::make_pair(got, at);
  });
  ASSERT_TRUE(eventually([&] {
    auto r = raw()({"PUBSUB", "NUMSUB", "redlease_mutex__channel:{mwake}"});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  }));
  auto t0 = steady::now();
  m.unlock();
  auto [got, at] = waiter.get();
  EXPECT_TRUE(got);
  // Unwoken, it would sleep out its 10 s; the bound leaves a loaded machine its slack.
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(at - t0).count(), 2000);
}

// The server's times (MONITOR, in seconds) of the next `n` commands that clients sent naming `key`
// (a script's own commands, "[0 lua]", are not counted).
std::vector<double> commands_on(raw_client& monitor, const std::string& key, std::size_t n) {
  std::vector<double> at;
  const std::string quoted = "\"" + key + "\"";
  while (at.size() < n) {
    auto line = monitor.read_reply();
    if (!line.is_status() || line.str.find(" lua] ") != std::string::npos) continue;
    if (line.str.find(quoted) != std::string::npos) at.push_back(std::stod(line.str));
  }
  return at;
}

TEST_F(mutex_test, foreign_holder_release_is_seen_within_poll_cap) {
  auto conf = cfg();
  conf.mutex_poll_cap = 50ms;
  client c{conf};
  raw()({"SET", "foreign", "redis-py-token", "NX", "PX", "60000"});  // another library's holder
  auto m = c.mutex("foreign");
  auto monitor = server().client();
  ASSERT_TRUE(monitor({"MONITOR"}).is_ok());
  auto waiter = std::async(std::launch::async, [&] { return m.try_lock(5s); });
  // It polls at the configured cap, not the 100 ms default. Timed by the server, a poll comes the cap
  // after the last reply, plus whatever a loaded machine adds; the few tries of its start (the first,
  // those the subscription's confirmation triggers) come within milliseconds. At the default, no gap
  // would fall between 45 and 95 ms; at the cap, most do.
  const auto at = commands_on(monitor, "foreign", 12);
  std::ostringstream gaps;
  int polls_at_the_cap = 0;
  for (std::size_t i = 1; i < at.size(); ++i) {
    const double gap = at[i] - at[i - 1];
    gaps << " " << static_cast<long long>(gap * 1000) << " ms";
    if (gap >= 0.045 && gap < 0.095) ++polls_at_the_cap;
  }
  EXPECT_GE(polls_at_the_cap, 4) << "gaps between tries:" << gaps.str();
  auto t0 = steady::now();
  raw()({"DEL", "foreign"});  // its compare-and-delete publishes nothing
  EXPECT_TRUE(waiter.get());
  // Unseen, it would wait out its 5 s; the bound leaves a loaded machine its slack.
  EXPECT_LT(ms_since(t0), 50 + 1000);
}

// A client's waiters on one mutex re-check as one: the first polls, the others wait for the
// message of its release. 40 waiters behind a holder that publishes nothing used to send 40 polls
// per cap; they still all get the lock, one after the other, once it is free.
TEST_F(mutex_test, many_waiters_in_one_client_poll_as_one) {
  auto conf = cfg();
  conf.mutex_poll_cap = 50ms;
  client c{conf};
  raw()({"SET", "crowd", "redis-py-token", "NX", "PX", "60000"});
  {
    auto warm = c.mutex("crowd:warm");  // the scripts are loaded: each first attempt is one command
    warm.lock();
    warm.unlock();
  }
  auto m = c.mutex("crowd");
  const int n = 40;
  const auto replies0 = c.stats().replies;
  std::vector<std::future<bool>> got;
  for (int i = 0; i < n; ++i) {
    auto p = std::make_shared<std::promise<bool>>();
    got.push_back(p->get_future());
    const owner_id o = c.new_owner();
    m.async_try_lock(o, 20s, [p, m, o](std::error_code ec, bool ok) mutable {
      if (ec || !ok) return p->set_value(false);
      m.async_unlock(o, [p](std::error_code e) { p->set_value(!e); });
    });
  }
  ASSERT_TRUE(eventually([&] { return c.stats().replies >= replies0 + n; }));
  const auto commands0 = c.stats().commands;
  std::this_thread::sleep_for(500ms);
  const auto polls = c.stats().commands - commands0;
  EXPECT_GE(polls, 5u) << "nobody polls";
  // About 10 (one poller at 50 ms), plus the one try each that the subscription's confirmation
  // wakes, if it came late (under a sanitizer: 90 seen before the scripts were loaded first). Not
  // n * 10 (400).
  EXPECT_LE(polls, 20u + 2 * n);
  auto t0 = steady::now();
  raw()({"DEL", "crowd"});  // publishes nothing
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(got[i].wait_for(10s), std::future_status::ready) << "waiter " << i;
    EXPECT_TRUE(got[i].get()) << "waiter " << i;
  }
  EXPECT_LT(ms_since(t0), 5000);
  EXPECT_EQ(raw()({"EXISTS", "crowd"}).integer, 0);
}

// The polling waiter gives up: the next one takes the polling over. Here the holder publishes
// nothing and its key lives for a minute, so only the second waiter's own re-checks can find the
// lock free before its wait ends.
TEST_F(mutex_test, a_poller_that_gives_up_hands_the_polling_on) {
  auto conf = cfg();
  conf.mutex_poll_cap = 50ms;
  client c{conf};
  raw()({"SET", "handover", "redis-py-token", "NX", "PX", "60000"});
  auto m = c.mutex("handover");
  const auto replies0 = c.stats().replies;
  auto first = m.async_try_lock(c.new_owner(), 300ms, asio::use_future);
  ASSERT_TRUE(eventually([&] { return c.stats().replies > replies0; }));
  const owner_id o2 = c.new_owner();
  auto second = m.async_try_lock(o2, 10s, asio::use_future);
  EXPECT_FALSE(first.get());  // its wait ended; the second is the poller now
  auto t0 = steady::now();
  raw()({"DEL", "handover"});
  ASSERT_EQ(second.wait_for(5s), std::future_status::ready) << "the second waiter does not poll";
  EXPECT_TRUE(second.get());
  EXPECT_LT(ms_since(t0), 1000);
  m.async_unlock(o2, asio::use_future).get();
}

class mutex_keyspace_test : public lock_fixture {
 protected:
  server_options options() const override {
    server_options o;
    o.extra_args = {"--notify-keyspace-events", "Kgx"};
    return o;
  }
};

TEST_F(mutex_keyspace_test, waiter_uses_keyspace_events_when_enabled) {
  auto conf = cfg();
  conf.mutex_poll_cap = 10s;  // a poll would take 10 s: the event must do it
  client c{conf};
  raw()({"SET", "ks", "redsync-token", "NX", "PX", "60000"});
  auto m = c.mutex("ks");
  auto waiter = std::async(std::launch::async, [&] {
    bool got = m.try_lock(8s);
    if (got) m.unlock();  // the owner is this thread
    return got;
  });
  ASSERT_TRUE(eventually([&] {
    auto r = raw()({"PUBSUB", "NUMSUB", "__keyspace@0__:ks"});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  }));
  auto t0 = steady::now();
  raw()({"DEL", "ks"});
  EXPECT_TRUE(waiter.get());
  EXPECT_LT(ms_since(t0), 1000);
  // Expiry too: the "expired" event.
  raw()({"SET", "ks", "redsync-token", "NX", "PX", "300"});
  auto t1 = steady::now();
  EXPECT_TRUE(m.try_lock(8s));
  EXPECT_LT(ms_since(t1), 2000);
  m.unlock();
}

// ---- Redisson interop --------------------------------------------------------------------------

// Redisson 3.24+'s RedissonLock scripts, as the Java side sends them.
const char* redisson_acquire =
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "return redis.call('pttl', KEYS[1]);";
const char* redisson_unlock =
    "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); "
    "return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; ";

class interop_test : public lock_fixture {
 protected:
  // The Java service: its own client id and thread id.
  const std::string java_field = "9f1c2a3b-0000-4000-8000-00000000java:57";
  raw_reply java_acquire(const std::string& name, long long lease_ms = 30000) {
    return raw().command({"EVAL", redisson_acquire, "1", name, std::to_string(lease_ms), java_field});
  }
  raw_reply java_unlock(const std::string& name, const std::string& channel) {
    return raw().command({"EVAL", redisson_unlock, "3", name, channel, "redisson_unlock_latch:{" + name + "}:abcd",
                          "0", "30000", java_field, "publish", "20000"});
  }
};

TEST_F(interop_test, java_holder_excludes_redlease_and_wakes_it_on_unlock) {
  client c{cfg()};
  ASSERT_TRUE(java_acquire("shared:42").is_nil());
  auto l = c.lock("shared:42");
  EXPECT_FALSE(l.try_lock());
  const auto replies0 = c.stats().replies;
  auto waiter = std::async(std::launch::async, [&] {
    bool got = l.try_lock(10s);
    return std::make_pair(got, steady::now());
  });
  ASSERT_TRUE(eventually([&] {
    auto r = raw()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{shared:42}"});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  }));
  // The waiter waits for the message once it has tried again after the subscription's confirmation
  // (its second reply): an unlock before that would be found by the attempt, not told.
  ASSERT_TRUE(eventually([&] { return c.stats().replies >= replies0 + 2; }));
  auto t0 = steady::now();
  EXPECT_EQ(java_unlock("shared:42", "redisson_lock__channel:{shared:42}").integer, 1);
  auto [got, at] = waiter.get();
  EXPECT_TRUE(got);
  // Unwoken, it would sleep out its 10 s (the Java lease is 30 s); the bound leaves a loaded machine its slack.
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(at - t0).count(), 2000);
  // While redlease holds it, the Java side is excluded and learns the TTL.
  auto r = java_acquire("shared:42");
  ASSERT_TRUE(r.is_integer());
  EXPECT_GT(r.integer, 0);
}

TEST_F(interop_test, redlease_unlock_wakes_java_subscriber_and_lets_it_in) {
  client c{cfg()};
  auto l = c.lock("shared:7");
  l.lock();
  EXPECT_TRUE(java_acquire("shared:7").is_integer());
  auto sub = server().client();
  sub.command({"SUBSCRIBE", "redisson_lock__channel:{shared:7}"});
  l.unlock();
  auto msg = sub.read_reply();
  ASSERT_TRUE(msg.is_array());
  ASSERT_EQ(msg.elements.size(), 3u);
  EXPECT_EQ(msg.elements[0].str, "message");
  EXPECT_EQ(msg.elements[2].str, "0");  // Redisson's UNLOCK_MESSAGE
  EXPECT_TRUE(java_acquire("shared:7").is_nil());
  // And redlease is excluded while Java holds it; Java's own reentry works.
  EXPECT_FALSE(l.try_lock());
  EXPECT_TRUE(java_acquire("shared:7").is_nil());
  EXPECT_EQ(raw()({"HGET", "shared:7", java_field}).str, "2");
}

TEST_F(interop_test, name_with_braces_uses_redisson_channel_without_extra_braces) {
  client c{cfg()};
  ASSERT_TRUE(java_acquire("{tenant}:lock").is_nil());
  auto l = c.lock("{tenant}:lock");
  auto waiter = std::async(std::launch::async, [&] { return l.try_lock(10s); });
  ASSERT_TRUE(eventually([&] {
    auto r = raw()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{tenant}:lock"});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  }));
  auto t0 = steady::now();
  java_unlock("{tenant}:lock", "redisson_lock__channel:{tenant}:lock");
  EXPECT_TRUE(waiter.get());
  EXPECT_LT(ms_since(t0), 500);
}

}  // namespace
}  // namespace redlease::test
