// SPDX-License-Identifier: MIT
// The client cannot be stopped by its users' code or by a bad value in Redis (issue "Hardening"),
// and the teardown promise of every callback it takes. Each test fails on the code before the fix.
#include <gtest/gtest.h>

#include <asio/bind_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"
#include "redlease/redlease.hpp"

namespace redlease::test {
namespace {

class hardening : public lock_fixture {
 protected:
  config cfg_with(error_log& log) {
    auto c = cfg();
    c.on_error = log.hook();
    return c;
  }

  // Publishes to `channel`, which `c` subscribes to first, and waits until `c` has delivered it.
  // Its pub/sub connection delivers in order: whatever was published before has been handled.
  void await_marker(client& c, const std::string& channel) {
    std::promise<void> seen;
    std::atomic<bool> once{false};
    auto marker = c.subscribe(channel, [&](std::string_view, std::string_view) {
      if (!once.exchange(true)) seen.set_value();
    });
    ASSERT_EQ(raw()({"PUBLISH", channel, "m"}).integer, 1);
    ASSERT_EQ(seen.get_future().wait_for(5s), std::future_status::ready);
  }
};

// 1. One bad value in Redis: a typed error naming the key; everything else keeps working.
TEST_F(hardening, BadStockValueIsATypedErrorAndTheClientLives) {
  client c(cfg());
  auto s = c.stock("sku:bad", 4);
  s.init(40);
  raw()({"SET", "sku:bad:2", "not-a-number"});
  try {
    (void)s.remaining();
    FAIL() << "remaining() accepted a non-number";
  } catch (const redlease::error& e) {
    EXPECT_EQ(e.code(), errc::bad_reply);
    EXPECT_NE(std::string(e.what()).find("sku:bad:2"), std::string::npos) << e.what();
  }
  std::error_code ec;
  EXPECT_EQ(s.remaining(ec), 0);
  EXPECT_EQ(ec, errc::bad_reply);
  // The client is alive: commands, locks, and no connection was lost over it.
  c.ping();
  auto l = c.lock("after-bad-value");
  EXPECT_TRUE(l.try_lock());
  l.unlock();
  EXPECT_EQ(c.stats().connection_losses, 0u);
}

// 1b. An owner whose hold count someone overwrote still lets go: the release takes the garbage as
// the last level and frees the lock. Before, every unlock failed with a Lua error while the
// watchdog kept the lock alive: nobody could have it until the owner's process ended.
TEST_F(hardening, AnOverwrittenHoldCountIsReleasedAsTheLastLevel) {
  client c(cfg(1500ms)), other(cfg());
  auto own_field = [&](const std::string& name) {
    for (auto& f : raw()({"HKEYS", name}).elements)
      if (f.str != "mode") return f.str;
    return std::string();
  };
  auto check = [&](auto&& mine, auto&& theirs, const std::string& name, const std::string& garbage, bool twice) {
    SCOPED_TRACE(name + " <- " + garbage);
    std::promise<lost_info> lost;
    mine.on_lost([&lost](const lost_info& i) { lost.set_value(i); });
    mine.lock();
    if (twice) mine.lock();
    raw()({"HSET", name, own_field(name), garbage});
    std::error_code ec;
    if (!twice) {
      // Re-entering cannot count on: the server's own words, and the hold is left as it was.
      EXPECT_FALSE(mine.try_lock(ec));
      EXPECT_EQ(ec, errc::server_error) << ec.message();
      EXPECT_NE(last_error_text().find("not an integer"), std::string::npos) << last_error_text();
      EXPECT_TRUE(mine.valid());
      ec.clear();
    }
    mine.unlock(ec);
    EXPECT_FALSE(ec) << ec.message() << " " << last_error_text();
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
    EXPECT_TRUE(theirs.try_lock());
    theirs.unlock();
    if (twice) {
      // The level the garbage took with it: the owner is told at once, and by its next unlock.
      auto f = lost.get_future();
      ASSERT_EQ(f.wait_for(1000ms), std::future_status::ready);
      EXPECT_EQ(f.get().reason, lost_reason::deleted);
      EXPECT_FALSE(mine.valid());
      mine.unlock(ec);
      EXPECT_EQ(ec, errc::lock_lost) << ec.message();
    }
    mine.on_lost(nullptr);
  };
  check(c.lock("hc:re"), other.lock("hc:re"), "hc:re", "junk", false);
  check(c.lock("hc:re2"), other.lock("hc:re2"), "hc:re2", "1.5", true);
  check(c.fair_lock("hc:fair"), other.fair_lock("hc:fair"), "hc:fair", "junk", false);
  check(c.write_lock("hc:w"), other.write_lock("hc:w"), "hc:w", "05", true);
  check(c.read_lock("hc:r"), other.write_lock("hc:r"), "hc:r", "junk", false);
  // A count HINCRBY can take is still decremented, not freed.
  auto l = c.lock("hc:ok");
  l.lock();
  l.lock();
  l.unlock();
  EXPECT_EQ(raw()({"HGET", "hc:ok", own_field("hc:ok")}).str, "1");
  l.unlock();
}

// 2. A throwing subscribe callback does not deafen the client's other channels.
TEST_F(hardening, ThrowingSubscribeCallbackDoesNotDeafenOtherChannels) {
  error_log log;
  client c(cfg_with(log));
  auto bad = c.subscribe("ch:bad", [](std::string_view, std::string_view) { throw std::runtime_error("boom"); });
  std::promise<std::string> got;
  std::atomic<bool> once{false};
  auto good = c.subscribe("ch:good", [&](std::string_view, std::string_view p) {
    if (!once.exchange(true)) got.set_value(std::string(p));
  });
  raw()({"PUBLISH", "ch:bad", "x"});
  auto t0 = steady::now();
  raw()({"PUBLISH", "ch:good", "hello"});
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(1s), std::future_status::ready) << "the other channel went deaf";
  EXPECT_EQ(f.get(), "hello");
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_TRUE(eventually([&] { return log.has("subscribe callback: exception: boom"); }));
}

// 3. The exception rule: caught at the boundary, reported through on_error, the I/O thread lives.
TEST_F(hardening, ThrowingCompletionHandlerIsReportedAndTheClientLives) {
  error_log log;
  client c(cfg_with(log));
  c.async_command({"PING"}, [](std::error_code, reply) { throw std::runtime_error("handler threw"); });
  EXPECT_TRUE(eventually([&] { return log.has("completion handler: exception: handler threw"); }));
  c.ping();
  auto l = c.lock("after-throw");
  EXPECT_TRUE(l.try_lock());
  l.unlock();
}

// After close() a completion without an executor of its own runs on asio::system_executor, whose
// thread calls std::terminate on an exception: a handler that throws on error (client_closed) used
// to end the process there (exit 134), though it is reported and survived on the I/O thread.
TEST_F(hardening, a_completion_handler_that_throws_after_close_does_not_end_the_process) {
  client c(cfg());
  auto l = c.lock("throw-after-close");
  auto owner = c.new_owner();
  c.close();
  std::atomic<bool> ran{false};
  std::error_code seen;
  l.async_unlock(owner, [&](std::error_code ec) {
    seen = ec;
    ran = true;
    throw std::runtime_error("handler saw " + ec.message());
  });
  ASSERT_TRUE(eventually([&] { return ran.load(); }));
  EXPECT_EQ(seen, make_error_code(errc::client_closed));
  // A std::terminate would come right after the throw.
  std::this_thread::sleep_for(100ms);
  SUCCEED();
}

// close() is idempotent and callable from any thread: two threads closing at once used to both
// join the I/O thread, and the second hung in pthread_join on a thread the first had reaped (in
// the first of 50 rounds, 3 runs of 3).
TEST_F(hardening, two_threads_closing_one_client_at_once_both_return) {
  for (int round = 0; round < 30; ++round) {
    SCOPED_TRACE(round);
    client c(cfg());
    c.ping();
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    auto closer = [&] {
      ++ready;
      while (!go.load()) std::this_thread::yield();
      c.close();
    };
    std::thread a(closer), b(closer);
    while (ready.load() < 2) std::this_thread::yield();
    go = true;
    a.join();
    b.join();
    std::error_code ec;
    c.ping(ec);
    EXPECT_EQ(ec, make_error_code(errc::client_closed));
  }
}

TEST_F(hardening, ThrowingOnLostIsReportedAndTheWatchdogGoesOn) {
  error_log log;
  auto conf = cfg(300ms);  // renewals every 100 ms: a watchdog that stopped shows within the test
  conf.on_error = log.hook();
  client c(conf);
  auto l = c.lock("lost-throws");
  auto other = c.lock("keeps-going");
  l.on_lost([](const lost_info&) { throw std::runtime_error("on_lost threw"); });
  auto owner = c.new_owner();
  ASSERT_TRUE(l.async_try_lock(owner, 0ms, asio::use_future).get());
  ASSERT_TRUE(other.async_try_lock(owner, 0ms, asio::use_future).get());
  EXPECT_TRUE(c.lock("lost-throws").force_unlock());  // this client's hold is told at once
  EXPECT_TRUE(eventually([&] { return log.has("on_lost callback: exception: on_lost threw"); }));
  EXPECT_FALSE(l.valid(owner));
  const auto renewed = c.stats().renewed_locks;
  EXPECT_TRUE(eventually([&] { return c.stats().renewed_locks >= renewed + 3; }, 2000ms)) << "the watchdog stopped";
  EXPECT_TRUE(other.valid(owner));
  EXPECT_GT(raw()({"PTTL", "keeps-going"}).integer, 0);
  other.async_unlock(owner, asio::use_future).get();
}

// 4. The local view is right on the I/O thread, inside the completion of the acquisition.
TEST_F(hardening, LocalViewIsRightInsideTheCompletionHandler) {
  client c(cfg());
  auto l = c.lock("view-in-handler");
  auto owner = c.new_owner();
  std::promise<std::tuple<bool, bool, bool>> seen;
  l.async_try_lock(owner, 0ms, [&](std::error_code ec, bool got) {
    auto token = l.lost_token(owner);
    seen.set_value({!ec && got, l.valid(owner), token.stop_possible() && !token.stop_requested()});
  });
  auto [got, valid, token_ok] = seen.get_future().get();
  EXPECT_TRUE(got);
  EXPECT_TRUE(valid);
  EXPECT_TRUE(token_ok);
  EXPECT_GT(l.valid_until(owner), std::chrono::steady_clock::now());
  l.async_unlock(owner, asio::use_future).get();
  EXPECT_FALSE(l.valid(owner));
}

// 5. No handler runs inside its initiating function; completions go to the associated executor.
TEST_F(hardening, HandlerNeverRunsInsideItsInitiatingFunction) {
  asio::io_context user;
  auto guard = asio::make_work_guard(user);
  std::thread runner([&] { user.run(); });
  auto strand = asio::make_strand(user);

  client c(cfg());
  auto l = c.lock("initiation");
  auto owner = c.new_owner();

  // "Inside" means on the calling thread before the initiating function returned: a handler that
  // runs on another thread meanwhile (the strand's, the system executor's) is not inline.
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> initiating{true};
  auto inline_run = [&] { return std::this_thread::get_id() == caller && initiating.load(); };
  std::promise<std::pair<bool, bool>> p1;
  l.async_try_lock(owner, -1ms, asio::bind_executor(strand, [&](std::error_code ec, bool) {
                     p1.set_value({inline_run(), strand.running_in_this_thread() && ec == errc::invalid_argument});
                   }));
  initiating = false;
  auto r1 = p1.get_future().get();
  EXPECT_FALSE(r1.first) << "the handler ran inside async_try_lock";
  EXPECT_TRUE(r1.second);

  // A closed client: posted to the strand, not run inside async_lock.
  c.close();
  initiating = true;
  std::promise<std::pair<bool, bool>> p3;
  l.async_lock(owner, asio::bind_executor(strand, [&](std::error_code ec) {
                 p3.set_value({inline_run(), strand.running_in_this_thread() && ec == errc::client_closed});
               }));
  initiating = false;
  auto f3 = p3.get_future();
  ASSERT_EQ(f3.wait_for(5s), std::future_status::ready);
  auto r3 = f3.get();
  EXPECT_FALSE(r3.first) << "the handler ran inside async_lock";
  EXPECT_TRUE(r3.second) << "not on the strand, or not client_closed";

  // A closed client and a handler without an executor: not inline either (Asio's system executor).
  initiating = true;
  std::promise<bool> p4;
  l.async_lock(owner, [&](std::error_code) { p4.set_value(inline_run()); });
  initiating = false;
  EXPECT_FALSE(p4.get_future().get());

  guard.reset();
  runner.join();
}

TEST_F(hardening, HandlerInitiatedOnTheIoThreadIsNotRunInline) {
  client c(cfg());
  auto l = c.lock("initiation-io");
  auto owner = c.new_owner();
  auto inside = std::make_shared<std::atomic<bool>>(false);
  std::promise<bool> p;
  c.async_command({"PING"}, [&, inside](std::error_code, reply) {
    *inside = true;
    l.async_try_lock(owner, -1ms, [&p, inside](std::error_code, bool) { p.set_value(inside->load()); });
    *inside = false;
  });
  EXPECT_FALSE(p.get_future().get()) << "the handler ran inside async_try_lock, on the I/O thread";
}

// Command connection liveness: a connection whose requests time out with nothing received is
// dropped and re-established, and counted.
TEST_F(hardening, StalledCommandConnectionIsDroppedAndReconnected) {
  fault_proxy proxy(server().port());
  auto c = cfg();
  c.host = "127.0.0.1";
  c.port = proxy.port();
  c.request_timeout = 300ms;
  c.on_error = [](const background_error&) {};
  c.sync_lane = false;  // the lane, once open, would carry the PING: its own limit is lane_unit_test's
  client cl(c);
  cl.ping();
  proxy.stall(true);
  std::error_code ec;
  cl.command({"PING"}, ec);
  EXPECT_EQ(ec, errc::request_timeout);
  EXPECT_EQ(ec, std::errc::timed_out);
  EXPECT_TRUE(eventually([&] { return cl.stats().stalled_drops >= 1; }, 3000ms));
  proxy.stall(false);
  proxy.drop_all();
  EXPECT_TRUE(eventually([&] {
    std::error_code e;
    cl.command({"PING"}, e);
    return !e;
  }, 5000ms));
  EXPECT_GE(cl.stats().connects, 2u);
}

// ---- the teardown promise ------------------------------------------------------------------------

TEST_F(hardening, SubscriptionResetWaitsForARunningCallback) {
  client c(cfg());
  auto inbox = std::make_unique<std::vector<std::string>>();
  std::atomic<bool> entered{false}, finished{false};
  auto* box = inbox.get();
  auto sub = c.subscribe("teardown", [&, box](std::string_view, std::string_view p) {
    entered = true;
    std::this_thread::sleep_for(150ms);
    box->push_back(std::string(p));
    finished = true;
  });
  raw()({"PUBLISH", "teardown", "m1"});
  ASSERT_TRUE(eventually([&] { return entered.load(); }));
  sub.reset();
  EXPECT_TRUE(finished.load()) << "reset() returned while the callback was running";
  inbox.reset();  // the callback's target dies: the callback must never run again
  raw()({"PUBLISH", "teardown", "m2"});
  // A late callback would touch freed memory (ASan/TSan). m2 came in on the pub/sub connection
  // before the marker, which is delivered after it: by then m2 was dispatched or dropped.
  await_marker(c, "teardown:marker");
}

TEST_F(hardening, SubscriptionResetFromInsideItsCallbackNeitherWaitsNorRunsAgain) {
  client c(cfg());
  std::atomic<int> calls{0};
  subscription sub;
  std::promise<void> done;
  sub = c.subscribe("self-reset", [&](std::string_view, std::string_view) {
    if (++calls == 1) {
      sub.reset();
      done.set_value();
    }
  });
  raw()({"PUBLISH", "self-reset", "1"});
  ASSERT_EQ(done.get_future().wait_for(2s), std::future_status::ready) << "deadlocked";
  raw()({"PUBLISH", "self-reset", "2"});
  await_marker(c, "self-reset:marker");  // delivered after "2"
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(hardening, HandleDestroyedWhileOnLostRunsWaitsForIt) {
  client c(cfg());
  auto l = std::make_unique<reentrant_lock>(c.lock("teardown-lost"));
  auto target = std::make_unique<int>(0);
  std::atomic<bool> entered{false}, finished{false};
  int* t = target.get();
  l->on_lost([&, t](const lost_info&) {
    entered = true;
    std::this_thread::sleep_for(150ms);
    *t = 1;
    finished = true;
  });
  auto owner = c.new_owner();
  ASSERT_TRUE(l->async_try_lock(owner, 0ms, asio::use_future).get());
  std::thread forcer([&] { c.lock("teardown-lost").force_unlock(); });
  ASSERT_TRUE(eventually([&] { return entered.load(); }));
  l.reset();  // the handle's last copy: its callback is cleared, waiting for the running call
  EXPECT_TRUE(finished.load()) << "the handle died while its on_lost was running";
  target.reset();
  forcer.join();
}

TEST_F(hardening, ClientClosedFromInsideACallback) {
  auto c = std::make_unique<client>(cfg());
  auto l = c->lock("close-inside");
  std::promise<void> closed;
  client* raw_c = c.get();
  l.on_lost([&, raw_c](const lost_info&) {
    raw_c->close();
    closed.set_value();
  });
  auto owner = c->new_owner();
  ASSERT_TRUE(l.async_try_lock(owner, 0ms, asio::use_future).get());
  l.async_force_unlock([](std::error_code, bool) {});
  ASSERT_EQ(closed.get_future().wait_for(5s), std::future_status::ready);
  std::error_code ec;
  l.try_lock(0ms, ec);
  EXPECT_EQ(ec, errc::client_closed);
  c.reset();  // joins the I/O thread; must neither hang nor crash
}

// The client's last reference dropped on its own I/O thread, inside a completion handler (the
// thread then detaches and runs what is left in its queue), while a timer of the lock engine is
// armed: the linger of a fair waiter's channel. close() cancels the timer, and its handler runs
// after the engine is freed. Before, it wrote a member of the freed engine first
// (heap-use-after-free under ASan).
TEST_F(hardening, ClientDroppedOnItsOwnThreadLeavesNoTimerHandlerBehind) {
  client other(cfg());
  auto holder = other.fair_lock("drop-linger");
  holder.lock();
  auto c = std::make_unique<client>(cfg());
  auto l = std::make_unique<fair_lock>(c->fair_lock("drop-linger"));
  auto owner = c->new_owner();
  const std::string channel = "redisson_lock__channel:{drop-linger}:" + c->id() + ":" + std::to_string(owner);
  std::promise<std::pair<std::error_code, bool>> done;
  l->async_try_lock(owner, 10s, [&](std::error_code ec, bool got) {
    l.reset();
    c.reset();  // the last reference: ~client_impl runs here, on the client's I/O thread
    done.set_value({ec, got});
  });
  ASSERT_TRUE(eventually([&] {
    auto r = raw()({"PUBSUB", "NUMSUB", channel});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  }));
  holder.unlock();  // hands the lock to the waiter, whose channel then lingers
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  auto [ec, got] = f.get();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(got);
  // The detached thread cannot be joined: give it time to run the handlers left in its queue.
  std::this_thread::sleep_for(300ms);
}

// The client's last reference dropped inside on_lost, or inside a stop callback of lost_token (a
// worker that tears itself down when it loses its lock). The engine went on using itself after the
// user code returned: heap-use-after-free under ASan, from the watchdog's timer (a fixed lease
// that ran out), a renewal that found the key gone, and a forced unlock's reply; an unlock that
// finds the key gone reaches on_lost too.
TEST_F(hardening, ClientDroppedInsideOnLostOrAStopCallback) {
  enum how { lease_runs_out, renewal_finds_it_gone, forced_unlock, stop_callback, unlock_finds_it_gone };
  for (how h : {lease_runs_out, renewal_finds_it_gone, forced_unlock, stop_callback, unlock_finds_it_gone}) {
    SCOPED_TRACE(static_cast<int>(h));
    auto c = std::make_unique<client>(cfg(600ms));  // renewals every 200 ms
    auto l = std::make_unique<reentrant_lock>(c->lock("drop-in-lost"));
    std::promise<void> fired;
    std::function<void()> drop = [&] {
      l.reset();
      c.reset();  // the last reference: ~client_impl runs here, on the client's I/O thread
      fired.set_value();
    };
    if (h != stop_callback) l->on_lost([&](const lost_info&) { drop(); });
    auto owner = c->new_owner();
    if (h == lease_runs_out) {
      ASSERT_TRUE(l->async_try_lock(owner, 0ms, 300ms, asio::use_future).get());
    } else if (h == unlock_finds_it_gone) {
      ASSERT_TRUE(l->async_try_lock(owner, 0ms, 60s, asio::use_future).get());  // no renewal
    } else {
      ASSERT_TRUE(l->async_try_lock(owner, 0ms, asio::use_future).get());
    }
    std::optional<std::stop_callback<std::function<void()>>> on_stop;
    if (h == stop_callback) on_stop.emplace(l->lost_token(owner), drop);
    if (h == renewal_finds_it_gone || h == stop_callback) raw()({"DEL", "drop-in-lost"});
    if (h == forced_unlock) l->async_force_unlock([](std::error_code, bool) {});
    if (h == unlock_finds_it_gone) {
      raw()({"DEL", "drop-in-lost"});
      l->async_unlock(owner, [](std::error_code) {});
    }
    ASSERT_EQ(fired.get_future().wait_for(5s), std::future_status::ready);
    // The detached thread cannot be joined: give it time to run the handlers left in its queue.
    std::this_thread::sleep_for(300ms);
  }
}

}  // namespace
}  // namespace redlease::test
