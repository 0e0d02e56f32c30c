// SPDX-License-Identifier: MIT
// Chaos scenarios against a real redis-server: network stalls, frozen and killed holders, server
// restarts, killed pub/sub connections, lost replies, flushed scripts. Each scenario asserts what the
// client must do and prints what it measured ("[chaos] ..." lines, collected in docs/reliability.md).
#include <gtest/gtest.h>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_future.hpp>
#include <sys/wait.h>

#include <atomic>
#include <future>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

using ms = std::chrono::milliseconds;

void report(const std::string& scenario, const std::string& what, long long value, const char* unit = "ms") {
  std::cout << "[chaos] " << scenario << ": " << what << " = " << value << " " << unit << std::endl;
}

// How late a callback may run after its timer on a loaded machine (two cores shared with other builds
// and tests, sanitizers): the order of two clients' events is asserted up to this much.
constexpr ms scheduling_slack = 500ms;

long long ms_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration_cast<ms>(b - a).count();
}

struct attempt {
  std::error_code ec;
  bool got = false;
  steady::time_point at;
};

// An acquisition with an explicit owner, completed on the client's thread: no helper thread to own
// the lock, and the completion time is taken where it happens.
std::future<attempt> try_async(detail::lock_handle& l, owner_id o, ms wait) {
  auto p = std::make_shared<std::promise<attempt>>();
  auto f = p->get_future();
  l.async_try_lock(o, wait, [p](std::error_code ec, bool got) { p->set_value({ec, got, steady::now()}); });
  return f;
}

std::future<std::error_code> unlock_async(detail::lock_handle& l, owner_id o) {
  auto p = std::make_shared<std::promise<std::error_code>>();
  auto f = p->get_future();
  l.async_unlock(o, [p](std::error_code ec) { p->set_value(ec); });
  return f;
}

// Records the first loss of a handle's hold: when, and why.
struct lost_probe {
  std::mutex mu;
  std::promise<std::pair<lost_info, steady::time_point>> p;
  std::shared_future<std::pair<lost_info, steady::time_point>> f = p.get_future().share();
  std::atomic<int> calls{0};
  void attach(detail::lock_handle& l) {
    l.on_lost([this](const lost_info& i) {
      auto t = steady::now();
      if (calls.fetch_add(1) == 0) p.set_value({i, t});
    });
  }
  bool fired() const { return calls.load() > 0; }
  bool wait(ms limit) const { return f.wait_for(limit) == std::future_status::ready; }
  lost_info info() const { return f.get().first; }
  steady::time_point at() const { return f.get().second; }
};

class chaos_test : public lock_fixture {
 protected:
  // A client config with the short timeouts of these scenarios; through `proxy` if given.
  config conf(ms watchdog, const fault_proxy* proxy = nullptr, ms request_timeout = 250ms) {
    auto c = cfg(watchdog);
    c.request_timeout = request_timeout;
    c.connect_timeout = 500ms;
    if (proxy) c.port = proxy->port();
    return c;
  }
  std::string field(const client& c, owner_id o) { return c.id() + ":" + std::to_string(o); }
  // The lock of kind `kind` ("reentrant", "mutex", "fair", "read", "write") named `name`.
  static detail::lock_handle lock_of(client& c, const std::string& kind, const std::string& name) {
    return lock_of_kind(c, kind, name);
  }
  // A new owner that took and released `l` once, asynchronously: the client is connected and has
  // the scripts cached, and no lane was opened.
  static owner_id warmed_owner(client& c, detail::lock_handle& l) {
    const owner_id o = c.new_owner();
    l.async_lock(o, asio::use_future).get();
    l.async_unlock(o, asio::use_future).get();
    return o;
  }
  bool subscribers_at_least(const std::string& channel, long long n) {
    auto r = raw()({"PUBSUB", "NUMSUB", channel});
    return r.elements.size() == 2 && r.elements[1].integer >= n;
  }
};

const char* reason_name(lost_reason r) { return lost_reason_name(r); }

// ---- the proxy itself ---------------------------------------------------------------------------

TEST_F(chaos_test, proxy_forwards_adds_latency_stalls_and_resets) {
  fault_proxy proxy(server().port());
  raw_client via("127.0.0.1", proxy.port());
  EXPECT_EQ(via({"PING"}).str, "PONG");
  EXPECT_TRUE(via({"SET", "pk", "v"}).is_ok());
  EXPECT_EQ(raw()({"GET", "pk"}).str, "v");  // it really reached the server
  EXPECT_EQ(proxy.connections(), 1u);
  EXPECT_EQ(proxy.accepted(), 1u);

  // Latency, both ways.
  proxy.set_latency(40ms);
  auto t0 = steady::now();
  EXPECT_EQ(via({"PING"}).str, "PONG");
  EXPECT_GE(ms_since(t0), 80);
  proxy.set_latency(0ms);

  // Stall: the request is accepted but goes nowhere until un-stalled.
  proxy.stall(true);
  via.set_timeout(200ms);
  auto up = proxy.bytes_up(), fwd = proxy.forwarded_up();
  EXPECT_THROW(via({"SET", "pk", "stalled"}), timeout_error);
  EXPECT_GT(proxy.bytes_up(), up);
  EXPECT_EQ(proxy.forwarded_up(), fwd);
  EXPECT_EQ(raw()({"GET", "pk"}).str, "v");
  proxy.stall(false);
  via.set_timeout(2000ms);
  EXPECT_TRUE(via.read_reply().is_ok());  // the late reply of the stalled SET
  EXPECT_EQ(raw()({"GET", "pk"}).str, "stalled");

  // Drop: the connection is reset.
  proxy.drop_all();
  EXPECT_EQ(proxy.connections(), 0u);
  EXPECT_EQ(proxy.resets(), 1u);
  EXPECT_THROW(via({"PING"}), std::runtime_error);

  // Lost reply: the command ran, its reply never came.
  raw_client via2("127.0.0.1", proxy.port());
  proxy.lose_next_reply();
  EXPECT_THROW(via2({"SET", "pk", "ran"}), std::runtime_error);
  EXPECT_EQ(proxy.replies_lost(), 1u);
  EXPECT_EQ(raw()({"GET", "pk"}).str, "ran");

  // New connections: refused, blackholed, then forwarded again.
  proxy.refuse(true);
  EXPECT_THROW(raw_client("127.0.0.1", proxy.port()).command({"PING"}), std::runtime_error);
  proxy.refuse(false);
  proxy.blackhole(true);
  {
    raw_client hole("127.0.0.1", proxy.port());
    hole.set_timeout(150ms);
    EXPECT_THROW(hole({"PING"}), timeout_error);
    EXPECT_EQ(proxy.blackholed(), 1u);
  }
  proxy.blackhole(false);
  raw_client via3("127.0.0.1", proxy.port());
  EXPECT_EQ(via3({"PING"}).str, "PONG");
}

TEST_F(chaos_test, client_behind_blackholed_or_refusing_route_fails_with_typed_errors) {
  fault_proxy proxy(server().port());
  proxy.blackhole(true);
  {
    client c{conf(30000ms, &proxy, 2000ms)};  // connect_timeout (500 ms) before the request's own
    std::error_code ec;
    auto t0 = steady::now();
    c.ping(ec);
    auto took = ms_since(t0);
    EXPECT_EQ(ec, errc::connect_timeout) << ec.message();
    EXPECT_LT(took, 500 + 1000);
    report("blackholed route", "ping failed with connect_timeout after", took);
  }
  proxy.blackhole(false);
  proxy.refuse(true);
  {
    client c{conf(30000ms, &proxy)};
    std::error_code ec;
    auto t0 = steady::now();
    c.ping(ec);
    // The TCP connect succeeds (to the proxy) and is then reset: connect_failed or connection_lost.
    EXPECT_TRUE(ec == errc::connect_failed || ec == errc::connection_lost) << ec.message();
    EXPECT_LT(ms_since(t0), 500);
  }
  proxy.refuse(false);
  client c{conf(30000ms, &proxy)};
  c.ping();  // and through a healthy route it works
}

// ---- 1. the holder's network stalls longer than the lease ----------------------------------------

TEST_F(chaos_test, holder_network_stall_past_lease_is_told_before_another_acquires) {
  const ms lease = 500ms;
  fault_proxy proxy(server().port());
  client holder{conf(lease, &proxy, 200ms)};
  auto l = holder.lock("s1");
  lost_probe lost;
  lost.attach(l);
  l.lock();
  ASSERT_TRUE(eventually([&] { return holder.stats().renewed_locks >= 1; }, 3000ms));

  proxy.stall(true);
  const auto t_stall = steady::now();
  client other{conf(30000ms)};  // direct, not through the proxy
  auto lo = other.lock("s1");
  const owner_id o = other.new_owner();
  auto acq = try_async(lo, o, 5000ms);

  ASSERT_TRUE(lost.wait(lease + 2000ms)) << "the stalled holder was never told";
  auto got = acq.get();
  ASSERT_FALSE(got.ec) << got.ec.message();
  ASSERT_TRUE(got.got);
  EXPECT_EQ(lost.info().reason, lost_reason::expired);
  const auto vu = l.valid_until();
  EXPECT_FALSE(l.valid());
  EXPECT_TRUE(l.lost_token().stop_requested());
  // Safety: the holder's known-valid window ended before the other client got the lock...
  EXPECT_LE(vu, got.at);
  // ...and the callback ran by then too (up to the scheduling slack of a loaded machine).
  EXPECT_LE(lost.at(), got.at + scheduling_slack) << "told " << ms_between(got.at, lost.at()) << " ms after the other acquired";
  EXPECT_LE(lost.at(), t_stall + lease + scheduling_slack);

  report("1 stall > lease", "stall -> on_lost(expired)", ms_between(t_stall, lost.at()));
  report("1 stall > lease", "valid_until -> on_lost (callback lateness)", ms_between(vu, lost.at()));
  report("1 stall > lease", "on_lost before the other's acquisition by", ms_between(lost.at(), got.at));
  report("1 stall > lease", "stall -> other client acquires", ms_between(t_stall, got.at));

  proxy.stall(false);
  std::error_code ec;
  l.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  EXPECT_EQ(raw()({"HGET", "s1", field(other, o)}).str, "1");  // the new holder keeps it
  EXPECT_FALSE(unlock_async(lo, o).get());
  EXPECT_EQ(raw()({"EXISTS", "s1"}).integer, 0);
}

// ---- 2. the holder process is frozen past its lease ----------------------------------------------


// The same with 60 ms of latency on the holder's route: on loopback a valid_until timed from the
// reply instead of the request's send could not be told apart; here it ends after the server's
// expiry, when the other owner already holds the lock.
TEST_F(chaos_test, holder_stall_with_latency_keeps_valid_until_anchored_at_the_send) {
  const ms lease = 600ms;
  fault_proxy proxy(server().port());
  client holder{conf(lease, &proxy, 500ms)};
  auto l = holder.lock("s1r");
  lost_probe lost;
  lost.attach(l);
  l.lock();
  ASSERT_TRUE(eventually([&] { return holder.stats().renewed_locks >= 1; }, 3000ms));  // warm
  proxy.set_latency(60ms);
  const auto renewed = holder.stats().renewed_locks;
  ASSERT_TRUE(eventually([&] { return holder.stats().renewed_locks >= renewed + 2; }, 3000ms));
  proxy.stall(true);
  client other{conf(30000ms)};
  auto lo = other.lock("s1r");
  const owner_id o = other.new_owner();
  auto acq = try_async(lo, o, 5000ms);
  ASSERT_TRUE(lost.wait(lease + 2000ms));
  auto got = acq.get();
  ASSERT_TRUE(got.got);
  const auto vu = l.valid_until();
  EXPECT_LE(vu, got.at) << "valid_until " << ms_between(got.at, vu) << " ms after the other acquired";
  EXPECT_LE(lost.at(), got.at + scheduling_slack) << "told " << ms_between(got.at, lost.at()) << " ms after the other acquired";
  proxy.stall(false);
  proxy.set_latency(0ms);
  std::error_code ec;
  l.unlock(ec);
  EXPECT_FALSE(unlock_async(lo, o).get());
}

TEST_F(chaos_test, frozen_holder_process_learns_loss_on_resume_and_never_unlocks_the_new_holder) {
  for (const char* kind : {"reentrant", "mutex"}) {
    SCOPED_TRACE(kind);
    const std::string name = std::string("s2-") + kind;
    child_process w({SOAK_WORKER_PATH, "hold", server().url(), name, "500", "200", kind});
    auto locked = w.read_line_starting("locked", 5000ms);
    ASSERT_TRUE(locked) << "the worker did not take the lock";

    ASSERT_TRUE(w.freeze());
    const auto t_freeze = steady::now();
    client other{conf(30000ms)};
    detail::lock_handle lo = lock_of(other, kind, name);
    const owner_id o = other.new_owner();
    auto got = try_async(lo, o, 5000ms).get();
    ASSERT_FALSE(got.ec) << got.ec.message();
    ASSERT_TRUE(got.got);
    report(std::string("2 SIGSTOP holder (") + kind + ")", "freeze -> another client acquires",
           ms_between(t_freeze, got.at));
    auto server_value = [&] {
      return std::string(kind) == "mutex" ? raw()({"GET", name}).str : raw()({"HGET", name, field(other, o)}).str;
    };
    const std::string mine = server_value();
    ASSERT_FALSE(mine.empty());

    ASSERT_TRUE(w.thaw());
    const auto t_thaw = steady::now();
    ASSERT_TRUE(w.send("valid"));
    auto valid = w.read_line_starting("valid", 5000ms);
    ASSERT_TRUE(valid);
    EXPECT_EQ(*valid, "valid 0") << "the resumed holder still believes it holds the lock";
    auto lost = w.read_line_starting("lost", 5000ms);
    ASSERT_TRUE(lost) << "the resumed holder was never told";
    const auto t_lost = steady::now();
    EXPECT_TRUE(*lost == "lost expired" || *lost == "lost taken") << *lost;
    report(std::string("2 SIGSTOP holder (") + kind + ")", "resume -> on_lost (" + lost->substr(5) + ")",
           ms_between(t_thaw, t_lost));
    ASSERT_TRUE(w.send("unlock"));
    auto unl = w.read_line_starting("unlock", 5000ms);
    ASSERT_TRUE(unl);
    EXPECT_EQ(*unl, "unlock lock_lost");
    EXPECT_EQ(server_value(), mine) << "the stale holder's unlock touched the new holder's lock";
    w.close_stdin();
    auto st = w.wait_exit(5000ms);
    ASSERT_TRUE(st);
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
    EXPECT_FALSE(unlock_async(lo, o).get());
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
  }
}

// ---- 3. the holder process is killed -------------------------------------------------------------

TEST_F(chaos_test, killed_holder_lock_frees_itself_after_the_lease) {
  const ms lease = 500ms;
  child_process w({SOAK_WORKER_PATH, "hold", server().url(), "s3", std::to_string(lease.count()), "200", "reentrant"});
  ASSERT_TRUE(w.read_line_starting("locked", 5000ms));
  client other{conf(30000ms)};
  auto lo = other.lock("s3");
  const owner_id o = other.new_owner();
  auto acq = try_async(lo, o, 10000ms);
  ASSERT_TRUE(eventually([&] { return subscribers_at_least("redisson_lock__channel:{s3}", 1); }));
  auto pttl = raw()({"PTTL", "s3"}).integer;
  const auto t_kill = steady::now();
  w.kill_now();
  auto got = acq.get();
  ASSERT_FALSE(got.ec) << got.ec.message();
  ASSERT_TRUE(got.got);
  auto took = ms_between(t_kill, got.at);
  // Within the lease (the most a renewal just before the kill can leave) plus one wake-up.
  EXPECT_LE(took, lease.count() + 300);
  report("3 SIGKILL holder", "kill -> waiter acquires", took);
  report("3 SIGKILL holder", "key TTL at the kill", pttl);
  EXPECT_FALSE(unlock_async(lo, o).get());
}

// ---- 4. the server restarts: every lock is gone --------------------------------------------------

TEST_F(chaos_test, server_restart_tells_every_holder_and_waiters_acquire) {
  const int n = 3;
  client a{conf(500ms)};
  client b{conf(30000ms)};
  std::vector<detail::lock_handle> held, wanted;
  std::vector<std::unique_ptr<lost_probe>> probes;
  std::vector<owner_id> owners;
  std::vector<std::future<attempt>> waits;
  for (int i = 0; i < n; ++i) {
    std::string name = "s4:" + std::to_string(i);
    held.push_back(a.lock(name));
    probes.push_back(std::make_unique<lost_probe>());
    probes.back()->attach(held.back());
    held.back().lock();
    wanted.push_back(b.lock(name));
    owners.push_back(b.new_owner());
    waits.push_back(try_async(wanted.back(), owners.back(), 15000ms));
  }
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(eventually([&] { return subscribers_at_least("redisson_lock__channel:{s4:" + std::to_string(i) + "}", 1); }));
  }
  const auto connects = a.stats().connects;
  const auto t0 = steady::now();
  server().restart();
  const auto t_up = steady::now();
  report("4 server restart", "restart took", ms_between(t0, t_up));
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(probes[i]->wait(5000ms)) << "holder " << i << " was not told";
    report("4 server restart", std::string("restart -> holder told (") + reason_name(probes[i]->info().reason) + ")",
           ms_between(t0, probes[i]->at()));
    EXPECT_FALSE(held[i].valid());
  }
  for (int i = 0; i < n; ++i) {
    auto got = waits[i].get();
    ASSERT_FALSE(got.ec) << got.ec.message();
    ASSERT_TRUE(got.got) << "waiter " << i;
    report("4 server restart", "server up -> waiter acquires", ms_between(t_up, got.at));
    EXPECT_TRUE(wanted[i].valid(owners[i]));
  }
  // The holder's client reconnected by itself and works.
  std::error_code ec;
  a.ping(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_GT(a.stats().connects, connects);
  auto fresh = a.lock("s4:new");
  fresh.lock();
  EXPECT_TRUE(fresh.valid());
  fresh.unlock();
  for (int i = 0; i < n; ++i) {
    held[i].unlock(ec);
    EXPECT_EQ(ec, errc::lock_lost);
    EXPECT_FALSE(unlock_async(wanted[i], owners[i]).get());
  }
}

// ---- 5. the pub/sub connection is killed while waiters wait -------------------------------------

TEST_F(chaos_test, pubsub_connection_killed_waiters_still_acquire) {
  fault_proxy proxy(server().port());
  client a{conf(30000ms)};          // a 30 s lease: waking on the TTL would take 30 s
  client b{conf(30000ms, &proxy)};  // the waiters' client, behind the proxy
  auto la = a.lock("s5");
  const std::string channel = "redisson_lock__channel:{s5}";
  static const char* what[] = {"unlock published while pub/sub down; route back -> all 3 waiters served",
                               "unlock after the resubscription -> all 3 waiters served",
                               "pub/sub killed 4 times, unlock -> all 3 waiters served"};
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    la.lock();
    const int n = 3;
    auto lb = b.lock("s5");
    std::vector<std::future<attempt>> waits;
    // Each waiter, once it has the lock, releases it at once to hand over to the next.
    for (int i = 0; i < n; ++i) {
      auto p = std::make_shared<std::promise<attempt>>();
      waits.push_back(p->get_future());
      const owner_id o = b.new_owner();
      lb.async_try_lock(o, 5000ms, [p, lb, o](std::error_code ec, bool got) mutable {
        attempt r{ec, got, steady::now()};
        if (got) lb.async_unlock(o, [p, r](std::error_code) { p->set_value(r); });
        else p->set_value(r);
      });
    }
    ASSERT_TRUE(eventually([&] { return subscribers_at_least(channel, 1); }));
    steady::time_point t0;
    if (round == 0) {
      // The pub/sub connection is killed and cannot come back (new connections are refused) while
      // the holder unlocks: the unlock message is lost for the waiters.
      proxy.refuse(true);
      ASSERT_GE(raw()({"CLIENT", "KILL", "TYPE", "pubsub"}).integer, 1);
      ASSERT_TRUE(eventually([&] { return !subscribers_at_least(channel, 1); }));
      // The subscription's confirmation wakes the waiters for one more try, and b may read it only
      // now, just before the end of the stream: once b tries to come back it has read both, and a
      // command behind those tries on b's connection answers after them. The unlock comes later.
      ASSERT_TRUE(eventually([&] { return proxy.accepted() > 2; }));
      b.command({"PING"});
      la.unlock();
      const auto tries = proxy.accepted();
      ASSERT_TRUE(eventually([&] { return proxy.accepted() > tries; }));  // still trying to come back
      for (auto& w : waits) EXPECT_EQ(w.wait_for(0ms), std::future_status::timeout);
      t0 = steady::now();
      proxy.refuse(false);
    } else if (round == 1) {
      // Killed; the client resubscribes by itself before the unlock comes.
      ASSERT_GE(raw()({"CLIENT", "KILL", "TYPE", "pubsub"}).integer, 1);
      ASSERT_TRUE(eventually([&] { return subscribers_at_least(channel, 1); }));
      t0 = steady::now();
      la.unlock();
    } else {
      // Killed again and again while waiting.
      for (int k = 0; k < 4; ++k) {
        ASSERT_TRUE(eventually([&] { return subscribers_at_least(channel, 1); }));
        ASSERT_GE(raw()({"CLIENT", "KILL", "TYPE", "pubsub"}).integer, 1);
      }
      t0 = steady::now();
      la.unlock();
    }
    steady::time_point last = t0;
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(waits[i].wait_for(6000ms), std::future_status::ready) << "waiter " << i << " hung past its wait";
      auto r = waits[i].get();
      EXPECT_FALSE(r.ec) << r.ec.message();
      EXPECT_TRUE(r.got) << "waiter " << i << " did not get the lock";
      last = std::max(last, r.at);
    }
    EXPECT_LT(ms_between(t0, last), 3000);
    report("5 pub/sub killed", what[round],
           std::chrono::duration_cast<std::chrono::microseconds>(last - t0).count(), "us");
  }
  EXPECT_EQ(raw()({"EXISTS", "s5"}).integer, 0);
}

// ---- 6. renewal replies lost mid-flight --------------------------------------------------------

TEST_F(chaos_test, lost_renewal_replies_cause_no_false_loss) {
  const ms lease = 600ms;
  fault_proxy proxy(server().port());
  client c{conf(lease, &proxy, 300ms)};
  auto l = c.lock("s6");
  lost_probe lost;
  lost.attach(l);
  l.lock();
  const std::string f = field(c, this_thread_owner());
  long long min_ttl = 1 << 30;
  auto sample = [&] {
    auto ttl = raw()({"PTTL", "s6"}).integer;
    min_ttl = std::min(min_ttl, ttl);
    return ttl;
  };
  // a) The reply of a renewal that ran is discarded and the connection reset, ten times.
  long long worst_gap = 0;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE(round);
    const auto connects = c.stats().connects;
    const auto lost_before = proxy.replies_lost();
    const auto renewed = c.stats().renewed_locks;
    proxy.lose_next_reply();
    ASSERT_TRUE(proxy.wait_for([&] { return proxy.replies_lost() > lost_before; }, 2000ms));
    const auto t_drop = steady::now();
    ASSERT_TRUE(eventually([&] { return c.stats().connects > connects; }, 2000ms));
    ASSERT_TRUE(eventually([&] { return c.stats().renewed_locks > renewed; }, 2000ms));
    worst_gap = std::max(worst_gap, ms_since(t_drop));
    ASSERT_GT(sample(), 0);
    ASSERT_FALSE(lost.fired()) << "false loss: " << reason_name(lost.info().reason);
  }
  report("6 renewal reply lost", "reply lost -> next renewal through (worst of 10)", worst_gap);
  // b) Connections reset at random moments while renewals are on the wire (20 ms each way).
  proxy.set_latency(20ms);
  std::minstd_rand rng(42);
  const auto drops_before = proxy.resets();
  const auto t_end = steady::now() + 3000ms;
  while (steady::now() < t_end) {
    std::this_thread::sleep_for(ms(150 + rng() % 150));  // the pace of the fault, not a synchronisation
    proxy.drop_all();
    sample();
  }
  ASSERT_TRUE(eventually([&] { return sample() > 0 && l.valid(); }, 1000ms));
  EXPECT_FALSE(lost.fired()) << "false loss: " << reason_name(lost.info().reason);
  EXPECT_TRUE(l.valid());
  EXPECT_GT(min_ttl, 0);
  EXPECT_EQ(raw()({"HGET", "s6", f}).str, "1");  // renewals never touch the count
  report("6 renewal reply lost", "resets during 3 s of renewals (no false loss)",
         static_cast<long long>(proxy.resets() - drops_before), "resets");
  report("6 renewal reply lost", "lowest server TTL seen (lease 600)", min_ttl);
  proxy.set_latency(0ms);
  l.unlock();
  EXPECT_EQ(raw()({"EXISTS", "s6"}).integer, 0);
}

// ---- 7. unlock replies lost ---------------------------------------------------------------------

TEST_F(chaos_test, lost_unlock_reply_releases_exactly_once) {
  fault_proxy proxy(server().port());
  client c{conf(30000ms, &proxy, 300ms)};
  auto l = c.lock("s7");
  const owner_id me = this_thread_owner();
  const std::string f = field(c, me);
  std::error_code ec;

  // a) The release ran (2 -> 1), its reply was lost: the retry must not decrement again.
  l.lock();
  l.lock();
  proxy.lose_next_reply();
  auto t0 = steady::now();
  l.unlock(ec);
  report("7 unlock reply lost", "unlock with its reply lost returned after", ms_since(t0));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(proxy.replies_lost(), 1u);
  EXPECT_EQ(raw()({"HGET", "s7", f}).str, "1");
  EXPECT_EQ(l.hold_count(), 1);
  EXPECT_TRUE(l.valid());
  // The last level, reply lost: the retry finds nothing and knows the first attempt freed it.
  proxy.lose_next_reply();
  l.unlock(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(proxy.replies_lost(), 2u);
  EXPECT_EQ(raw()({"EXISTS", "s7"}).integer, 0);
  l.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);

  // b) The release never reached the server (stalled, then the connection reset): the retry
  //    decrements, once.
  l.lock();
  l.lock();
  proxy.stall(true);
  const auto up = proxy.bytes_up();
  auto pending = unlock_async(l, me);
  ASSERT_TRUE(proxy.wait_for([&] { return proxy.bytes_up() > up; }, 1000ms));
  proxy.drop_all();
  proxy.stall(false);
  ec = pending.get();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(raw()({"HGET", "s7", f}).str, "1");
  EXPECT_TRUE(l.valid());
  l.unlock();
  EXPECT_EQ(raw()({"EXISTS", "s7"}).integer, 0);
}

TEST_F(chaos_test, unlock_retried_after_request_timeout_releases_exactly_once) {
  fault_proxy proxy(server().port());
  client c{conf(30000ms, &proxy, 200ms)};
  auto l = c.lock("s7t");
  const std::string f = field(c, this_thread_owner());
  std::error_code ec;
  auto count = [&] { return raw()({"HGET", "s7t", f}); };

  // a) The release script is not cached yet: the late EVALSHA meets NOSCRIPT, and as its request
  //    already timed out, nobody resends it as EVAL: the release never runs. The retry decrements.
  l.lock();
  l.lock();  // count 2
  proxy.stall(true);
  l.unlock(ec);
  ASSERT_EQ(ec, errc::request_timeout);
  const auto replies = c.stats().replies;
  proxy.stall(false);
  ASSERT_TRUE(eventually([&] { return c.stats().replies > replies; }, 2000ms));  // the late NOSCRIPT
  EXPECT_EQ(count().str, "2");
  l.unlock(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(count().str, "1");
  l.unlock(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(raw()({"EXISTS", "s7t"}).integer, 0);

  // b) Now the script is cached: the timed-out release runs late (2 -> 1). The caller cannot know
  //    whether it ran, and retries, as the library itself does after connection_lost.
  l.lock();
  l.lock();  // count 2
  proxy.stall(true);
  l.unlock(ec);
  ASSERT_EQ(ec, errc::request_timeout);
  proxy.stall(false);
  ASSERT_TRUE(eventually([&] { return count().str == "1"; }, 2000ms)) << count();
  l.unlock(ec);
  auto after = count();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(after.str, "1") << "one logical unlock must leave exactly one level";
  l.unlock(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(raw()({"EXISTS", "s7t"}).integer, 0);
}

TEST_F(chaos_test, acquisition_reply_late_leaves_no_orphaned_hold) {
  // The acquisition's reply comes after its request timed out: the script ran and granted the lock,
  // but the caller was told request_timeout. Nobody must be left holding a lock nobody knows of.
  fault_proxy proxy(server().port());
  client c{conf(30000ms, &proxy, 200ms)};
  std::vector<std::string> orphans;
  for (const char* kind : {"reentrant", "mutex"}) {
    SCOPED_TRACE(kind);
    const std::string name = std::string("s7a-") + kind;
    detail::lock_handle l = lock_of(c, kind, name);
    l.lock();  // caches the scripts
    l.unlock();
    proxy.stall(true);
    std::error_code ec;
    EXPECT_FALSE(l.try_lock(ec));
    ASSERT_EQ(ec, errc::request_timeout);
    const auto replies = c.stats().replies;
    proxy.stall(false);
    ASSERT_TRUE(eventually([&] { return c.stats().replies > replies; }, 2000ms));  // the late reply
    EXPECT_FALSE(l.valid());
    // Any clean-up the client sends goes out right behind the late reply: a PING round trip
    // through the same connection orders us after it.
    c.ping();
    auto ttl = raw()({"PTTL", name}).integer;
    if (ttl > 0) orphans.push_back(std::string(kind) + " (held " + std::to_string(ttl) + " ms more by no one)");
    if (ttl > 0) raw()({"DEL", name});
  }
  if (!orphans.empty()) {
    std::string what;
    for (auto& o : orphans) what += " " + o;
    ADD_FAILURE() << "an acquisition that failed with request_timeout ran late and left an orphaned "
                     "hold, blocking the lock for a whole lease:"
                  << what;
  }
}

// The client closes while an acquisition's reply is on its way, and the reply is a grant: close()
// lets the reply come (config::close_timeout), the acquisition ends with client_closed, and the
// grant, which nobody holds now, is given back before the connections close. Before, the close
// failed the attempt at once and the lock was held by nobody for a lease.
TEST_F(chaos_test, a_grant_that_comes_after_close_is_given_back) {
  for (const char* kind : {"reentrant", "mutex"}) {
    SCOPED_TRACE(kind);
    const std::string name = std::string("s7g-") + kind, blocker = name + "-blocker";
    fault_proxy proxy(server().port());
    auto conf = this->conf(30000ms, &proxy, 5000ms);
    conf.close_timeout = 5000ms;
    conf.health_check_interval = 0ms;
    client c{conf};
    detail::lock_handle l = lock_of(c, kind, name);
    const owner_id o = warmed_owner(c, l);
    // Another owner waits for a lock held elsewhere: close() ends it, which tells when close() ran.
    raw()({"HSET", blocker, "elsewhere:1", "1"});
    raw()({"PEXPIRE", blocker, "30000"});
    std::promise<std::error_code> blocked;
    c.lock(blocker).async_lock(c.new_owner(), [&](std::error_code ec) { blocked.set_value(ec); });
    ASSERT_TRUE(eventually([&] { return subscribers_at_least("redisson_lock__channel:{" + blocker + "}", 1); }));
    ASSERT_TRUE(eventually([&] { return c.stats().commands == c.stats().replies; }));  // it sleeps
    proxy.hold_replies(0, true);  // the command connection: the first the proxy accepted
    std::promise<std::error_code> done;
    l.async_lock(o, [&](std::error_code ec) { done.set_value(ec); });
    ASSERT_TRUE(eventually([&] { return raw()({"EXISTS", name}).integer == 1; })) << "the attempt did not run";
    std::thread closer([&] { c.close(); });
    auto b = blocked.get_future();
    ASSERT_EQ(b.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(b.get(), errc::client_closed);
    auto f = done.get_future();
    EXPECT_EQ(f.wait_for(0s), std::future_status::timeout) << "the acquisition ended before its reply came";
    proxy.hold_replies(0, false);  // the grant's reply comes after the close began
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get(), errc::client_closed);
    closer.join();
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 0) << "the grant was left held by nobody";
    raw()({"DEL", name, blocker});
  }
}

// A middlebox resets the client's side of the connection while an acquisition is on its way, and
// still delivers it (fault_proxy::reset_clients). The attempt fails with connection_lost; its undo
// goes on the new connection and runs first (it finds nothing), and the attempt runs after it. The
// late grant is found by the reads that follow such an undo and given back. Before, only a resent
// undo was followed, and the grant stayed held by nobody for a lease.
TEST_F(chaos_test, a_grant_that_runs_after_its_undo_on_a_new_connection_is_given_back) {
  for (const char* kind : {"reentrant", "mutex"}) {
    SCOPED_TRACE(kind);
    const std::string name = std::string("s7h-") + kind;
    fault_proxy proxy(server().port());
    auto conf = this->conf(30000ms, &proxy, 300ms);
    conf.health_check_interval = 0ms;
    client c{conf};
    detail::lock_handle l = lock_of(c, kind, name);
    const owner_id o = warmed_owner(c, l);
    proxy.set_latency(600ms, 0ms);  // the attempt is on its way for 600 ms
    const auto up = proxy.bytes_up();
    std::promise<std::error_code> done;
    l.async_try_lock(o, 0ms, [&](std::error_code ec, bool) { done.set_value(ec); });
    ASSERT_TRUE(eventually([&] { return proxy.bytes_up() > up; }, 2000ms));
    proxy.reset_clients();
    proxy.set_latency(0ms, 0ms);  // the undo, on the new connection, arrives first
    auto f = done.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get(), errc::connection_lost);
    // The attempt runs late and takes the lock for nobody ...
    ASSERT_TRUE(eventually([&] { return raw()({"EXISTS", name}).integer == 1; }, 3000ms))
        << "the late attempt did not run (the proxy did not deliver it)";
    auto t0 = steady::now();
    // ... until a read after the undo finds it (at about 1, 3, 7 request timeouts after the undo).
    EXPECT_TRUE(eventually([&] { return raw()({"EXISTS", name}).integer == 0; }, 5000ms))
        << "the late grant was left held by nobody";
    std::cout << "[chaos] 7h " << kind << ": late grant given back " << ms_since(t0) << " ms after it ran\n";
    EXPECT_FALSE(l.valid(o));
    raw()({"DEL", name});
  }
}

// ---- 8. the script cache is flushed while locks are held ----------------------------------------

// An acquisition cancelled while its grant is on its way is undone. Here the server reaches its
// maxmemory (noeviction) between the grant and the undo: the undo takes the grant back all the same,
// as a release does (Redis 7's allow-oom). Before, the undo of a re-entry went without the flag and
// failed with OOM (its first write is HINCRBY), and the lock kept a level nobody held: the owner's
// last unlock left it held by nobody for a lease.
TEST_F(chaos_test, a_cancelled_grant_is_undone_out_of_memory) {
  raw()({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  for (const char* kind : {"reentrant", "mutex", "fair", "write", "read"}) {
    SCOPED_TRACE(kind);
    const std::string name = std::string("s7oom-") + kind, k = kind;
    fault_proxy proxy(server().port());
    auto conf = this->conf(30000ms, &proxy, 5000ms);
    conf.health_check_interval = 0ms;
    client c{conf};
    detail::lock_handle l = lock_of(c, kind, name);
    const owner_id o = warmed_owner(c, l);  // its release learns whether the server takes allow-oom
    const bool reentrant = k != "mutex";
    if (reentrant) l.async_lock(o, asio::use_future).get();  // the cancelled grant is a re-entry
    proxy.hold_replies(0, true);  // the command connection: the first the proxy accepted
    asio::cancellation_signal sig;
    std::promise<std::error_code> done;
    const auto sent = c.stats().commands;
    l.async_lock(o, asio::bind_cancellation_slot(sig.slot(), [&](std::error_code ec) { done.set_value(ec); }));
    ASSERT_TRUE(eventually([&] { return c.stats().commands > sent; })) << "the attempt was not sent";
    ASSERT_TRUE(eventually([&] { return raw()({"EXISTS", name}).integer == 1; }));
    raw()({"SET", "filler", std::string(64 * 1024, 'x')});
    raw()({"CONFIG", "SET", "maxmemory", "1"});
    ASSERT_EQ(raw().command({"SET", "probe", "x"}).str.substr(0, 3), "OOM");
    asio::post(c.get_executor(), [&] { sig.emit(asio::cancellation_type::terminal); });
    auto f = done.get_future();
    EXPECT_EQ(f.wait_for(200ms), std::future_status::timeout) << "it ended before its attempt answered";
    proxy.hold_replies(0, false);
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get(), errc::operation_aborted);
    if (reentrant) {
      std::error_code ec;
      l.async_unlock(o, asio::redirect_error(asio::use_future, ec)).get();
      EXPECT_FALSE(ec) << ec.message() << ": " << last_error_text();
    }
    EXPECT_TRUE(eventually([&] { return raw()({"EXISTS", name}).integer == 0; }))
        << "the lock is left held by nobody (the undo failed out of memory)";
    raw()({"CONFIG", "SET", "maxmemory", "0"});
    raw()({"DEL", "filler", name});
  }
}

TEST_F(chaos_test, script_flush_while_holding_keeps_renewals_and_unlocks_working) {
  client c{conf(300ms)};
  auto l = c.lock("s8");
  auto m = c.mutex("s8m");
  lost_probe lost_l, lost_m;
  lost_l.attach(l);
  lost_m.attach(m);
  l.lock();
  m.lock();
  const std::string f = field(c, this_thread_owner());
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(raw()({"SCRIPT", "FLUSH"}).is_ok());
    const auto renewed = c.stats().renewed_locks;
    const auto t0 = steady::now();
    ASSERT_TRUE(eventually([&] { return c.stats().renewed_locks >= renewed + 2; }, 2000ms));
    if (round == 0) report("8 SCRIPT FLUSH", "flush -> both locks renewed again", ms_since(t0));
  }
  EXPECT_FALSE(lost_l.fired());
  EXPECT_FALSE(lost_m.fired());
  EXPECT_TRUE(l.valid());
  EXPECT_TRUE(m.valid());
  raw()({"SCRIPT", "FLUSH"});
  l.lock();  // acquisition after a flush
  EXPECT_EQ(raw()({"HGET", "s8", f}).str, "2");
  raw()({"SCRIPT", "FLUSH"});
  l.unlock();
  EXPECT_EQ(raw()({"HGET", "s8", f}).str, "1");
  raw()({"SCRIPT", "FLUSH"});
  l.unlock();
  EXPECT_EQ(raw()({"EXISTS", "s8"}).integer, 0);
  raw()({"SCRIPT", "FLUSH"});
  m.unlock();
  EXPECT_EQ(raw()({"EXISTS", "s8m"}).integer, 0);
  EXPECT_FALSE(lost_l.fired());
  EXPECT_FALSE(lost_m.fired());
}

}  // namespace
}  // namespace redlease::test
