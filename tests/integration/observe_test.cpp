// SPDX-License-Identifier: MIT
// What a client tells about its locks, against real redis-server: the lock metrics of
// client::stats() (acquisitions by kind and outcome, wait, hold and hand-off times, losses by cause,
// wake-ups, NOSCRIPT fallbacks), config::on_event and its exception barrier, and config::max_hold.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>

#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

std::uint64_t outcome(const client_stats& s, lock_kind k, acquire_outcome o) {
  return s.locks.acquisitions[static_cast<std::size_t>(k)][static_cast<std::size_t>(o)];
}

class observe_test : public lock_fixture {};

TEST_F(observe_test, acquisitions_are_counted_by_kind_and_outcome) {
  client c{cfg()};
  client other{cfg()};
  auto l = c.lock("obs:lock");
  l.lock();
  auto m = c.mutex("obs:mutex");
  m.lock();
  std::error_code ec;
  m.lock(ec);  // a mutex is not re-entered
  EXPECT_EQ(ec, errc::would_deadlock);
  auto busy = other.lock("obs:lock");
  std::thread([&] { EXPECT_FALSE(busy.try_lock(50ms)); }).join();
  asio::cancellation_signal cancel;
  std::promise<std::error_code> cancelled;
  busy.async_lock(other.new_owner(), asio::bind_cancellation_slot(cancel.slot(), [&](std::error_code e) {
                    cancelled.set_value(e);
                  }));
  std::this_thread::sleep_for(50ms);
  cancel.emit(asio::cancellation_type::terminal);
  EXPECT_EQ(cancelled.get_future().get(), errc::operation_aborted);
  auto s = c.semaphore("obs:sem");
  ASSERT_TRUE(s.try_set_permits(1));
  EXPECT_TRUE(s.try_acquire(1));
  const auto mine = c.stats();
  EXPECT_EQ(outcome(mine, lock_kind::reentrant, acquire_outcome::granted), 1u);
  EXPECT_EQ(outcome(mine, lock_kind::mutex, acquire_outcome::granted), 1u);
  EXPECT_EQ(outcome(mine, lock_kind::mutex, acquire_outcome::refused), 1u);
  EXPECT_EQ(outcome(mine, lock_kind::semaphore, acquire_outcome::granted), 1u);
  EXPECT_EQ(mine.locks.wait_seconds.count, 3u);  // the grants
  const auto theirs = other.stats();
  EXPECT_EQ(outcome(theirs, lock_kind::reentrant, acquire_outcome::timed_out), 1u);
  EXPECT_EQ(outcome(theirs, lock_kind::reentrant, acquire_outcome::cancelled), 1u);
  EXPECT_EQ(theirs.locks.wait_seconds.count, 0u);
  // A hold's time is observed when it is freed.
  std::this_thread::sleep_for(20ms);
  l.unlock();
  const auto after = c.stats();
  EXPECT_EQ(after.locks.hold_seconds.count, 1u);
  EXPECT_GE(after.locks.hold_seconds.sum_seconds, 0.02);
  std::uint64_t in_buckets = 0;
  for (auto n : after.locks.hold_seconds.counts) in_buckets += n;
  EXPECT_EQ(in_buckets, 1u);
  m.unlock();
}

// A waiter woken by the unlock's message: counted as a wake-up, and its hand-off timed.
TEST_F(observe_test, a_waiter_woken_by_an_unlock_counts_a_wakeup_and_a_handoff) {
  client a{cfg()};
  client b{cfg()};
  auto la = a.lock("obs:handoff");
  la.lock();
  auto got = std::async(std::launch::async, [&] {
    auto lb = b.lock("obs:handoff");
    lb.lock();
    lb.unlock();
  });
  ASSERT_TRUE(eventually([&] { return raw()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{obs:handoff}"}).elements[1].integer == 1; }));
  la.unlock();
  got.get();
  const auto s = b.stats();
  EXPECT_GE(s.locks.wakeups, 1u);
  EXPECT_EQ(s.locks.handoff_seconds.count, 1u);
  EXPECT_LT(s.locks.handoff_seconds.sum_seconds, 2.0);
}

// Losses by cause, on_event's story of a hold (acquired, renewal failures, lost), and an exception
// in on_event reported through on_error, affecting nothing else.
TEST_F(observe_test, on_event_tells_the_story_and_its_exceptions_are_contained) {
  std::mutex mu;
  std::vector<lock_event> events;
  std::vector<std::string> errors;
  auto conf = cfg(600ms);
  conf.on_event = [&](const lock_event& e) {
    {
      std::lock_guard<std::mutex> g(mu);
      events.push_back(e);
    }
    if (e.what == lock_event::type::released) throw std::runtime_error("a logger that throws");
  };
  conf.on_error = [&](const background_error& e) {
    std::lock_guard<std::mutex> g(mu);
    errors.push_back(e.message);
  };
  client c{conf};
  auto l = c.lock("obs:story");
  l.lock();
  l.unlock();  // its event throws: reported, nothing else affected
  auto gone = c.lock("obs:gone");
  gone.lock();
  std::promise<void> told;
  gone.on_lost([&](const lost_info&) { told.set_value(); });
  raw()({"DEL", "obs:gone"});
  ASSERT_EQ(told.get_future().wait_for(5s), std::future_status::ready);
  std::error_code ec;
  gone.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  EXPECT_TRUE(l.try_lock());  // the client works on after the exception
  l.unlock();
  const auto s = c.stats();
  EXPECT_EQ(s.locks.losses[static_cast<std::size_t>(loss_cause::deleted)], 1u);
  EXPECT_GE(s.locks.renewals_failed, 1u);
  std::lock_guard<std::mutex> g(mu);
  ASSERT_GE(events.size(), 5u);
  EXPECT_EQ(events[0].what, lock_event::type::acquired);
  EXPECT_EQ(events[0].name, "obs:story");
  EXPECT_EQ(events[0].kind, static_cast<int>(lock_kind::reentrant));
  EXPECT_EQ(events[1].what, lock_event::type::released);
  EXPECT_EQ(events[2].what, lock_event::type::acquired);
  EXPECT_EQ(events[3].what, lock_event::type::lost);
  EXPECT_EQ(events[3].name, "obs:gone");
  EXPECT_STREQ(events[3].reason_text, "deleted");
  bool threw_reported = false;
  for (auto& e : errors) threw_reported = threw_reported || e.find("a logger that throws") != std::string::npos;
  EXPECT_TRUE(threw_reported);
}

// max_hold: the watchdog stops renewing at the cap and the holder is told, as of a loss; the key then
// expires by itself.
TEST_F(observe_test, max_hold_ends_a_watchdog_hold_and_tells_its_holder) {
  auto conf = cfg(600ms);
  conf.max_hold = 900ms;
  client c{conf};
  auto l = c.lock("obs:capped");
  const auto t0 = steady::now();
  l.lock();
  std::promise<lost_info> told;
  l.on_lost([&](const lost_info& i) { told.set_value(i); });
  auto f = told.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  const auto at = steady::now() - t0;
  const auto info = f.get();
  EXPECT_EQ(info.reason, lost_reason::max_hold);
  EXPECT_EQ(info.cause, errc::max_hold_exceeded);
  EXPECT_GE(at, 850ms);
  EXPECT_LT(at, 2000ms);
  EXPECT_FALSE(l.valid());
  std::error_code ec;
  l.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  // Not renewed past the cap: the key goes within a watchdog timeout.
  ASSERT_TRUE(eventually([&] { return raw()({"EXISTS", "obs:capped"}).integer == 0; }, 3000ms));
  EXPECT_EQ(c.stats().locks.losses[static_cast<std::size_t>(loss_cause::max_hold)], 1u);
  config bad = cfg();
  bad.max_hold = -1ms;
  EXPECT_THROW(client{bad}, error);
}

// A script the server forgot (SCRIPT FLUSH) is sent again as EVAL, and counted.
TEST_F(observe_test, noscript_fallbacks_are_counted) {
  client c{cfg()};
  auto l = c.lock("obs:noscript");
  l.lock();
  l.unlock();
  raw()({"SCRIPT", "FLUSH"});
  l.lock();
  l.unlock();
  EXPECT_GE(c.stats().locks.noscript_fallbacks, 1u);
}

// config::metrics_prefix: the metrics by name prefix, within the cap; off, nothing is kept.
TEST_F(observe_test, metrics_by_name_prefix_are_opt_in_and_capped) {
  {
    client c{cfg()};
    auto l = c.lock("orders:eu:1");
    l.lock();
    l.unlock();
    EXPECT_TRUE(c.stats().locks.by_prefix.empty());
  }
  config with = cfg();
  with.metrics_prefix.depth = 1;
  with.metrics_prefix.max_prefixes = 2;
  client c{with};
  client other{cfg()};
  for (const char* name : {"orders:eu:1", "orders:us:2", "billing:1", "reports:1", "nightly"}) {
    auto l = c.lock(name);
    l.lock();
    l.unlock();
  }
  auto held = other.lock("orders:eu:9");
  held.lock();
  EXPECT_FALSE(c.lock("orders:eu:9").try_lock(30ms));  // timed out, under "orders"
  held.unlock();
  auto s = c.stats().locks.by_prefix;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].prefix, "orders");
  EXPECT_EQ(s[0].acquisitions[static_cast<std::size_t>(acquire_outcome::granted)], 2u);
  EXPECT_EQ(s[0].acquisitions[static_cast<std::size_t>(acquire_outcome::timed_out)], 1u);
  EXPECT_EQ(s[0].wait_seconds.count, 2u);
  EXPECT_EQ(s[0].hold_seconds.count, 2u);
  EXPECT_EQ(s[1].prefix, "billing");
  EXPECT_EQ(s[2].prefix, lock_metrics::other_prefix);  // reports, nightly: beyond the cap
  EXPECT_EQ(s[2].acquisitions[static_cast<std::size_t>(acquire_outcome::granted)], 2u);
  // An acquisition refused before any waiter is made counts under its prefix too.
  std::error_code ec;
  c.lock("billing:2").try_lock(-5ms, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_EQ(c.stats().locks.by_prefix[1].acquisitions[static_cast<std::size_t>(acquire_outcome::refused)], 1u);
  config bad = cfg();
  bad.metrics_prefix.max_prefixes = 0;
  EXPECT_THROW(client{bad}, error);
}

}  // namespace
}  // namespace redlease::test
