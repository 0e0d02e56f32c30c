// SPDX-License-Identifier: MIT
// The reentrant lock against a real redis-server: exclusion, reentrancy, watchdog, lost-lock
// notification, waiting, errors.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "fault_proxy.hpp"
#include <asio/use_future.hpp>

#include "lock/lock_service.hpp"
#include "lock_test_support.hpp"
#include "redlease_lua.hpp"

extern char** environ;

namespace redlease::test {
namespace {

class lock_test : public lock_fixture {};

std::string field(const client& c, owner_id o) { return c.id() + ":" + std::to_string(o); }

TEST_F(lock_test, acquire_uses_redisson_layout) {
  client c{cfg()};
  auto l = c.lock("orders:42");
  l.lock();
  auto type = raw()({"TYPE", "orders:42"});
  EXPECT_EQ(type.str, "hash");
  auto v = raw()({"HGET", "orders:42", field(c, this_thread_owner())});
  EXPECT_EQ(v.str, "1");
  auto ttl = raw()({"PTTL", "orders:42"});
  EXPECT_GT(ttl.integer, 29000);
  EXPECT_LE(ttl.integer, 30000);
  EXPECT_TRUE(l.is_locked());
  EXPECT_TRUE(l.is_held_by_current_thread());
  EXPECT_TRUE(l.valid());
  l.unlock();
  EXPECT_EQ(raw()({"EXISTS", "orders:42"}).integer, 0);
  EXPECT_FALSE(l.is_locked());
  EXPECT_FALSE(l.valid());
}

TEST_F(lock_test, reentrancy_to_depth_ten_counts_holds) {
  client c{cfg()};
  auto l = c.lock("reentrant");
  for (int i = 1; i <= 10; ++i) {
    l.lock();
    EXPECT_EQ(l.hold_count(), i);
  }
  EXPECT_EQ(raw()({"HGET", "reentrant", field(c, this_thread_owner())}).str, "10");
  for (int i = 9; i >= 0; --i) {
    l.unlock();
    EXPECT_EQ(l.hold_count(), i);
    EXPECT_EQ(raw()({"EXISTS", "reentrant"}).integer, i > 0 ? 1 : 0);
  }
  std::error_code ec;
  l.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
}

TEST_F(lock_test, other_owner_is_excluded_and_std_lockables_work) {
  client c{cfg()};
  auto l = c.lock("excl");
  {
    std::lock_guard g(l);
    std::thread other([&] {
      EXPECT_FALSE(l.try_lock());
      EXPECT_FALSE(l.is_held_by_current_thread());
      std::error_code ec;
      l.unlock(ec);
      EXPECT_EQ(ec, errc::not_owner);
    });
    other.join();
  }
  {
    std::unique_lock u(l, std::defer_lock);
    EXPECT_TRUE(u.try_lock_for(100ms));
    EXPECT_TRUE(u.owns_lock());
  }
  auto m = c.mutex("excl-m");
  {
    std::scoped_lock both(l, m);
    EXPECT_TRUE(l.is_held_by_current_thread());
    EXPECT_TRUE(m.is_held_by_current_thread());
  }
  EXPECT_FALSE(l.is_locked());
  EXPECT_FALSE(m.is_locked());
  EXPECT_TRUE(l.try_lock_until(steady::now() + 50ms));
  l.unlock();
}

TEST_F(lock_test, mutual_exclusion_eight_threads_two_processes) {
  const std::string url = server().url();
  const int threads = 8, iterations = 40;
  std::vector<pid_t> pids;
  for (int p = 0; p < 2; ++p) {
    std::vector<std::string> args{LOCK_WORKER_PATH, url, "counter-lock", "counter", std::to_string(threads),
                                  std::to_string(iterations), "reentrant"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid;
    ASSERT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    pids.push_back(pid);
  }
  // This process takes part too, with its own client.
  client c{cfg()};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      auto l = c.lock("counter-lock");
      for (int i = 0; i < iterations; ++i) {
        std::lock_guard g(l);
        auto v = c.command({"GET", "counter"});
        long long n = v.is_nil() ? 0 : std::stoll(v.str);
        c.command({"SET", "counter", std::to_string(n + 1)});
      }
    });
  }
  for (auto& t : ts) t.join();
  for (auto pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(raw()({"GET", "counter"}).str, std::to_string(3 * threads * iterations));
  EXPECT_EQ(raw()({"EXISTS", "counter-lock"}).integer, 0);
}

TEST_F(lock_test, watchdog_keeps_lock_for_ten_leases_then_stops) {
  client c{cfg(300ms)};
  auto l = c.lock("wd");
  l.lock();
  auto t0 = steady::now();
  long long min_ttl = 1 << 30;
  while (steady::now() - t0 < 3s) {
    auto ttl = raw()({"PTTL", "wd"}).integer;
    ASSERT_GT(ttl, 0) << "the lock expired after " << ms_since(t0) << " ms";
    min_ttl = std::min(min_ttl, ttl);
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(l.valid());
  auto s = c.stats();
  EXPECT_GE(s.renewed_locks, 20u);  // every 100 ms for 3 s
  EXPECT_EQ(s.watched_locks, 1u);
  l.unlock();
  EXPECT_EQ(raw()({"EXISTS", "wd"}).integer, 0);
  auto calls = c.stats().renew_calls;
  std::this_thread::sleep_for(400ms);  // four renewal intervals: nothing may be sent
  EXPECT_EQ(c.stats().renew_calls, calls);
  EXPECT_EQ(c.stats().watched_locks, 0u);
  EXPECT_EQ(c.stats().held_locks, 0u);
  std::cout << "min TTL seen while held: " << min_ttl << " ms of 300\n";
}

TEST_F(lock_test, reentrant_hold_keeps_watchdog_until_last_unlock) {
  client c{cfg(300ms)};
  auto l = c.lock("wd-re");
  l.lock();            // watchdog
  l.lock(200ms);       // fixed lease inside
  l.unlock();          // the inner fixed-lease hold goes; the watchdog must go on for the outer
  std::this_thread::sleep_for(700ms);
  EXPECT_GT(raw()({"PTTL", "wd-re"}).integer, 0);
  EXPECT_TRUE(l.valid());
  l.unlock();
  EXPECT_EQ(raw()({"EXISTS", "wd-re"}).integer, 0);
}

TEST_F(lock_test, explicit_lease_expires_on_time_without_renewal) {
  client c{cfg(300ms)};
  auto l = c.lock("lease");
  std::promise<lost_info> lost;
  l.on_lost([&](const lost_info& i) { lost.set_value(i); });
  auto t0 = steady::now();
  l.lock(600ms);
  auto ttl = raw()({"PTTL", "lease"}).integer;
  EXPECT_GT(ttl, 400);
  EXPECT_LE(ttl, 600);
  ASSERT_TRUE(eventually([&] { return raw()({"EXISTS", "lease"}).integer == 0; }, 3000ms));
  auto gone = ms_since(t0);
  EXPECT_GE(gone, 500);
  EXPECT_LT(gone, 1500);
  EXPECT_EQ(c.stats().renew_calls, 0u);
  auto f = lost.get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(f.get().reason, lost_reason::expired);
  std::error_code ec;
  l.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
}

// A re-entry through another handle of the same name (a helper that calls client::lock itself)
// replaced the hold's callback: the handle that took the hold was never told it was lost.
TEST_F(lock_test, a_reentry_through_another_handle_leaves_the_hold_with_its_first_callback) {
  client c{cfg(300ms)};
  auto outer = c.lock("reentry-callback");
  std::promise<void> outer_lost;
  std::atomic<int> inner_calls{0};
  outer.on_lost([&](const lost_info&) { outer_lost.set_value(); });
  outer.lock();
  {
    auto inner = c.lock("reentry-callback");
    inner.on_lost([&](const lost_info&) { ++inner_calls; });
    inner.lock();  // a second level of the same hold
    inner.unlock();
  }
  raw()({"DEL", "reentry-callback"});
  auto f = outer_lost.get_future();
  ASSERT_EQ(f.wait_for(3s), std::future_status::ready) << "the outer handle's on_lost never ran";
  EXPECT_EQ(inner_calls.load(), 0);
  std::error_code ec;
  outer.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
}

// A lease of 3 s renews every second: a loss found at the next renewal shows within 1 s plus a loaded
// machine's slack, one that waited for the lease to run out would take at least 2 s.
TEST_F(lock_test, lost_lock_detected_within_one_interval_after_external_del) {
  client c{cfg(3000ms)};
  auto l = c.lock("lost");
  std::promise<lost_info> p;
  l.on_lost([&](const lost_info& i) { p.set_value(i); });
  l.lock();
  auto token = l.lost_token();
  EXPECT_FALSE(token.stop_requested());
  auto t0 = steady::now();
  raw()({"DEL", "lost"});
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  auto took = ms_since(t0);
  auto info = f.get();
  EXPECT_EQ(info.reason, lost_reason::deleted);
  EXPECT_EQ(info.name, "lost");
  EXPECT_EQ(info.owner, this_thread_owner());
  EXPECT_LT(took, 1000 + 800);
  EXPECT_TRUE(token.stop_requested());
  EXPECT_FALSE(l.valid());
  std::error_code ec;
  l.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  std::cout << "lost-lock detected " << took << " ms after DEL (interval 1000 ms)\n";
}

TEST_F(lock_test, lost_lock_when_another_owner_takes_it) {
  client c{cfg(300ms)};
  auto l = c.lock("stolen");
  std::promise<lost_info> p;
  l.on_lost([&](const lost_info& i) { p.set_value(i); });
  l.lock();
  raw().pipeline({{"DEL", "stolen"}, {"HSET", "stolen", "someone-else:1", "1"}, {"PEXPIRE", "stolen", "30000"}});
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(f.get().reason, lost_reason::taken);
  std::error_code ec;
  l.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  EXPECT_EQ(raw()({"HGET", "stolen", "someone-else:1"}).str, "1");  // the new holder keeps it
}

TEST_F(lock_test, lost_lock_when_server_paused_past_lease) {
  auto conf = cfg(300ms);
  conf.request_timeout = 200ms;
  client c{conf};
  auto l = c.lock("paused");
  std::promise<lost_info> p;
  l.on_lost([&](const lost_info& i) { p.set_value(i); });
  l.lock();
  auto t0 = steady::now();
  server().pause();
  auto f = p.get_future();
  auto st = f.wait_for(3s);
  server().resume();
  ASSERT_EQ(st, std::future_status::ready);
  auto took = ms_since(t0);
  EXPECT_EQ(f.get().reason, lost_reason::expired);
  EXPECT_LE(took, 300 + 300);  // the lease, plus slack
  EXPECT_FALSE(l.valid());
  std::cout << "lost-lock (server paused) detected " << took << " ms after the pause (lease 300 ms)\n";
}

TEST_F(lock_test, waiter_wakes_on_unlock_message_not_ttl) {
  client c{cfg()};  // 30 s lease: a TTL-based wake-up would take 30 s
  auto l = c.lock("wake");
  l.lock();
  const auto replies0 = c.stats().replies;
  std::promise<void> waiting;
  std::atomic<long long> woke_at{0};
  std::thread waiter([&] {
    auto l2 = c.lock("wake");
    waiting.set_value();
    EXPECT_TRUE(l2.try_lock(10s));
    woke_at = steady::now().time_since_epoch().count();
    l2.unlock();
  });
  waiting.get_future().wait();
  // Let the waiter subscribe and go to sleep: it must then be woken by the message.
  ASSERT_TRUE(eventually([&] {
    auto r = raw()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{wake}"});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  }));
  // The subscription's confirmation makes it try once more: wait for that answer too.
  ASSERT_TRUE(eventually([&] { return c.stats().replies >= replies0 + 2; }));
  auto t_unlock = steady::now();
  l.unlock();
  waiter.join();
  auto latency = std::chrono::duration_cast<std::chrono::microseconds>(
                     steady::time_point(steady::duration(woke_at.load())) - t_unlock)
                     .count();
  EXPECT_LT(latency, 200'000);  // far below the 30 s TTL
  std::cout << "waiter wake-up latency after unlock: " << latency << " us\n";
}

TEST_F(lock_test, try_lock_wait_bounds) {
  client c{cfg()};
  raw()({"HSET", "busy", "other:1", "1"});
  raw()({"PEXPIRE", "busy", "60000"});
  auto l = c.lock("busy");
  for (auto wait : {0ms, 100ms, 300ms}) {
    auto t0 = steady::now();
    EXPECT_FALSE(l.try_lock(wait));
    auto took = ms_since(t0);
    EXPECT_GE(took, wait.count());
    EXPECT_LT(took, wait.count() + 100) << "overshoot for wait " << wait.count();
  }
  // A holder's short TTL bounds the sleep: the waiter retries when it expires.
  raw()({"PEXPIRE", "busy", "150"});
  auto t0 = steady::now();
  EXPECT_TRUE(l.try_lock(2s));
  EXPECT_LT(ms_since(t0), 600);
  l.unlock();
}

TEST_F(lock_test, errors_are_typed) {
  client c{cfg()};
  std::error_code ec;
  EXPECT_THROW(c.lock(""), redlease::error);
  try {
    c.lock("");
  } catch (const redlease::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  auto l = c.lock("err");
  l.lock(-5ms, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  l.lock(0ms, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  l.try_lock(-1ms, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  l.try_lock(1ms, std::chrono::milliseconds::max(), ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(l.is_locked());

  // Wrong type: a string key under a reentrant lock, a hash under a mutex; the name is in the message.
  raw()({"SET", "a-string", "x"});
  auto ls = c.lock("a-string");
  ls.lock(ec);
  EXPECT_EQ(ec, errc::wrong_type);
  try {
    ls.lock();
    FAIL();
  } catch (const redlease::error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
    EXPECT_NE(std::string(e.what()).find("a-string"), std::string::npos) << e.what();
  }
  EXPECT_EQ(raw()({"GET", "a-string"}).str, "x");  // untouched
  raw()({"HSET", "a-hash", "f", "1"});
  auto m = c.mutex("a-hash");
  m.lock(ec);
  EXPECT_EQ(ec, errc::wrong_type);
  EXPECT_EQ(raw()({"HGET", "a-hash", "f"}).str, "1");

  // unlock without lock, twice
  l.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
  l.lock();
  l.unlock();
  l.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
}

TEST_F(lock_test, unreachable_server_fails_fast_with_connection_error) {
  auto conf = cfg();
  auto port = server().port();
  server().stop();
  conf.port = port;
  client c{conf};
  auto l = c.lock("x");
  std::error_code ec;
  auto t0 = steady::now();
  l.try_lock(5s, ec);
  EXPECT_EQ(ec, errc::connect_failed);
  EXPECT_LT(ms_since(t0), 1000);
  l.lock(ec);
  EXPECT_TRUE(ec == errc::connect_failed || ec == errc::connect_timeout) << ec.message();
}

TEST_F(lock_test, force_unlock_wakes_waiters_and_tells_holder) {
  client c{cfg(300ms)};
  auto l = c.lock("force");
  std::promise<lost_info> p;
  l.on_lost([&](const lost_info& i) { p.set_value(i); });
  l.lock();
  client other{cfg()};
  auto lo = other.lock("force");
  auto waiter = std::async(std::launch::async, [&] { return lo.try_lock(5s); });
  ASSERT_TRUE(eventually([&] {
    auto r = raw()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{force}"});
    return r.elements.size() == 2 && r.elements[1].integer >= 1;
  }));
  auto t0 = steady::now();
  EXPECT_TRUE(other.lock("force").force_unlock());
  EXPECT_TRUE(waiter.get());
  EXPECT_LT(ms_since(t0), 500);
  auto f = p.get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
}

// The waiter above could wake by the holder's 300 ms TTL alone; here the holder's lease is 30 s,
// so only force_unlock's message wakes it within the bound.
TEST_F(lock_test, force_unlock_wakes_a_waiter_by_its_message) {
  client c{cfg()};
  auto l = c.lock("force2");
  l.lock();
  client other{cfg()};
  auto lo = other.lock("force2");
  auto waiter = std::async(std::launch::async, [&] {
    bool got = lo.try_lock(5s);
    if (got) lo.unlock();
    return got;
  });
  ASSERT_TRUE(eventually([&] {
    auto r = raw()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{force2}"});
    return r.elements.size() == 2 && r.elements[1].integer >= 1;
  }));
  auto t0 = steady::now();
  EXPECT_TRUE(other.lock("force2").force_unlock());
  EXPECT_TRUE(waiter.get());
  EXPECT_LT(ms_since(t0), 1000);
}

TEST_F(lock_test, release_retry_never_double_decrements) {
  // The release script run as the client runs it after lost or late replies.
  client c{cfg()};
  auto l = c.lock("retry");
  l.lock();
  l.lock();
  l.lock();  // count 3
  std::string f = field(c, this_thread_owner());
  auto sha = raw()({"SCRIPT", "LOAD", std::string(redlease::detail::lua::release.body)}).str;
  auto run = [&](const char* expected, const char* retry, const std::string& request) {
    return raw().command({"EVALSHA", sha, "2", "retry", "redisson_unlock_latch:{retry}:" + request,
                          "redisson_lock__channel:{retry}", "0", "30000", f, expected, retry, "60000"});
  };
  EXPECT_EQ(run("3", "0", "r1").integer, 0);  // first attempt: 3 -> 2
  EXPECT_EQ(run("3", "1", "r1").integer, 0);  // its retry: already applied, stays 2 (and latches r1)
  EXPECT_EQ(raw()({"HGET", "retry", f}).str, "2");
  EXPECT_EQ(run("3", "0", "r1").integer, 0);  // a stale copy of r1's first attempt: latched, no-op
  EXPECT_EQ(raw()({"HGET", "retry", f}).str, "2");
  EXPECT_EQ(run("2", "0", "r2").integer, 0);  // 2 -> 1
  EXPECT_EQ(run("1", "0", "r3").integer, 1);  // 1 -> freed
  EXPECT_TRUE(run("1", "1", "r3").is_nil());  // a retry after the final release finds nothing
  EXPECT_EQ(raw()({"EXISTS", "retry"}).integer, 0);
  EXPECT_EQ(raw()({"EXISTS", "redisson_unlock_latch:{retry}:r2"}).integer, 0);  // first attempts write no latch

  // ABA: release r4's first attempt is stuck in a reset connection; its retry frees the lock; the
  // owner takes the lock again (count 1, as r4 expected); then the stale first attempt arrives.
  raw()({"HSET", "retry", f, "1"});
  EXPECT_EQ(run("1", "1", "r4").integer, 1);  // the retry: freed, latched
  raw()({"HSET", "retry", f, "1"});           // taken again
  EXPECT_EQ(run("1", "0", "r4").integer, 1);  // the stale first attempt: answers from the latch
  EXPECT_EQ(raw()({"HGET", "retry", f}).str, "1") << "the stale attempt must not free the new hold";
  raw()({"DEL", "retry"});

  // Undoing an acquisition whose reply was lost: the release in retry mode, expecting the count the
  // acquisition would have produced. It ran (count 2 for an owner that knew of 1): back to 1.
  raw()({"HSET", "retry", f, "2"});
  EXPECT_EQ(run("2", "1", "u1").integer, 0);
  EXPECT_EQ(raw()({"HGET", "retry", f}).str, "1");
  // It did not run (count 1, as the owner knows): nothing changes.
  EXPECT_EQ(run("2", "1", "u2").integer, 0);
  EXPECT_EQ(raw()({"HGET", "retry", f}).str, "1");
  raw()({"DEL", "retry"});
}

// The undo of a re-entry whose reply never came gives back that level only: the levels the owner
// already held keep their lease. The undo reset the key to the watchdog's 30 s whatever they were,
// and an outer ten-minute lease (which nothing renews) ended 30 s later while its owner held it.
TEST_F(lock_test, the_undo_of_a_lost_reentry_keeps_the_outer_fixed_lease) {
  fault_proxy proxy(server().port());
  auto conf = cfg();  // watchdog 30 s
  conf.port = proxy.port();
  // One connection: with a lane, the reply lost could be its handshake's (it opens on the first
  // blocking call), and the re-entry then went through (seen once under a loaded CI run).
  conf.sync_lane = false;
  client c{conf};
  auto l = c.lock("undo:lease");
  l.lock(600000ms);
  const std::string f = field(c, this_thread_owner());
  ASSERT_GT(raw()({"PTTL", "undo:lease"}).integer, 590000);
  proxy.lose_next_reply();
  std::error_code ec;
  EXPECT_FALSE(l.try_lock(0ms, 600000ms, ec));  // the re-entry ran, its reply was lost
  EXPECT_EQ(ec, errc::connection_lost) << ec.message();
  EXPECT_EQ(proxy.replies_lost(), 1u);
  // The undo gave that level back...
  ASSERT_TRUE(eventually([&] { return raw()({"HGET", "undo:lease", f}).str == "1"; }));
  // ...and the hold the owner still has keeps its ten minutes.
  EXPECT_GT(raw()({"PTTL", "undo:lease"}).integer, 590000);
  EXPECT_TRUE(l.valid());
  EXPECT_EQ(l.hold_count(), 1);
  l.unlock();
  EXPECT_EQ(raw()({"EXISTS", "undo:lease"}).integer, 0);
}

// Unlocking an inner level of a hold whose levels have other fixed leases: the release sets the key's
// TTL to the outer lease again (Redisson's rule), and the hold's deadline must follow it, whichever
// way it moves. Before, the deadline stayed at the inner grant's: a shorter inner lease made a live
// hold "expire" (on_lost, and unlock said lock_lost), a longer one kept valid() true after the key
// had expired and another client held the lock.
template <class Lock>
void inner_unlock_moves_the_deadline(raw_client& raw, Lock l, Lock o) {
  const std::string name = l.name();
  std::atomic<int> lost{0};
  l.on_lost([&](const lost_info&) { ++lost; });
  l.lock(4000ms);
  l.lock(300ms);
  l.unlock();
  ASSERT_GT(raw({"PTTL", name}).integer, 3000);
  // Past the inner lease: still held, on the server and here.
  std::this_thread::sleep_for(800ms);
  ASSERT_GT(raw({"PTTL", name}).integer, 2000);
  EXPECT_TRUE(l.valid()) << name;
  EXPECT_EQ(lost.load(), 0) << name << ": a live hold reported lost";
  std::error_code ec;
  l.unlock(ec);
  EXPECT_FALSE(ec) << name << ": " << ec.message();
  EXPECT_EQ(raw({"EXISTS", name}).integer, 0);
  // The other way round: the deadline comes down to the outer lease.
  l.lock(300ms);
  l.lock(10000ms);
  l.unlock();
  EXPECT_LE(raw({"PTTL", name}).integer, 300);
  EXPECT_LE(l.valid_until(), steady::now() + 300ms) << name;
  ASSERT_TRUE(o.try_lock(3000ms)) << name;
  EXPECT_FALSE(l.valid()) << name;
  o.unlock();
}

TEST_F(lock_test, unlocking_an_inner_level_moves_the_deadline_to_the_outer_lease) {
  client c{cfg()};
  client other{cfg()};
  inner_unlock_moves_the_deadline(raw(), c.lock("inner:re"), other.lock("inner:re"));
  inner_unlock_moves_the_deadline(raw(), c.fair_lock("inner:fair"), other.fair_lock("inner:fair"));
  inner_unlock_moves_the_deadline(raw(), c.write_lock("inner:w"), other.write_lock("inner:w"));
}

TEST_F(lock_test, holds_of_many_threads_on_one_client) {
  client c{cfg(300ms)};
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i) {
    ts.emplace_back([&, i] {
      auto l = c.lock("many:" + std::to_string(i));
      l.lock();
      std::this_thread::sleep_for(400ms);  // more than a lease: the watchdog must renew all 16
      if (l.valid() && l.is_held_by_current_thread()) ++ok;
      l.unlock();
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 16);
  // 16 locks renewed together: far fewer script calls than renewals.
  auto s = c.stats();
  EXPECT_LT(s.renew_calls * 3, s.renewed_locks) << s.renew_calls << " calls for " << s.renewed_locks;
  std::cout << s.renew_calls << " renewal calls for " << s.renewed_locks << " renewals\n";
}

}  // namespace
}  // namespace redlease::test

namespace redlease::test {
namespace {

TEST_F(lock_test, backoff_wait_strategy_retries_without_pubsub) {
  client c{cfg()};
  auto holder = c.lock("bo");
  holder.lock();
  auto l = c.lock("bo");
  l.set_wait_strategy(wait_strategy::backoff(5ms, 40ms, 2.0, 0.5));
  const auto commands0 = c.stats().commands;
  std::thread t([&] {
    auto t0 = steady::now();
    EXPECT_TRUE(l.try_lock(5s));
    EXPECT_LT(ms_since(t0), 2000);
    l.unlock();
  });
  // No subscription: it polls with backoff (capped at 40 ms). Checked after a few tries.
  ASSERT_TRUE(eventually([&] { return c.stats().commands >= commands0 + 4; }));
  auto r = raw()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{bo}"});
  EXPECT_EQ(r.elements[1].integer, 0);
  holder.unlock();
  t.join();
  // Bounded attempts: gives up with false long before the wait.
  holder.lock();
  std::thread t2([&] {
    auto l2 = c.lock("bo");
    l2.set_wait_strategy(wait_strategy::backoff(5ms, 10ms, 2.0, 0.0, 3));
    auto t0 = steady::now();
    EXPECT_FALSE(l2.try_lock(10s));
    EXPECT_LT(ms_since(t0), 500);
  });
  t2.join();
  holder.unlock();
  EXPECT_THROW(l.set_wait_strategy(wait_strategy::backoff(0ms, 10ms)), redlease::error);
  EXPECT_THROW(l.set_wait_strategy(wait_strategy::backoff(10ms, 5ms)), redlease::error);
}

}  // namespace
}  // namespace redlease::test

namespace redlease::test {
namespace {

// A wait without a deadline never ends "not acquired" without an error. Before, a backoff
// strategy's max_attempts made lock() return normally without the lock (a std::lock_guard then
// entered its critical section unlocked, and its unlock() threw from the destructor), and
// async_lock complete with operation_aborted although nothing was cancelled.
TEST_F(lock_test, lock_whose_backoff_attempts_run_out_fails_with_attempts_exhausted) {
  client c{cfg()};
  auto holder = c.lock("bo-max");
  holder.lock();
  auto l = c.lock("bo-max");
  l.set_wait_strategy(wait_strategy::backoff(5ms, 10ms, 2.0, 0.0, 3));
  std::thread t([&] {
    try {
      l.lock();
      ADD_FAILURE() << "lock() returned without the lock";
    } catch (const redlease::error& e) {
      EXPECT_EQ(e.code(), errc::attempts_exhausted) << e.what();
    }
    std::error_code ec;
    l.lock(5s, ec);
    EXPECT_EQ(ec, errc::attempts_exhausted);
    EXPECT_EQ(ec, std::errc::resource_unavailable_try_again);
    EXPECT_NE(ec, std::errc::operation_canceled);
    EXPECT_EQ(l.lock_and_get_token(ec), 0u);
    EXPECT_EQ(ec, errc::attempts_exhausted);
    EXPECT_FALSE(l.valid());
    // A wait with a deadline: contention, not an error.
    EXPECT_FALSE(l.try_lock(10s, ec));
    EXPECT_FALSE(ec) << ec.message();
  });
  t.join();
  auto owner = c.new_owner();
  try {
    l.async_lock(owner, asio::use_future).get();
    ADD_FAILURE() << "async_lock completed without the lock";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::attempts_exhausted);
  }
  EXPECT_FALSE(l.valid(owner));
  EXPECT_EQ(raw()({"HLEN", "bo-max"}).integer, 1);  // the holder's field only
  holder.unlock();
}

// Durations the clock cannot add: a holder's PTTL from the server (a key set with PX 10^13, by
// anyone), a backoff strategy's delays, TimedLockable waits of hours::max() or until
// time_point::min(). Before, they overflowed steady_clock: a waiter woke at once after every busy
// reply (about 10,000 attempts a second, for ever with lock()), and try_lock_for(hours::max()) or
// try_lock_until(time_point::max()) threw invalid_argument (after undefined behaviour).
TEST_F(lock_test, durations_beyond_the_clock_saturate_instead_of_overflowing) {
  client c{cfg()};
  raw()({"HSET", "huge-ttl", "someone:1", "1"});
  raw()({"PEXPIRE", "huge-ttl", "10000000000000"});
  raw()({"SET", "huge-ttl-m", "tok", "PX", "10000000000000"});
  auto l = c.lock("huge-ttl");
  auto m = c.mutex("huge-ttl-m");
  auto before = c.stats().commands;
  auto t0 = steady::now();
  EXPECT_FALSE(l.try_lock(500ms));
  EXPECT_FALSE(m.try_lock(500ms));  // re-checks every mutex_poll_cap (100 ms)
  EXPECT_GE(ms_since(t0), 1000);
  EXPECT_LT(c.stats().commands - before, 40u);

  auto b = c.lock("huge-ttl");
  b.set_wait_strategy(wait_strategy::backoff(1ms, std::chrono::milliseconds::max(), 1e15, 0.0));
  before = c.stats().commands;
  EXPECT_FALSE(b.try_lock(300ms));
  EXPECT_LT(c.stats().commands - before, 10u);

  auto f = c.lock("free");
  EXPECT_TRUE(f.try_lock_for(std::chrono::hours::max()));
  f.unlock();
  EXPECT_TRUE(f.try_lock_until(steady::time_point::max()));
  f.unlock();
  EXPECT_TRUE(f.try_lock_until(std::chrono::time_point<std::chrono::system_clock, std::chrono::hours>::max()));
  f.unlock();
  EXPECT_TRUE(f.try_lock_until(steady::time_point::min()));
  f.unlock();
  // Held: one attempt, no wait.
  t0 = steady::now();
  EXPECT_FALSE(l.try_lock_until(steady::time_point::min()));
  EXPECT_FALSE(l.try_lock_until(std::chrono::time_point<std::chrono::system_clock, std::chrono::hours>::min()));
  EXPECT_FALSE(l.try_lock_for(std::chrono::nanoseconds::zero()));
  // A negative wait is one attempt, as for std::timed_mutex (a deadline just passed): it threw
  // invalid_argument, through std::unique_lock(l, d) too.
  EXPECT_FALSE(l.try_lock_for(-5ms));
  EXPECT_FALSE(l.try_lock_for(std::chrono::nanoseconds::min()));
  EXPECT_LT(ms_since(t0), 500);
  {
    std::unique_lock u(f, -5ms);
    EXPECT_TRUE(u.owns_lock());
  }
  EXPECT_EQ(raw()({"EXISTS", "free"}).integer, 0);
}

// An unlock message ("0") wakes one local waiter. One that then gives up without the lock passes
// the wake-up on. Here the head waiter's fenced grant fails once the lock is free (its token key
// is a list); before, the waiter behind it slept on the free lock until its own deadline (10 s).
TEST_F(lock_test, a_woken_waiter_that_gives_up_passes_the_wake_up_on) {
  raw()({"HSET", "wake-on", "other:1", "1"});
  raw()({"PEXPIRE", "wake-on", "20000"});
  raw()({"RPUSH", "redisson_lock_token:{wake-on}", "not-a-number"});
  auto conf = cfg();
  conf.sync_lane = false;  // every reply counted below is one of the command connection's
  client c{conf};
  auto l = c.lock("wake-on");
  const owner_id a = c.new_owner(), b = c.new_owner();
  {
    // The scripts are loaded first: an EVALSHA answered NOSCRIPT would count as a reply below.
    auto warm = c.lock("wake-on:warm");
    ASSERT_NE(warm.async_try_lock_and_get_token(a, 0ms, asio::use_future).get(), 0u);
    ASSERT_TRUE(warm.async_try_lock(a, 0ms, asio::use_future).get());
  }
  const auto r0 = c.stats().replies;
  std::promise<std::error_code> a_done;
  l.async_try_lock_and_get_token(a, 10s, [&](std::error_code ec, std::uint64_t) { a_done.set_value(ec); });
  // A waits first: its attempt, and another once its SUBSCRIBE is confirmed (one reply each).
  ASSERT_TRUE(eventually([&] {
    auto n = raw()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{wake-on}"});
    return c.stats().replies >= r0 + 2 && n.elements.size() == 2 && n.elements[1].integer == 1;
  }));
  auto fb = l.async_try_lock(b, 10s, asio::use_future);
  // B's attempt answered busy: the handler that read it put B behind A on the channel, on the I/O
  // thread, which reads the unlock message only after that handler.
  ASSERT_TRUE(eventually([&] { return c.stats().replies >= r0 + 3; }));
  const auto t0 = steady::now();
  raw()({"DEL", "wake-on"});
  raw()({"PUBLISH", "redisson_lock__channel:{wake-on}", "0"});
  auto fa = a_done.get_future();
  ASSERT_EQ(fa.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(fa.get(), errc::wrong_type);
  ASSERT_EQ(fb.wait_for(5s), std::future_status::ready) << "B slept on a free lock";
  EXPECT_TRUE(fb.get());
  EXPECT_LT(ms_since(t0), 2000);
  l.async_unlock(b, asio::use_future).get();
}

// A lost hold that its owner never unlocks is dropped lost_hold_kept after the loss (five minutes;
// shortened here), by the watchdog's timer, with no other lock of the client lost meanwhile.
// Before, only a later loss dropped it: the owner's acquisitions of that name failed with lock_lost
// for ever, and the hold stayed in held_locks and in the local view.
TEST_F(lock_test, a_lost_hold_never_unlocked_is_dropped_after_a_while) {
  struct shortened {
    std::chrono::milliseconds saved = detail::lock_service::lost_hold_kept;
    shortened() { detail::lock_service::lost_hold_kept = 500ms; }
    ~shortened() { detail::lock_service::lost_hold_kept = saved; }
  } kept;
  {
    client c{cfg()};
    auto l = c.lock("lost-kept");
    std::promise<void> lost;
    l.on_lost([&](const lost_info&) { lost.set_value(); });
    l.lock(300ms);  // a fixed lease, never unlocked
    ASSERT_EQ(lost.get_future().wait_for(5s), std::future_status::ready);
    std::error_code ec;
    EXPECT_FALSE(l.try_lock(0ms, ec));
    EXPECT_EQ(ec, errc::lock_lost);
    EXPECT_EQ(c.stats().held_locks, 1u);
    EXPECT_TRUE(eventually([&] { return c.stats().held_locks == 0; }, 3000ms)) << "the lost hold was kept";
    EXPECT_EQ(l.valid_until(), steady::time_point::min());
    EXPECT_TRUE(l.try_lock(0ms, ec)) << ec.message();
    l.unlock();
    l.on_lost(nullptr);
  }
}

TEST_F(lock_test, reentering_a_lost_hold_reports_lock_lost_and_takes_nothing) {
  client c{cfg(300ms)};
  auto l = c.lock("relost");
  std::promise<void> lost;
  l.on_lost([&](const lost_info&) { lost.set_value(); });
  l.lock();
  raw()({"DEL", "relost"});
  ASSERT_EQ(lost.get_future().wait_for(2s), std::future_status::ready);
  std::error_code ec;
  l.lock(ec);  // re-entry into a broken critical section
  EXPECT_EQ(ec, errc::lock_lost);
  EXPECT_FALSE(l.try_lock(1s, ec));
  EXPECT_EQ(ec, errc::lock_lost);
  EXPECT_EQ(raw()({"EXISTS", "relost"}).integer, 0);  // nothing taken
  l.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  l.lock();  // after the unlock, a fresh start
  EXPECT_TRUE(l.valid());
  l.unlock();
}

}  // namespace
}  // namespace redlease::test
