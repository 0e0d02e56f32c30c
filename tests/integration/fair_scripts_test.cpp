// SPDX-License-Identifier: MIT
// The fair lock scripts (src/lua/fair_*.lua) against redisson_peer (Redisson's own scripts and wait
// loops, restated from the protocol notes) on one real server. Test names carry the Redisson
// acceptance scenario they follow (redisson-protocol-2.md §1.11).
#include "family_scripts_test_support.hpp"

namespace redlease::test {
namespace {

/// The fair-lock client loop of docs/lock-kinds.md over our scripts: queueing attempt, subscribe to
/// the own channel, attempt again, wait for the message at most the returned bound, cancel on giving
/// up. `attempts` counts the acquire scripts run.
struct fair_waiter_result {
  bool acquired = false;
  int attempts = 0;
};
fair_waiter_result our_fair_lock(const redis_server& s, const std::string& name, const std::string& owner,
                                 long long lease, long long wait) {
  ours o{s.client(), name};
  fair_waiter_result res;
  auto t0 = steady::now();
  ++res.attempts;
  if (o.fair_acquire(owner, lease, wait).is_nil()) return {true, res.attempts};
  auto sub = s.client();
  sub.command({"SUBSCRIBE", o.fair_channel + ":" + owner});
  for (;;) {
    ++res.attempts;
    auto r = o.fair_acquire(owner, lease, wait);
    if (r.is_nil()) return {true, res.attempts};
    long long remaining = wait - ms_since(t0);
    if (remaining <= 0) break;
    long long bound = wait_of(r);
    next_message(sub, bound < 0 ? remaining : std::min(bound, remaining));
  }
  o.fair_cancel(owner, wait);
  return res;
}

TEST_F(family_scripts_test, embedded_digests_match_the_server) {
  for (const auto* sc : {&lua::fair_acquire, &lua::fair_release, &lua::fair_cancel, &lua::rw_read_acquire,
                         &lua::rw_read_release, &lua::rw_write_acquire, &lua::rw_write_release, &lua::rw_renew}) {
    auto r = raw()({"SCRIPT", "LOAD", sc->body});
    EXPECT_EQ(r.str, sc->sha1) << sc->name;
  }
}

// ---- fair lock -------------------------------------------------------------------------------------

TEST_F(family_scripts_test, fair_testLockUnlock_excludes_across_clients) {
  auto o = mine("f1");
  auto j = java();
  auto jo = j.owner(1);
  const std::string me = peer::new_client_id() + ":1";
  ASSERT_TRUE(j.fair_try_lock("f1", jo, 10000, 0));  // Java tryLock()
  auto r = o.fair_acquire(me, 10000, 5000, false);
  ASSERT_TRUE(r.is_integer()) << r;
  EXPECT_GT(r.integer, 0);
  EXPECT_LE(r.integer, 10000);
  EXPECT_EQ(raw()({"EXISTS", o.queue}).integer, 0);  // try-once does not queue
  EXPECT_EQ(j.fair_unlock("f1", jo).integer, 1);
  EXPECT_TRUE(o.fair_acquire(me, 10000, 5000, false).is_nil());
  EXPECT_TRUE(o.fair_acquire(me, 10000, 5000, false).is_nil());  // re-entry
  EXPECT_EQ(raw()({"HGET", "f1", me}).str, "2");
  EXPECT_EQ(j.fair_acquire_try_once("f1", jo, 10000).integer, 1);  // Java is excluded
  EXPECT_TRUE(j.fair_unlock("f1", jo).is_nil());                   // and cannot unlock ours
  EXPECT_EQ(o.fair_release(me, 2).integer, 0);
  EXPECT_EQ(o.fair_release(me, 1).integer, 1);
  EXPECT_EQ(raw()({"EXISTS", "f1"}).integer, 0);
  EXPECT_TRUE(o.fair_release(me).is_nil());  // Redisson's unlock says 1 here (hazard 7)
  EXPECT_TRUE(j.fair_try_lock("f1", jo, 10000, 0));
}

TEST_F(family_scripts_test, fair_testConcurrency_MultiInstance_Ordering_alternating_clients) {
  auto o = mine("f2");
  const std::string holder = peer::new_client_id() + ":0";
  ASSERT_TRUE(o.fair_acquire(holder, 30000, 10000).is_nil());
  const std::string java_id = peer::new_client_id(), our_id = peer::new_client_id();
  std::mutex mu;
  std::vector<std::string> order;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  const std::vector<std::string> labels{"java1", "ours1", "java2", "ours2", "java3"};
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const bool is_java = labels[i].starts_with("java");
    const std::string owner = (is_java ? java_id : our_id) + ":" + str(static_cast<long long>(i + 1));
    ts.emplace_back([&, is_java, owner, label = labels[i]] {
      bool got;
      if (is_java) {
        auto j = java(java_id);
        got = j.fair_try_lock("f2", owner, 10000, 10000);
        if (got) {
          std::lock_guard<std::mutex> g(mu);
          order.push_back(label);
        }
        if (got) j.fair_unlock("f2", owner);
      } else {
        got = our_fair_lock(server(), "f2", owner, 10000, 10000).acquired;
        if (got) {
          {
            std::lock_guard<std::mutex> g(mu);
            order.push_back(label);
          }
          mine("f2").fair_release(owner);
        }
      }
      if (!got) ++failures;
    });
    // The next waiter starts only once this one is queued: arrival order is queue order.
    ASSERT_TRUE(eventually([&] { return raw()({"LLEN", o.queue}).integer == static_cast<long long>(i + 1); }));
  }
  auto t0 = steady::now();
  EXPECT_EQ(o.fair_release(holder).integer, 1);
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(order, labels);
  EXPECT_LT(ms_since(t0), 5000);  // hand-offs by message, not by the 10 s lease
  EXPECT_EQ(raw()({"EXISTS", "f2", o.queue, o.deadlines}).integer, 0);
}

TEST_F(family_scripts_test, fair_testAbandonedTimeoutDrift_dead_waiters_purged_by_the_next_acquire) {
  for (bool java_purges : {false, true}) {
    const std::string name = java_purges ? "f3j" : "f3";
    auto o = mine(name);
    auto j = java();
    const std::string holder = peer::new_client_id() + ":0";
    ASSERT_TRUE(o.fair_acquire(holder, 300, 100).is_nil());
    // Two waiters queue once each (allowance 100 ms) and never call again: dead.
    const std::string dead_java = j.owner(7), dead_ours = peer::new_client_id() + ":8";
    EXPECT_TRUE(j.fair_acquire_queueing(name, dead_java, 300, 100).is_integer());
    EXPECT_TRUE(waits_behind(o.fair_acquire(dead_ours, 300, 100)));
    ASSERT_EQ(raw()({"LLEN", o.queue}).integer, 2);
    long long last = score(o.deadlines, dead_ours);
    ASSERT_GT(last, 0);
    ASSERT_TRUE(eventually([&] { return peer::now_ms() > last && raw()({"EXISTS", name}).integer == 0; }));
    const std::string live = peer::new_client_id() + ":9";
    if (java_purges) {
      EXPECT_TRUE(j.fair_acquire_queueing(name, live, 1000, 5000).is_nil());
    } else {
      EXPECT_TRUE(o.fair_acquire(live, 1000, 5000).is_nil());
    }
    EXPECT_EQ(raw()({"EXISTS", o.queue, o.deadlines}).integer, 0) << name;
  }
}

TEST_F(family_scripts_test, fair_handoff_only_to_the_head_channel) {
  auto o = mine("f4");
  auto j = java();
  const std::string holder = peer::new_client_id() + ":0";
  const std::string w1 = j.owner(1), w2 = peer::new_client_id() + ":2", w3 = j.owner(3);
  ASSERT_TRUE(o.fair_acquire(holder, 30000, 30000).is_nil());
  ASSERT_TRUE(j.fair_acquire_queueing("f4", w1, 30000, 30000).is_integer());
  ASSERT_TRUE(waits_behind(o.fair_acquire(w2, 30000, 30000)));
  ASSERT_TRUE(j.fair_acquire_queueing("f4", w3, 30000, 30000).is_integer());
  const std::string c = o.fair_channel;
  auto rec = record({c, c + ":" + w1, c + ":" + w2, c + ":" + w3});

  EXPECT_EQ(o.fair_release(holder).integer, 1);  // ours hands off to the Java head only
  EXPECT_EQ(rec.drain(), (std::vector<message>{{c + ":" + w1, "0"}}));
  EXPECT_TRUE(j.fair_acquire_queueing("f4", w1, 30000, 30000).is_nil());
  EXPECT_EQ(j.fair_unlock("f4", w1).integer, 1);  // Java hands off to our waiter only
  EXPECT_EQ(rec.drain(), (std::vector<message>{{c + ":" + w2, "0"}}));
  EXPECT_TRUE(o.fair_acquire(w2, 30000, 30000).is_nil());
  EXPECT_EQ(o.fair_release(w2).integer, 1);
  EXPECT_EQ(rec.drain(), (std::vector<message>{{c + ":" + w3, "0"}}));
  EXPECT_TRUE(j.fair_acquire_queueing("f4", w3, 30000, 30000).is_nil());
  EXPECT_EQ(j.fair_unlock("f4", w3).integer, 1);
  EXPECT_TRUE(rec.drain().empty());  // nobody queued: no message at all
}

TEST_F(family_scripts_test, fair_no_tight_retry_when_the_lock_is_free_behind_another_head) {
  auto o = mine("f5");
  auto j = java();
  const std::string holder = peer::new_client_id() + ":0";
  const std::string head = j.owner(1), ours_waiter = peer::new_client_id() + ":2", java_waiter = j.owner(3);
  ASSERT_TRUE(o.fair_acquire(holder, 30000, 5000).is_nil());
  ASSERT_TRUE(j.fair_acquire_queueing("f5", head, 30000, 5000).is_integer());
  ASSERT_TRUE(waits_behind(o.fair_acquire(ours_waiter, 30000, 5000)));
  ASSERT_TRUE(j.fair_acquire_queueing("f5", java_waiter, 30000, 5000).is_integer());
  ASSERT_EQ(o.fair_release(holder).integer, 1);  // free; the head has not claimed it yet
  // Redisson answers 0 here and Java retries at once (bug 2).
  EXPECT_EQ(j.fair_acquire_queueing("f5", java_waiter, 30000, 5000).integer, 0);
  // Ours: the head's remaining deadline (about 30 s + 5 s).
  auto r = o.fair_acquire(ours_waiter, 30000, 5000);
  ASSERT_TRUE(waits_behind(r)) << r;
  EXPECT_GT(wait_of(r), 30000);
  EXPECT_LE(wait_of(r), 35000);
  // A 300 ms wait driven by the bound runs the script a few times, not in a loop.
  auto t0 = steady::now();
  auto res = our_fair_lock(server(), "f5", ours_waiter, 30000, 300);
  EXPECT_FALSE(res.acquired);
  EXPECT_LE(res.attempts, 3);
  EXPECT_GE(ms_since(t0), 300);
  EXPECT_EQ(score(o.deadlines, ours_waiter), -1);  // gave up: out of the queue
}

TEST_F(family_scripts_test, fair_testAcquireFailedTimeoutDrift_Descrete_cancel_with_own_allowance) {
  auto o = mine("f6");
  auto j = java();
  const std::string holder = peer::new_client_id() + ":0";
  const std::string w1 = peer::new_client_id() + ":1", w2 = j.owner(2), w3 = peer::new_client_id() + ":3",
                    w4 = j.owner(4);
  const long long t0 = peer::now_ms();
  ASSERT_TRUE(o.fair_acquire(holder, 30000, 5000).is_nil());
  auto r1 = o.fair_acquire(w1, 30000, 5000);
  auto r2 = j.fair_acquire_queueing("f6", w2, 30000, 5000);
  auto r3 = o.fair_acquire(w3, 30000, 5000);
  auto r4 = j.fair_acquire_queueing("f6", w4, 30000, 5000);
  // Redisson's replies: ttl 30/35 s; ours: the lock's PTTL for everyone, as an integer to the head
  // and as {PTTL} to a waiter behind it.
  EXPECT_NEAR(r2.integer, 35000, 1000);
  EXPECT_NEAR(r4.integer, 45000, 1000);
  ASSERT_TRUE(waits_at_head(r1)) << r1;
  EXPECT_NEAR(r1.integer, 30000, 1000);
  ASSERT_TRUE(waits_behind(r3)) << r3;
  EXPECT_NEAR(wait_of(r3), 30000, 1000);
  // The deadlines follow Redisson's arithmetic whoever wrote them: lease + k * W.
  const std::vector<std::string> ws{w1, w2, w3, w4};
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(score(o.deadlines, ws[k]) - t0, 30000 + 5000 * (k + 1), 1000) << k;
  auto before = scores(o.deadlines);
  EXPECT_EQ(o.fair_cancel(w2, 5000).integer, 1);
  EXPECT_EQ(score(o.deadlines, w2), -1);
  EXPECT_EQ(raw()({"LPOS", o.queue, w2}).is_nil(), true);
  EXPECT_EQ(score(o.deadlines, w1), before[0].second);
  EXPECT_EQ(score(o.deadlines, w3), before[2].second - 5000);
  EXPECT_EQ(score(o.deadlines, w4), before[3].second - 5000);
  EXPECT_EQ(o.fair_cancel(w2, 5000).integer, 0);  // twice: nothing more
  EXPECT_EQ(score(o.deadlines, w4), before[3].second - 5000);
  EXPECT_EQ(o.fair_release(holder).integer, 1);
  EXPECT_TRUE(o.fair_acquire(w1, 30000, 5000).is_nil());  // waiter 1 at once
  EXPECT_EQ(score(o.deadlines, w3), before[2].second - 10000);
  EXPECT_NEAR(j.fair_acquire_queueing("f6", w4, 30000, 5000).integer, 30000, 1000);

  // A head that gives up while the lock is free passes the wake-up to the next waiter.
  EXPECT_EQ(o.fair_release(w1).integer, 1);  // w3 is woken; it gives up instead
  const std::string c = o.fair_channel;
  auto rec = record({c + ":" + w3, c + ":" + w4});
  EXPECT_EQ(o.fair_cancel(w3, 5000).integer, 1);
  EXPECT_EQ(rec.drain(), (std::vector<message>{{c + ":" + w4, "0"}}));
  // Redisson's acquireFailed does not: the new head would wait for its timer.
  j.fair_acquire_failed("f6", w4, 5000);
  EXPECT_TRUE(rec.drain().empty());
  EXPECT_EQ(raw()({"EXISTS", o.queue, o.deadlines}).integer, 0);
}

// A grant from the queue moves every other deadline up in ZADD calls of at most 256 waiters: a queue
// longer than that moves them all, and by the same arithmetic.
TEST_F(family_scripts_test, fair_a_grant_moves_every_deadline_of_a_long_queue) {
  ours o{server().client(), "f-long"};
  const std::string holder = peer::new_client_id() + ":0";
  ASSERT_TRUE(o.fair_acquire(holder, 30000, 5000).is_nil());
  std::vector<std::string> ws;
  for (int k = 0; k < 600; ++k) {
    ws.push_back(peer::new_client_id() + ":" + str(k));
    auto r = o.fair_acquire(ws.back(), 30000, 5000);
    ASSERT_TRUE(k == 0 ? waits_at_head(r) : waits_behind(r)) << k << ": " << r;
  }
  auto before = scores(o.deadlines);
  ASSERT_EQ(before.size(), ws.size());
  EXPECT_EQ(o.fair_release(holder).integer, 1);
  ASSERT_TRUE(o.fair_acquire(ws[0], 30000, 5000).is_nil());
  auto after = scores(o.deadlines);
  ASSERT_EQ(after.size(), ws.size() - 1);
  for (std::size_t i = 0; i < after.size(); ++i) {
    // Sorted by deadline both times: waiter i + 1 before, i after, each 5 s sooner (none below
    // now + lease: every deadline is at least 35 s out).
    EXPECT_EQ(after[i].first, before[i + 1].first) << i;
    EXPECT_EQ(after[i].second, before[i + 1].second - 5000) << i;
  }
}

// A waiter that gives up reads only the waiters behind it (LPOS finds it): one at the tail of a
// queue of a million entries copies nothing into Lua (the whole queue was read before: about 0.2 s of
// a busy server here). Without LPOS (a server before 6.0.6, or an ACL user refused it) the script
// reads the queue as before, with the same outcome.
TEST_F(family_scripts_test, fair_a_waiter_that_gives_up_reads_only_the_waiters_behind_it) {
  ours o{server().client(), "f-cancel"};
  const std::string holder = peer::new_client_id() + ":0";
  ASSERT_TRUE(o.fair_acquire(holder, 30000, 5000).is_nil());
  std::vector<std::string> ws;
  for (int k = 0; k < 5; ++k) {
    ws.push_back(peer::new_client_id() + ":" + str(k + 1));
    o.fair_acquire(ws.back(), 30000, 5000);
  }
  for (bool lpos : {true, false}) {
    SCOPED_TRACE(lpos ? "LPOS" : "without LPOS");
    if (!lpos) {
      raw()({"ACL", "SETUSER", "default", "-lpos"});
      ASSERT_TRUE(raw()({"LPOS", o.queue, ws[0]}).is_error());
    }
    // Waiter 2, then waiter 4 (with LPOS refused): those in front keep their deadlines, those
    // behind move up by the allowance.
    const std::size_t gone = lpos ? 1 : 3;
    std::vector<long long> before;
    for (auto& w : ws) before.push_back(score(o.deadlines, w));
    EXPECT_EQ(o.fair_cancel(ws[gone], 5000).integer, 1);
    for (std::size_t k = 0; k < ws.size(); ++k) {
      if (k == gone) EXPECT_EQ(score(o.deadlines, ws[k]), -1);
      else if (before[k] == -1) continue;
      else EXPECT_EQ(score(o.deadlines, ws[k]), before[k] - (k > gone ? 5000 : 0)) << k;
    }
    EXPECT_EQ(o.fair_cancel(ws[gone], 5000).integer, 0);
    if (!lpos) raw()({"ACL", "SETUSER", "default", "+lpos"});
  }
  auto left = raw()({"LRANGE", o.queue, "0", "-1"});
  ASSERT_EQ(left.elements.size(), 3u);
  EXPECT_EQ(left.elements[0].str, ws[0]);
  EXPECT_EQ(left.elements[1].str, ws[2]);
  EXPECT_EQ(left.elements[2].str, ws[4]);

  // A million entries in front (dead: none has a deadline), the caller at the tail.
  std::vector<std::string> push{"LPUSH", o.queue};
  for (int i = 0; i < 10000; ++i) push.push_back("crashed-" + str(i) + ":1");
  for (int k = 0; k < 100; ++k) raw().command(push);
  // Against a fixed bound (100 ms) this failed once on a starved VM under TSan: the server's own
  // time scales with the machine. So the cancel is compared with what Redisson's acquireFailed does,
  // reading the whole queue into the script, on the same list in the same minute: 27-40 ms against
  // 320-350 ms on an idle VM.
  // The best of three trials (slowlog.hpp): between them the waiter queues again at the tail.
  log_every_command(raw());
  const long long deadline = score(o.deadlines, ws[4]);
  bool first = true;
  const auto cancel = best_of_three([&] {
    if (!first) {
      raw()({"RPUSH", o.queue, ws[4]});
      raw()({"ZADD", o.deadlines, str(deadline), ws[4]});
      slowest_logged_us(raw());
    }
    first = false;
    timed_pair t;
    EXPECT_EQ(o.fair_cancel(ws[4], 5000).integer, 1);
    t.us = slowest_logged_us(raw());
    raw()({"EVAL", "local q = redis.call('lrange', KEYS[1], 0, -1) for i, v in ipairs(q) do "
                   "if v == ARGV[1] then return i end end return 0", "1", o.queue, ws[4]});
    t.reference_us = slowest_logged_us(raw());
    return t;
  });
  EXPECT_TRUE(cancel.a_third()) << "the cancel (" << cancel.us << " us) read the queue as Redisson does ("
                                << cancel.reference_us << " us)";
  EXPECT_EQ(raw()({"LLEN", o.queue}).integer, 1000002);
  raw()({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});
  raw()({"DEL", o.queue});
}

TEST_F(family_scripts_test, fair_testLockAcquiredBooleanTimeoutDrift_an_acquirer_with_another_allowance_kills_no_one) {
  // A waiter queued by tryLock(1 s) that later takes the lock with tryLock() (mode A, W = 300 s):
  // Redisson takes 300 s off every other deadline, so the live waiter behind it is dead at once
  // (bug 3); ours stops at now + lease and never raises a deadline.
  for (bool java_acquires : {false, true}) {
    const std::string name = java_acquires ? "f10j" : "f10";
    auto o = mine(name);
    auto j = java();
    const std::string holder = peer::new_client_id() + ":0", a = j.owner(1), b = peer::new_client_id() + ":2";
    ASSERT_TRUE(o.fair_acquire(holder, 30000, 1000).is_nil());
    ASSERT_TRUE(waits_at_head(o.fair_acquire(a, 30000, 1000)));
    ASSERT_TRUE(waits_behind(o.fair_acquire(b, 30000, 1000)));
    const long long before = score(o.deadlines, b);
    ASSERT_EQ(o.fair_release(holder).integer, 1);
    if (java_acquires) {
      ASSERT_TRUE(j.fair_acquire_try_once(name, a, 30000).is_nil());
      EXPECT_LT(score(o.deadlines, b), peer::now_ms()) << "Redisson's shift";
    } else {
      ASSERT_TRUE(o.fair_acquire(a, 30000, peer::fair_lock_wait_timeout, false).is_nil());
      const long long after = score(o.deadlines, b);
      EXPECT_GE(after, peer::now_ms() + 29000);
      EXPECT_LE(after, before);
    }
  }
}

TEST_F(family_scripts_test, fair_a_waiter_that_calls_again_keeps_its_place) {
  // Clocks are the clients' (ARGV now): a later "now" stands for a holder that kept the lock long.
  auto o = mine("f11");
  const std::string holder = peer::new_client_id() + ":0", a = peer::new_client_id() + ":1",
                    b = peer::new_client_id() + ":2";
  ASSERT_TRUE(o.fair_acquire(holder, 30000, 1000).is_nil());
  ASSERT_TRUE(waits_at_head(o.fair_acquire(a, 30000, 1000)));
  ASSERT_TRUE(waits_behind(o.fair_acquire(b, 30000, 1000)));
  const long long later = score(o.deadlines, b) + 1;  // both deadlines have passed
  // A calls again: its own call does not purge it, and its deadline moves to later + W.
  EXPECT_TRUE(waits_at_head(o.fair_acquire(a, 30000, 1000, true, later)));
  EXPECT_EQ(score(o.deadlines, a), later + 1000);
  // B's call at the same time finds A alive; B itself is not purged by its own call either.
  EXPECT_TRUE(waits_behind(o.fair_acquire(b, 30000, 1000, true, later)));
  auto q = raw()({"LRANGE", o.queue, "0", "-1"});
  ASSERT_EQ(q.elements.size(), 2u);
  EXPECT_EQ(q.elements[0].str, a);
  EXPECT_EQ(q.elements[1].str, b);
  // A waiter that stopped calling is purged by the others: B, after A's refreshed deadline.
  // B is now the head, and hears so.
  EXPECT_TRUE(waits_at_head(o.fair_acquire(b, 30000, 1000, true, later + 1001)));
  q = raw()({"LRANGE", o.queue, "0", "-1"});
  ASSERT_EQ(q.elements.size(), 1u);
  EXPECT_EQ(q.elements[0].str, b);
}

// A waiter that gives up takes its allowance W off the deadlines behind it, but not below now + W,
// and never adds to one. Our waiters move their own deadline up to now + W on each call, so a
// follower that had just called lost all of it: its deadline became the time of its last call, the
// next call by anyone purged it, and it queued again at the tail.
TEST_F(family_scripts_test, fair_a_waiter_that_gives_up_does_not_cut_a_live_follower_below_now) {
  auto o = mine("f-floor");
  const long long t = peer::now_ms();
  const std::string holder = peer::new_client_id() + ":0";
  ASSERT_TRUE(o.fair_acquire(holder, 30000, 30000, true, t).is_nil());
  std::vector<std::string> ws;
  for (int k = 0; k < 5; ++k) {
    ws.push_back(peer::new_client_id() + ":" + str(k + 1));
    ASSERT_FALSE(o.fair_acquire(ws.back(), 30000, 30000, true, t).is_nil());
  }
  // The leaver, and those behind it as their own calls left them: B and C called at t (W 30 s),
  // D at t - 20 s, E far behind (Redisson's chain).
  const std::vector<long long> set{t + 30000, t + 30000, t + 45000, t + 10000, t + 200000};
  for (std::size_t k = 0; k < ws.size(); ++k) raw()({"ZADD", o.deadlines, str(set[k]), ws[k]});
  EXPECT_EQ(o.fair_cancel(ws[0], 30000, t).integer, 1);
  EXPECT_EQ(score(o.deadlines, ws[0]), -1);
  EXPECT_EQ(score(o.deadlines, ws[1]), t + 30000) << "cut to the time of its last call";
  EXPECT_EQ(score(o.deadlines, ws[2]), t + 30000) << "old - W is below now + W: now + W";
  EXPECT_EQ(score(o.deadlines, ws[3]), t + 10000) << "within now + W: left as it is";
  EXPECT_EQ(score(o.deadlines, ws[4]), t + 170000) << "far behind: W off, as Redisson";
  // A newcomer's call half a second later purges nobody: B is still the head.
  auto newcomer = peer::new_client_id() + ":9";
  EXPECT_TRUE(waits_behind(o.fair_acquire(newcomer, 30000, 30000, true, t + 500)));
  auto q = raw()({"LRANGE", o.queue, "0", "-1"});
  ASSERT_EQ(q.elements.size(), 5u) << q;
  EXPECT_EQ(q.elements[0].str, ws[1]);
  EXPECT_EQ(q.elements[4].str, newcomer);
  // A waiter queued without a deadline gets one in the past, as Redisson's ZINCRBY gives it.
  raw()({"ZREM", o.deadlines, ws[4]});
  EXPECT_EQ(o.fair_cancel(ws[3], 30000, t + 500).integer, 1);
  EXPECT_EQ(score(o.deadlines, ws[4]), -30000);
  // More than one batch of 256 behind the leaver: every deadline moves, by the same rule; also
  // without ZMSCORE (a server before 6.2, or an ACL user refused it), one ZSCORE each.
  for (bool zmscore : {true, false}) {
    SCOPED_TRACE(zmscore ? "ZMSCORE" : "without ZMSCORE");
    if (!zmscore) {
      raw()({"ACL", "SETUSER", "default", "-zmscore"});
      ASSERT_TRUE(raw()({"ZMSCORE", o.deadlines, "x"}).is_error());
    }
    raw()({"DEL", o.queue, o.deadlines});
    std::vector<std::string> many;
    std::vector<std::string> rpush{"RPUSH", o.queue}, zadd{"ZADD", o.deadlines};
    for (int k = 0; k < 600; ++k) {
      many.push_back(peer::new_client_id() + ":" + str(k));
      rpush.push_back(many.back());
      zadd.push_back(str(k % 2 == 0 ? t + 100000 + k : t + 40000));
      zadd.push_back(many.back());
    }
    raw().command(rpush);
    raw().command(zadd);
    EXPECT_EQ(o.fair_cancel(many[0], 30000, t).integer, 1);
    for (int k = 1; k < 600; ++k) {
      EXPECT_EQ(score(o.deadlines, many[static_cast<std::size_t>(k)]), k % 2 == 0 ? t + 70000 + k : t + 30000) << k;
    }
    if (!zmscore) raw()({"ACL", "SETUSER", "default", "+zmscore"});
  }
  raw()({"DEL", o.queue, o.deadlines});
  EXPECT_EQ(o.fair_release(holder).integer, 1);
}

// A try-once call (enqueue "0", W 300000) by an owner whose earlier give-up was lost finds its old
// entry: it leaves its deadline as it is. It moved it to now + 300 s, and once that entry reached
// the head it blocked everyone behind it for five minutes.
TEST_F(family_scripts_test, fair_a_try_once_call_does_not_rearm_a_leftover_entry) {
  auto o = mine("f-once");
  const std::string holder = peer::new_client_id() + ":0", stale = peer::new_client_id() + ":1";
  const long long t = peer::now_ms();
  ASSERT_TRUE(o.fair_acquire(holder, 30000, 30000, true, t).is_nil());
  ASSERT_TRUE(waits_at_head(o.fair_acquire(stale, 30000, 1000, true, t)));  // queued; its give-up is lost
  const long long before = score(o.deadlines, stale);
  ASSERT_GT(before, t);
  auto r = o.fair_acquire(stale, 30000, peer::fair_lock_wait_timeout, false, t + 5000);  // try_lock(0)
  ASSERT_TRUE(r.is_integer()) << r;
  EXPECT_EQ(score(o.deadlines, stale), before) << "re-armed to now + 300 s";
  // A call that queues still moves its own deadline up.
  EXPECT_TRUE(waits_at_head(o.fair_acquire(stale, 30000, 1000, true, before)));
  EXPECT_EQ(score(o.deadlines, stale), before + 1000);
  EXPECT_EQ(o.fair_cancel(stale, 1000).integer, 1);
  EXPECT_EQ(o.fair_release(holder).integer, 1);
}

// Redisson's Q and Z never expire (its hazard 8): a waiter killed in the queue of a name nobody uses
// again left both keys for ever. Ours queue with a TTL past the latest deadline in Z, Java's
// included, by 5 to 10 minutes; an immortal pair that a Java waiter made gets one at our next call.
TEST_F(family_scripts_test, fair_queue_keys_outlive_the_latest_deadline_and_then_expire) {
  constexpr long long five_min = 300'000, ten_min = 600'000;
  auto o = mine("f-ttl");
  auto j = java();
  const std::string holder = peer::new_client_id() + ":0", a = peer::new_client_id() + ":1";
  const long long t = peer::now_ms();
  ASSERT_TRUE(o.fair_acquire(holder, 30000, 1000, true, t).is_nil());
  EXPECT_EQ(raw()({"EXISTS", o.queue, o.deadlines}).integer, 0) << "a grant to a free lock queues nobody";
  // The TTL is relative to the caller's clock (ARGV now), as the deadlines are.
  auto ttl_left = [&](const std::string& key, long long latest) { return raw()({"PTTL", key}).integer - (latest - t); };
  ASSERT_TRUE(waits_at_head(o.fair_acquire(a, 30000, 1000, true, t)));  // killed here: it never calls again
  long long latest = score(o.deadlines, a);
  for (const auto& k : {o.queue, o.deadlines}) {
    EXPECT_GT(ttl_left(k, latest), ten_min - 5000) << k;
    EXPECT_LE(ttl_left(k, latest), ten_min) << k;
  }
  // A Java waiter queues behind it (allowance 5 min): Redisson's script sets no TTL, but the one
  // there already outlasts its deadline.
  const std::string jw = j.owner(5);
  ASSERT_TRUE(j.fair_acquire_queueing("f-ttl", jw, 30000, peer::fair_lock_wait_timeout).is_integer());
  latest = score(o.deadlines, jw);
  ASSERT_GT(latest, score(o.deadlines, a));
  EXPECT_GT(raw()({"PTTL", o.deadlines}).integer, latest - peer::now_ms()) << "the Java waiter outlives the key";
  // Our waiter calls again to keep its place: the TTL now counts from the Java deadline, the latest.
  // The keys had 5 minutes past it less the time since our first call, so this call re-arms them or
  // (in the same server millisecond) finds them long enough; either way they had 5 minutes at the
  // call, and the PTTL read here has lost the milliseconds since (one more for rounding).
  auto before = steady::now();
  ASSERT_TRUE(waits_at_head(o.fair_acquire(a, 30000, 1000, true, t)));
  for (const auto& k : {o.queue, o.deadlines}) {
    const long long left = ttl_left(k, latest);
    EXPECT_GE(left, five_min - ms_since(before) - 1) << k;
    EXPECT_LE(left, ten_min) << k;
  }
  // Less than 5 minutes past the latest deadline (time passing: here a shorter PEXPIRE) is re-armed
  // to 10 by the next call.
  for (const auto& k : {o.queue, o.deadlines}) raw()({"PEXPIRE", k, str(latest - t + five_min - 1000)});
  ASSERT_TRUE(waits_at_head(o.fair_acquire(a, 30000, 1000, true, t)));
  for (const auto& k : {o.queue, o.deadlines}) {
    EXPECT_GT(ttl_left(k, latest), ten_min - 5000) << k;
    EXPECT_LE(ttl_left(k, latest), ten_min) << k;
  }
  // Immortal keys that Java waiters made alone get a TTL at our first queueing call.
  auto o2 = mine("f-ttl-java");
  ASSERT_TRUE(o2.fair_acquire(holder, 30000, 1000, true, t).is_nil());
  ASSERT_TRUE(j.fair_acquire_queueing("f-ttl-java", j.owner(6), 30000, peer::fair_lock_wait_timeout).is_integer());
  ASSERT_EQ(raw()({"PTTL", o2.deadlines}).integer, -1) << "Redisson's layout: no TTL";
  ASSERT_TRUE(waits_behind(o2.fair_acquire(a, 30000, 1000, true, t)));
  latest = score(o2.deadlines, a);
  for (const auto& k : {o2.queue, o2.deadlines}) {
    EXPECT_GT(ttl_left(k, latest), ten_min - 5000) << k;
    EXPECT_LE(ttl_left(k, latest), ten_min) << k;
  }
  // The TTL runs out with nobody calling: both keys go (here after 200 ms, not 10 minutes).
  raw()({"PEXPIRE", o2.queue, "200"});
  raw()({"PEXPIRE", o2.deadlines, "200"});
  EXPECT_TRUE(eventually([&] { return raw()({"EXISTS", o2.queue, o2.deadlines}).integer == 0; }));
  // A deadline nobody makes (the purge's 10^13 ms rule) sets no TTL of 300 years.
  auto o3 = mine("f-ttl-absurd");
  ASSERT_TRUE(o3.fair_acquire(holder, 30000, 1000, true, t).is_nil());
  raw()({"ZADD", o3.deadlines, "1e300", "nobody"});
  ASSERT_TRUE(waits_at_head(o3.fair_acquire(a, 30000, 1000, true, t)));
  EXPECT_EQ(raw()({"PTTL", o3.deadlines}).integer, -1);
}

TEST_F(family_scripts_test, fair_testTryLockNonDelayed_try_once_leaves_the_queue_clean) {
  auto o = mine("f7");
  auto j = java();
  const std::string a = peer::new_client_id() + ":1", b = peer::new_client_id() + ":2";
  EXPECT_TRUE(o.fair_acquire(a, 1000, 0, false).is_nil());
  auto r = o.fair_acquire(b, 1000, 200, false);
  ASSERT_TRUE(r.is_integer());
  EXPECT_GT(r.integer, 0);
  EXPECT_EQ(j.fair_acquire_try_once("f7", j.owner(1), 1000).integer, 1);
  EXPECT_EQ(raw()({"EXISTS", o.queue, o.deadlines}).integer, 0);
  EXPECT_FALSE(our_fair_lock(server(), "f7", b, 1000, 200).acquired);  // queued, then cancelled
  EXPECT_EQ(raw()({"EXISTS", o.queue, o.deadlines}).integer, 0);
  EXPECT_EQ(o.fair_release(a).integer, 1);
  EXPECT_TRUE(o.fair_acquire(b, 1000, 0, false).is_nil());
  EXPECT_EQ(raw()({"EXISTS", o.queue, o.deadlines}).integer, 0);
}

TEST_F(family_scripts_test, fair_waiters_are_woken_across_clients) {
  // A Java tryLock waiting on its channel gets our release long before the 30 s lease.
  {
    auto o = mine("f8");
    const std::string holder = peer::new_client_id() + ":0";
    ASSERT_TRUE(o.fair_acquire(holder, 30000, 30000).is_nil());
    auto j = java();
    const std::string w = j.owner(1);
    std::atomic<bool> got{false};
    std::thread t([&] {
      auto jt = java(j.client_id());
      got = jt.fair_try_lock("f8", w, 5000, 10000);
    });
    ASSERT_TRUE(eventually([&] { return subscribers(o.fair_channel + ":" + w) == 1; }));
    auto t0 = steady::now();
    EXPECT_EQ(o.fair_release(holder).integer, 1);
    t.join();
    EXPECT_TRUE(got.load());
    EXPECT_LT(ms_since(t0), 2000);
    EXPECT_EQ(raw()({"HGET", "f8", w}).str, "1");
  }
  // Our waiter gets a Java unlock the same way.
  {
    auto o = mine("f8b");
    auto j = java();
    const std::string holder = j.owner(1), w = peer::new_client_id() + ":5";
    ASSERT_TRUE(j.fair_try_lock("f8b", holder, 30000, 0));
    std::atomic<bool> got{false};
    std::thread t([&] { got = our_fair_lock(server(), "f8b", w, 5000, 10000).acquired; });
    ASSERT_TRUE(eventually([&] { return subscribers(o.fair_channel + ":" + w) == 1; }));
    auto t0 = steady::now();
    EXPECT_EQ(j.fair_unlock("f8b", holder).integer, 1);
    t.join();
    EXPECT_TRUE(got.load());
    EXPECT_LT(ms_since(t0), 2000);
  }
}

TEST_F(family_scripts_test, fair_release_latch_replays_a_retried_release) {
  auto o = mine("f9");
  const std::string me = peer::new_client_id() + ":1";
  ASSERT_TRUE(o.fair_acquire(me, 30000, 5000).is_nil());
  ASSERT_TRUE(o.fair_acquire(me, 30000, 5000).is_nil());
  EXPECT_EQ(o.fair_release(me, 2).integer, 0);  // the first attempt ran; its reply was "lost"
  const std::string latch = o.latch();
  EXPECT_EQ(o.fair_release(me, 2, true, latch).integer, 0);  // the retry takes nothing more
  EXPECT_EQ(raw()({"HGET", "f9", me}).str, "1");
  EXPECT_EQ(raw()({"GET", latch}).str, "0");
  EXPECT_EQ(o.fair_release(me, 2, true, latch).integer, 0);  // a late duplicate finds the latch
  EXPECT_EQ(raw()({"HGET", "f9", me}).str, "1");
  EXPECT_EQ(o.fair_release(me, 1).integer, 1);
  EXPECT_EQ(raw()({"EXISTS", "f9"}).integer, 0);
}

}  // namespace
}  // namespace redlease::test
