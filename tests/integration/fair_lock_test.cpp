// SPDX-License-Identifier: MIT
// The fair lock through the library (issue 12 §3): strict FIFO across redlease and a Redisson-
// behaviour peer (tests/support/redisson_peer.hpp, written from the spec, independent of our
// scripts), hand-off to the head only, a waiter that gives up leaves the queue, a zero wait does not
// queue, the watchdog renews it.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"
#include "redisson_peer.hpp"
#include "slowlog.hpp"

namespace redlease::test {
namespace {

class fair_lock_test : public lock_fixture {
 protected:
  long long queued(const std::string& name) { return raw()({"LLEN", "redisson_lock_queue:{" + name + "}"}).integer; }
  long long deadlines(const std::string& name) {
    return raw()({"ZCARD", "redisson_lock_timeout:{" + name + "}"}).integer;
  }
};

TEST_F(fair_lock_test, waiters_are_served_in_queue_order_across_redlease_and_redisson) {
  const std::string name = "fair:fifo";
  client holder(cfg());
  auto h = holder.fair_lock(name);
  h.lock();
  std::mutex mu;
  std::vector<std::string> order;
  auto served = [&](const std::string& who) {
    std::lock_guard<std::mutex> g(mu);
    order.push_back(who);
  };
  client ours(cfg());
  std::vector<std::thread> threads;
  // Queue four waiters one after the other, alternating the clients: each is in the queue before
  // the next one starts.
  for (int i = 0; i < 4; ++i) {
    std::string who = (i % 2 == 0 ? "redlease-" : "redisson-") + std::to_string(i);
    if (i % 2 == 0) {
      threads.emplace_back([&, who] {
        auto l = ours.fair_lock(name);
        if (l.try_lock(20000ms)) {
          served(who);
          l.unlock();
        }
      });
    } else {
      threads.emplace_back([&, who] {
        redisson_peer peer(server().host(), server().port());
        auto owner = peer.owner(1);
        if (peer.fair_try_lock(name, owner, 30000, 20000)) {
          served(who);
          peer.fair_unlock(name, owner);
        }
      });
    }
    ASSERT_TRUE(eventually([&] { return queued(name) == i + 1; })) << "waiter " << i << " did not queue";
  }
  h.unlock();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<std::string>{"redlease-0", "redisson-1", "redlease-2", "redisson-3"}));
  EXPECT_EQ(queued(name), 0);
  EXPECT_EQ(deadlines(name), 0);
}

TEST_F(fair_lock_test, a_waiter_that_gives_up_leaves_the_queue_and_a_zero_wait_never_queues) {
  const std::string name = "fair:giveup";
  client c(cfg());
  auto l = c.fair_lock(name);
  l.lock();
  std::thread t([&] {
    auto w = c.fair_lock(name);
    auto t0 = steady::now();
    EXPECT_FALSE(w.try_lock(300ms));
    EXPECT_GE(ms_since(t0), 250);
    // One attempt, no queueing: the queue stays empty.
    EXPECT_FALSE(w.try_lock(0ms));
  });
  ASSERT_TRUE(eventually([&] { return queued(name) == 1; }));
  t.join();
  EXPECT_TRUE(eventually([&] { return queued(name) == 0 && deadlines(name) == 0; }, 2000ms));
  l.unlock();
}

// close() ends every wait with client_closed; a queued fair waiter then gives its place back before
// the connections close. Before, the close dropped the give-ups: the dead entries blocked whoever
// queued behind them until their deadlines (up to queue_allowance, 30 s; Redisson's own: 5 min).
TEST_F(fair_lock_test, closing_the_client_gives_its_waiters_places_back) {
  const std::string name = "fair:close";
  client holder(cfg());
  auto h = holder.fair_lock(name);
  h.lock();
  auto c = std::make_unique<client>(cfg());
  auto l = c->fair_lock(name);
  std::promise<std::error_code> async_done;
  l.async_lock(1, [&](std::error_code ec) { async_done.set_value(ec); });
  ASSERT_TRUE(eventually([&] { return queued(name) == 1; }));
  std::error_code sync_ec;
  std::thread t([&] {
    auto w = c->fair_lock(name);
    EXPECT_FALSE(w.try_lock(20000ms, sync_ec));
  });
  ASSERT_TRUE(eventually([&] { return queued(name) == 2 && deadlines(name) == 2; }));
  c->close();
  t.join();
  EXPECT_EQ(sync_ec, errc::client_closed);
  auto f = async_done.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get(), errc::client_closed);
  // Gone when close() returns, not at the next caller's purge.
  EXPECT_EQ(queued(name), 0) << "a closed client's waiters were left in the queue";
  EXPECT_EQ(deadlines(name), 0);
  // The next waiter is handed the lock at the unlock, not after the dead entries' deadlines.
  client next(cfg());
  std::atomic<long long> took{-1};
  std::thread n([&] {
    auto w = next.fair_lock(name);
    auto t0 = steady::now();
    if (w.try_lock(20000ms)) {
      took = ms_since(t0);
      w.unlock();
    }
  });
  ASSERT_TRUE(eventually([&] { return queued(name) == 1; }));
  h.unlock();
  n.join();
  EXPECT_GE(took.load(), 0);
  EXPECT_LT(took.load(), 10000);
  c.reset();
}

TEST_F(fair_lock_test, a_redisson_waiter_is_handed_the_lock_by_our_unlock_on_its_own_channel) {
  const std::string name = "fair:handoff";
  client c(cfg());
  auto l = c.fair_lock(name);
  l.lock();
  std::atomic<bool> got{false};
  std::thread t([&] {
    redisson_peer peer(server().host(), server().port());
    got = peer.fair_try_lock(name, peer.owner(7), 30000, 10000);
    if (got) peer.fair_unlock(name, peer.owner(7));
  });
  ASSERT_TRUE(eventually([&] { return queued(name) == 1; }));
  auto t0 = steady::now();
  l.unlock();
  t.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(ms_since(t0), 2000);
}

// A forced unlock purges dead waiters from the head of the queue and tells the live head on its own
// channel, as Redisson's fair forceUnlock does: a Redisson head waits for that message (or its
// wait's end), not for a poll.
TEST_F(fair_lock_test, a_forced_unlock_purges_dead_waiters_and_wakes_a_redisson_head_on_its_own_channel) {
  const std::string name = "fair:forced";
  client c(cfg());
  auto l = c.fair_lock(name);
  l.lock();  // watchdog: a 30 s lease
  // A waiter ahead of it that dies once the Redisson waiter has queued: the forced unlock purges it
  // and tells the live one.
  const std::string queue = "redisson_lock_queue:{" + name + "}", deadlines = "redisson_lock_timeout:{" + name + "}";
  raw()({"RPUSH", queue, "dead:1"});
  raw()({"ZADD", deadlines, std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                         std::chrono::system_clock::now().time_since_epoch())
                                                         .count() +
                                                     60000), "dead:1"});
  std::atomic<bool> got{false};
  std::string live;
  std::thread t([&] {
    redisson_peer peer(server().host(), server().port());
    got = peer.fair_try_lock(name, peer.owner(9), 30000, 15000);
    if (got) peer.fair_unlock(name, peer.owner(9));
  });
  ASSERT_TRUE(eventually([&] {
    auto q = raw()({"LRANGE", queue, "0", "-1"});
    if (q.elements.size() != 2) return false;
    live = q.elements[1].str;
    auto n = raw()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{" + name + "}:" + live});
    return n.elements.size() == 2 && n.elements[1].integer == 1;
  }));
  raw()({"ZADD", deadlines, "1", "dead:1"});
  auto t0 = steady::now();
  client other(cfg());
  EXPECT_TRUE(other.fair_lock(name).force_unlock());
  t.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(ms_since(t0), 4000) << "the live waiter slept until its wait ended";
  EXPECT_EQ(raw()({"ZSCORE", deadlines, "dead:1"}).is_nil(), true) << "the dead waiter was not purged";
}

// A waiter whose process dies while it is queued cannot give up its place. It blocks the queue
// until its deadline: with Redisson's allowance (300 s) that would fail the wait below; with ours
// (config::queue_allowance, here 1 s) its deadline is the holder's remaining lease (3 s) plus 1 s.
TEST_F(fair_lock_test, a_waiter_that_died_in_the_queue_blocks_it_for_its_allowance_not_five_minutes) {
  const std::string name = "fair:dead-head";
  client holder(cfg());
  auto h = holder.fair_lock(name);
  h.lock(3000ms);
  std::promise<std::error_code> dead_done;
  fault_proxy proxy(server().port());
  config dc = cfg();
  dc.port = proxy.port();
  dc.queue_allowance = 1000ms;
  auto dead = std::make_unique<client>(dc);
  auto dl = dead->fair_lock(name);
  dl.async_lock(1, [&](std::error_code ec) { dead_done.set_value(ec); });
  ASSERT_TRUE(eventually([&] { return queued(name) == 1; }));
  // It "dies": from now on nothing it sends reaches the server (no call again, no give-up).
  proxy.stall(true);
  // Were nobody to come by again, its entry would not stay for ever (Redisson's queue keys never
  // expire): both keys live 5 to 10 minutes past its deadline (about 4 s away), then go.
  for (const auto& k : {"redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}"}) {
    long long ttl = raw()({"PTTL", k}).integer;
    EXPECT_GT(ttl, 300'000) << k;
    EXPECT_LT(ttl, 610'000) << k;
  }
  client ours(cfg());
  std::atomic<bool> got{false};
  std::atomic<long long> took{-1};
  std::thread t([&] {
    auto l = ours.fair_lock(name);
    auto t0 = steady::now();
    got = l.try_lock(30000ms);
    took = ms_since(t0);
    if (got) l.unlock();
  });
  ASSERT_TRUE(eventually([&] { return queued(name) == 2; }));
  h.unlock();  // hands the lock to the dead head, which never takes it
  t.join();
  EXPECT_TRUE(got.load()) << "the dead head blocked the queue for the whole wait";
  EXPECT_LT(took.load(), 15000) << "the dead head was purged late";
  // Until its deadline (about 4 s after it queued) the head kept its place: it could have been slow.
  EXPECT_GE(took.load(), 2000) << "the head was purged before its deadline";
  std::cout << "[ fair ] the waiter behind a dead head got the lock after " << took.load() << " ms\n";
  EXPECT_EQ(queued(name), 0);
  EXPECT_EQ(deadlines(name), 0);
  // Closing the dead client completes its wait (with an error: it never got the lock).
  dead.reset();
  auto f = dead_done.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(f.get());
}

// Only the head of the queue can be handed the lock next, so only the head re-checks every
// mutex_poll_cap for a free lock that nobody announced; the waiters behind it call about once a
// second to keep their place. Before, each of N waiters called ten times a second.
TEST_F(fair_lock_test, waiters_behind_the_head_poll_the_server_ten_times_less_and_are_still_served_in_order) {
  const std::string name = "fair:many";
  client holder(cfg());
  auto h = holder.fair_lock(name);
  h.lock();
  constexpr int n = 12;
  client c(cfg());
  auto l = c.fair_lock(name);
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> done{0};
  for (int i = 0; i < n; ++i) {
    const owner_id owner = static_cast<owner_id>(i + 1);
    l.async_lock(owner, [&, owner, i](std::error_code ec) {
      if (!ec) {
        std::lock_guard<std::mutex> g(mu);
        order.push_back(i);
      }
      l.async_unlock(owner, [&](std::error_code) { ++done; });
    });
    ASSERT_TRUE(eventually([&] { return queued(name) == i + 1; })) << "waiter " << i << " did not queue";
  }
  auto evalsha_calls = [&] {
    std::string stats = raw()({"INFO", "commandstats"}).str;
    auto at = stats.find("cmdstat_evalsha:calls=");
    return at == std::string::npos ? 0LL : std::stoll(stats.substr(at + 22));
  };
  // A window over which to count calls, not a wait for an event.
  const long long before = evalsha_calls();
  auto t0 = steady::now();
  std::this_thread::sleep_for(2000ms);
  const long long calls = evalsha_calls() - before;
  const double secs = static_cast<double>(ms_since(t0)) / 1000.0;
  std::cout << "[ fair ] " << n << " queued waiters made " << calls << " calls in " << secs << " s\n";
  // The head: about 10 a second; each of the others: about 1 (10 each, 120 a second, before).
  EXPECT_LT(static_cast<double>(calls), (10.0 + 3.0 * (n - 1)) * secs);
  EXPECT_GT(calls, 0);
  auto t1 = steady::now();
  h.unlock();
  ASSERT_TRUE(eventually([&] { return done.load() == n; }, 10000ms));
  // Every hand-off went by message to the new head, none waited for a poll of a second.
  EXPECT_LT(ms_since(t1), 3000);
  std::vector<int> fifo(n);
  for (int i = 0; i < n; ++i) fifo[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(order, fifo);
  EXPECT_EQ(queued(name), 0);
  EXPECT_EQ(deadlines(name), 0);
}

// A waiter that was behind the head when it last called, and becomes the head without a message
// (a Redisson head's acquireFailed wakes nobody), still finds the free lock: within its interval of
// about a second, not at the end of its wait.
TEST_F(fair_lock_test, a_waiter_that_becomes_the_head_without_a_message_still_gets_the_free_lock) {
  const std::string name = "fair:silent-head";
  client holder(cfg());
  auto h = holder.fair_lock(name);
  h.lock();
  redisson_peer peer(server().host(), server().port());
  const std::string java_head = peer.owner(3);
  ASSERT_TRUE(peer.fair_acquire_queueing(name, java_head, 30000, 30000).is_integer());
  client ours(cfg());
  std::atomic<bool> got{false};
  std::atomic<long long> took{-1};
  steady::time_point gave_up;
  std::atomic<bool> gave_up_set{false};
  std::thread t([&] {
    auto l = ours.fair_lock(name);
    got = l.try_lock(20000ms);
    if (gave_up_set) took = ms_since(gave_up);
    if (got) l.unlock();
  });
  ASSERT_TRUE(eventually([&] { return queued(name) == 2; }));
  h.unlock();  // wakes the Java head only; it never calls again
  gave_up = steady::now();
  gave_up_set = true;
  peer.fair_acquire_failed(name, java_head, 30000);  // leaves the queue, wakes nobody
  t.join();
  EXPECT_TRUE(got.load());
  EXPECT_GE(took.load(), 0) << "our waiter got the lock before the old head left";
  EXPECT_LT(took.load(), 5000) << "the new head did not look again";
  std::cout << "[ fair ] the silent new head got the lock " << took.load() << " ms after the old one left\n";
}

// An attempt whose reply never came is undone: the release in retry mode, then the give-up of the
// place in the queue it may have taken. That give-up took Redisson's 300000 off every deadline
// behind the waiter instead of the waiter's own allowance, and the next call purged them all: here
// a Redisson waiter queued behind ours lost its place to it (FIFO lost; Redisson's bug 4).
TEST_F(fair_lock_test, the_undo_of_a_lost_attempt_leaves_the_queue_with_the_waiters_own_allowance) {
  const std::string name = "fair:undo";
  const std::string queue = "redisson_lock_queue:{" + name + "}", deadlines = "redisson_lock_timeout:{" + name + "}";
  auto score = [&](const std::string& who) {
    auto r = raw()({"ZSCORE", deadlines, who});
    return r.is_nil() ? -1LL : std::stoll(r.str);
  };
  auto members = [&] {
    std::vector<std::string> out;
    for (auto& e : raw()({"LRANGE", queue, "0", "-1"}).elements) out.push_back(e.str);
    return out;
  };
  client holder(cfg());
  auto h = holder.fair_lock(name);
  h.lock();
  fault_proxy proxy(server().port());
  config ac = cfg();
  ac.port = proxy.port();
  ac.health_check_interval = 0ms;  // no PING replies: the next reply from the server is an attempt's
  client a(ac);
  auto al = a.fair_lock(name);
  const owner_id ao = a.new_owner();
  const std::string ours = a.id() + ":" + std::to_string(ao);
  std::promise<bool> a_done;
  al.async_try_lock(ao, 20000ms, [&](std::error_code ec, bool got) { a_done.set_value(!ec && got); });  // W 20 s
  ASSERT_TRUE(eventually([&] {
    auto n = raw()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{" + name + "}:" + ours});
    return queued(name) == 1 && n.elements.size() == 2 && n.elements[1].integer == 1;
  }));
  redisson_peer peer(server().host(), server().port());
  const std::string java = peer.owner(1);
  ASSERT_TRUE(peer.fair_acquire_queueing(name, java, 30000, 60000).is_integer());  // behind ours, W 60 s
  const long long before = score(java);
  ASSERT_GT(before, 0);
  proxy.lose_next_reply();
  ASSERT_TRUE(proxy.wait_for([&] { return proxy.replies_lost() == 1; }, 5000ms));
  // Ours left the queue (the undo) and joined it again, at the tail.
  EXPECT_TRUE(eventually([&] { return members() == std::vector<std::string>{java, ours}; }))
      << "queue: " << raw()({"LRANGE", queue, "0", "-1"}) << ", the Redisson waiter's deadline " << score(java)
      << " (was " << before << ")";
  EXPECT_EQ(score(java), before - 20000) << "the deadline behind moves up by our allowance, 20 s";
  // Done: the Redisson waiter leaves, ours is handed the lock.
  peer.fair_acquire_failed(name, java, 60000);
  h.unlock();
  auto f = a_done.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(f.get());
  std::promise<void> unlocked;
  al.async_unlock(ao, [&](std::error_code) { unlocked.set_value(); });
  unlocked.get_future().wait();
  EXPECT_EQ(raw()({"EXISTS", name, queue, deadlines}).integer, 0);
}

TEST_F(fair_lock_test, the_watchdog_renews_a_fair_lock_and_its_tokens_continue_the_reentrant_sequence) {
  client c(cfg(1500ms));  // renewed every 500 ms
  auto l = c.fair_lock("fair:wd");
  l.lock();
  std::this_thread::sleep_for(2000ms);  // longer than the lease: only renewals keep it
  EXPECT_TRUE(l.valid());
  EXPECT_GT(raw()({"PTTL", "fair:wd"}).integer, 0);
  EXPECT_EQ(l.hold_count(), 1);
  l.unlock();
  // Fencing: the fair lock draws from the same sequence as the reentrant lock of the name.
  auto plain = c.lock("fair:wd");
  auto t1 = plain.lock_and_get_token();
  plain.unlock();
  auto t2 = l.lock_and_get_token();
  EXPECT_GT(t2, t1);
  EXPECT_EQ(l.token(), t2);
  l.unlock();
  EXPECT_EQ(raw()({"EXISTS", "fair:wd"}).integer, 0);
}

// A queue of dead entries is purged a thousand per call, not all in one: the server never stops
// for it (Redisson's loop, which ours was, spent one script on all of them: 0.4 s here). The calls
// are timed against a script that reads the whole queue, on the same list, by the server's clock:
// the acquisition's median call (one call preempted by a loaded machine is not the purge's cost),
// and the release in the best of three trials (slowlog.hpp).
TEST_F(fair_lock_test, two_hundred_thousand_dead_waiters_are_purged_a_thousand_per_call) {
  const std::string queue = "redisson_lock_queue:{fair:dead}";
  std::vector<std::string> push{"RPUSH", queue};
  for (int i = 0; i < 10000; ++i) push.push_back("crashed-" + std::to_string(i) + ":1");
  auto fill = [&] {
    for (int k = 0; k < 20; ++k) raw().command(push);  // 200,000 entries, none with a deadline: dead
  };
  auto whole_queue_us = [&] {  // the least of two reads
    long long least = -1;
    for (int k = 0; k < 2; ++k) {
      slowest_logged_us(raw());
      raw()({"EVAL", "return #redis.call('lrange', KEYS[1], 0, -1)", "1", queue});
      const long long us = slowest_logged_us(raw());
      if (least < 0 || us < least) least = us;
    }
    return least;
  };
  fill();
  log_every_command(raw());
  const long long whole_us = whole_queue_us();
  client c(cfg());
  auto f = c.fair_lock("fair:dead");
  auto t0 = steady::now();
  ASSERT_TRUE(f.try_lock(20000ms));
  auto took = ms_since(t0);
  const auto calls = logged_us(raw());
  EXPECT_LT(took, 10000);
  EXPECT_EQ(raw()({"LLEN", queue}).integer, 0);
  ASSERT_GE(calls.size(), 200u) << "a thousand per call: 200 calls at least";
  const long long median_us = calls[calls.size() / 2];
  EXPECT_LT(median_us * 3, whole_us) << "a call (median " << median_us << " us) read the whole queue ("
                                     << whole_us << " us)";
  // The release purges before it hands off: a thousand too.
  bool first = true;
  const auto release = best_of_three([&] {
    if (!first) {
      EXPECT_TRUE(f.try_lock(20000ms));  // purges what the last release left
      logged_us(raw());
    }
    first = false;
    fill();
    timed_pair t;
    t.reference_us = whole_queue_us();
    f.unlock();
    t.us = slowest_logged_us(raw());
    EXPECT_EQ(raw()({"LLEN", queue}).integer, 199000);
    return t;
  });
  EXPECT_TRUE(release.a_third()) << "the release (" << release.us << " us) read the whole queue ("
                                 << release.reference_us << " us)";
  std::cout << "[          ] purged 200,000 dead waiters and acquired in " << took << " ms\n";
}

// A head whose deadline no waiter makes (+inf, 1e300: someone wrote it) is dead, like one with none:
// before, the purge took it for alive, and nobody got the lock until the entry was removed by hand.
TEST_F(fair_lock_test, a_head_with_a_deadline_no_waiter_makes_is_purged) {
  const std::string queue = "redisson_lock_queue:{fair:inf}", deadlines = "redisson_lock_timeout:{fair:inf}";
  client c(cfg());
  auto f = c.fair_lock("fair:inf");
  for (const char* score : {"+inf", "1e300"}) {
    SCOPED_TRACE(score);
    raw()({"RPUSH", queue, "ghost:1"});
    raw()({"ZADD", deadlines, score, "ghost:1"});
    ASSERT_TRUE(f.try_lock(2000ms));
    EXPECT_EQ(raw()({"LLEN", queue}).integer, 0);
    EXPECT_EQ(raw()({"ZCARD", deadlines}).integer, 0);
    f.unlock();
  }
}

}  // namespace
}  // namespace redlease::test
