// SPDX-License-Identifier: MIT
// The async API: completion tokens (callbacks, use_future, use_awaitable) and explicit owners.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <future>
#include <thread>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

class async_test : public lock_fixture {
 protected:
  long long subscribers(const std::string& channel) {
    auto r = raw()({"PUBSUB", "NUMSUB", channel});
    return r.elements.size() == 2 ? r.elements[1].integer : -1;
  }
  // A client's config behind `proxy`: no health checks and no lane, so that every call goes on the
  // command connection, the proxy's connection 0 once the client has pinged.
  config behind(const fault_proxy& proxy, std::chrono::milliseconds request_timeout) {
    auto conf = cfg();
    conf.port = proxy.port();
    conf.request_timeout = request_timeout;
    conf.health_check_interval = 0ms;
    conf.sync_lane = false;
    return conf;
  }
  // The count of the first field of `name`'s hash (0: no hash).
  long long hold_count(const std::string& name) {
    auto v = raw()({"HVALS", name});
    return v.elements.empty() ? 0LL : std::stoll(v.elements[0].str);
  }
  // `o` holds `l` twice. One more level is taken and given back first: the scripts are loaded and
  // the release's variant probed, so that afterwards only the calls under test go out.
  void hold_twice(reentrant_lock& l, owner_id o) {
    ASSERT_TRUE(l.async_try_lock(o, 0ms, asio::use_future).get());
    ASSERT_TRUE(l.async_try_lock(o, 0ms, asio::use_future).get());
    ASSERT_TRUE(l.async_try_lock(o, 0ms, asio::use_future).get());
    l.async_unlock(o, asio::use_future).get();
  }
};

TEST_F(async_test, futures_with_explicit_owners_exclude_each_other) {
  client c{cfg()};
  auto l = c.lock("async:1");
  owner_id a = c.new_owner(), b = c.new_owner();
  EXPECT_NE(a, b);
  EXPECT_NE(a, this_thread_owner());
  l.async_lock(a, asio::use_future).get();
  EXPECT_FALSE(l.async_try_lock(b, 0ms, asio::use_future).get());
  EXPECT_TRUE(l.async_try_lock(a, 0ms, asio::use_future).get());  // reentrant for a
  EXPECT_EQ(l.async_hold_count(a, asio::use_future).get(), 2);
  EXPECT_EQ(l.async_hold_count(b, asio::use_future).get(), 0);
  auto fb = l.async_try_lock(b, 5s, asio::use_future);
  l.async_unlock(a, asio::use_future).get();
  l.async_unlock(a, asio::use_future).get();
  EXPECT_TRUE(fb.get());
  try {
    l.async_unlock(a, asio::use_future).get();
    FAIL();
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::not_owner);
  }
  l.async_unlock(b, asio::use_future).get();
  EXPECT_FALSE(l.async_is_locked(asio::use_future).get());
}

TEST_F(async_test, callbacks_run_on_the_client_executor) {
  client c{cfg()};
  auto m = c.mutex("async:cb");
  owner_id o = c.new_owner();
  std::promise<std::error_code> p;
  m.async_try_lock(o, 1s, 5s, [&](std::error_code ec, bool got) {
    EXPECT_TRUE(got);
    // Sync calls from the I/O thread would deadlock: they say so instead.
    std::error_code ec2;
    m.is_locked(ec2);
    EXPECT_EQ(ec2, errc::would_deadlock);
    p.set_value(ec);
  });
  EXPECT_FALSE(p.get_future().get());
  auto ttl = raw()({"PTTL", "async:cb"}).integer;
  EXPECT_GT(ttl, 4000);
  EXPECT_LE(ttl, 5000);
  m.async_unlock(o, asio::use_future).get();
}

// close() from a handler on the client's own thread while a request is out (the close waits for
// it), then the last reference goes in a later handler on that thread: the client is destroyed
// there, and the close's next look (a 1 ms timer whose wait had expired, its handler queued) must
// not touch it. Before, it did (a use after free: ASan, valgrind).
TEST_F(async_test, a_client_destroyed_on_its_thread_while_close_waits_is_not_touched_after) {
  fault_proxy proxy(server().port());
  auto conf = cfg();
  conf.port = proxy.port();
  conf.request_timeout = 5000ms;
  conf.close_timeout = 5000ms;
  auto holder = std::make_shared<std::unique_ptr<client>>(std::make_unique<client>(conf));
  (*holder)->ping();
  proxy.hold_replies(0, true);
  (*holder)->async_command({"PING"}, [](std::error_code, reply) {});  // out until the end
  auto ex = (*holder)->get_executor();
  std::promise<void> gone;
  asio::post(ex, [holder, ex, &gone]() mutable {
    (*holder)->close();  // on the I/O thread: returns at once; the close waits for the PING
    // Not a synchronisation: the scenario. The close's 1 ms wait expires while this handler runs,
    // so its handler is queued when the client goes.
    std::this_thread::sleep_for(5ms);
    asio::post(ex, [holder = std::move(holder), &gone]() mutable {
      holder->reset();  // the last reference: the client is destroyed on its own thread
      gone.set_value();
    });
  });
  holder.reset();
  ASSERT_EQ(gone.get_future().wait_for(10s), std::future_status::ready);
  proxy.hold_replies(0, false);
}

TEST_F(async_test, coroutines_take_turns_on_a_user_executor) {
  asio::io_context ioc;
  client c{ioc.get_executor(), cfg()};
  auto l = c.lock("async:co");
  int inside = 0, max_inside = 0, done = 0;
  const int workers = 8, rounds = 20;
  for (int w = 0; w < workers; ++w) {
    asio::co_spawn(
        ioc,
        [&, owner = c.new_owner()]() -> asio::awaitable<void> {
          for (int i = 0; i < rounds; ++i) {
            co_await l.async_lock(owner, asio::use_awaitable);
            max_inside = std::max(max_inside, ++inside);
            asio::steady_timer t(co_await asio::this_coro::executor, 1ms);
            co_await t.async_wait(asio::use_awaitable);
            --inside;
            co_await l.async_unlock(owner, asio::use_awaitable);
          }
          if (++done == workers) c.close();
        },
        asio::detached);
  }
  ioc.run_for(30s);
  EXPECT_EQ(done, workers);
  EXPECT_EQ(max_inside, 1);
}

// On an executor the caller supplies, a blocking call from a thread that runs its io_context, but
// not the client's strand (a coroutine resumed after an async call, a handler posted to the
// io_context), waits for the strand, which needs another thread of that context. With none, the
// strand does not start the request within the request timeout: the call fails with would_deadlock.
// Before, it waited forever (its request timeout is a timer on the same io_context). With another
// thread running the context (a thread_pool), the same call works.
TEST_F(async_test, a_blocking_call_on_the_only_thread_of_the_user_executor_fails_and_on_a_pool_works) {
  asio::io_context ioc;
  auto conf = cfg();
  conf.request_timeout = 300ms;
  client c{ioc.get_executor(), conf};
  auto l = c.lock("async:user-exec-block");
  std::error_code from_post, from_coroutine;
  bool locked = true;
  asio::post(ioc, [&] { c.ping(from_post); });
  asio::co_spawn(
      ioc,
      [&, owner = c.new_owner()]() -> asio::awaitable<void> {
        co_await l.async_lock(owner, asio::use_awaitable);
        locked = l.is_locked(from_coroutine);
        co_await l.async_unlock(owner, asio::use_awaitable);
        c.close();
      },
      asio::detached);
  std::promise<void> ran;
  std::thread runner([&] {
    ioc.run_for(10s);
    ran.set_value();
  });
  const bool finished = ran.get_future().wait_for(15s) == std::future_status::ready;
  if (!finished) std::_Exit(3);  // the io_context's only thread waits for itself: nothing else would end it
  runner.join();
  EXPECT_EQ(from_post, errc::would_deadlock);
  EXPECT_EQ(from_coroutine, errc::would_deadlock);
  EXPECT_FALSE(locked);
  // On a pool of two threads, a task on one of them makes blocking calls while the other runs the
  // client's strand.
  asio::thread_pool pool(2);
  client c2{pool.get_executor(), cfg()};
  std::promise<std::error_code> from_pool;
  asio::post(pool, [&] {
    std::error_code ec;
    c2.ping(ec);
    auto l2 = c2.lock("async:user-exec-pool");
    if (!ec) l2.lock(ec);
    if (!ec) l2.unlock(ec);
    from_pool.set_value(ec);
  });
  auto f = from_pool.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(f.get());
  c2.close();
  pool.join();
}

// A client on an executor the caller runs, destroyed while another thread runs that executor: the
// close it posts there runs after the destructor returned. Before, it held a raw pointer to the
// client and ran on freed memory (a crash in 3 runs of 3 here).
TEST_F(async_test, a_client_on_a_user_executor_destroyed_while_its_executor_runs_is_not_touched_after) {
  asio::io_context ioc;
  auto work = asio::make_work_guard(ioc);
  std::thread runner([&] { ioc.run(); });
  for (int i = 0; i < 50; ++i) {
    client c{ioc.get_executor(), cfg()};
    c.ping();
  }  // destroyed while `runner` runs the context
  work.reset();
  runner.join();
}

// Cancelling a waiting acquisition through its cancellation slot ends it at once with
// operation_aborted; it leaves its channel, and does not take the lock when it is released.
TEST_F(async_test, cancelled_waiting_acquisition_ends_at_once_and_never_takes_the_lock) {
  client c{cfg()};
  for (bool mutex : {false, true}) {
    const std::string name = mutex ? "cancel:wait:m" : "cancel:wait:r";
    auto l = mutex ? detail::lock_handle(c.mutex(name)) : detail::lock_handle(c.lock(name));
    const std::string channel = mutex ? "redlease_mutex__channel:{" + name + "}" : "redisson_lock__channel:{" + name + "}";
    const owner_id holder = c.new_owner(), waiter = c.new_owner();
    l.async_lock(holder, asio::use_future).get();

    asio::cancellation_signal sig;
    std::promise<std::error_code> done;
    l.async_lock(waiter, asio::bind_cancellation_slot(sig.slot(), [&](std::error_code ec) { done.set_value(ec); }));
    ASSERT_TRUE(eventually([&] { return subscribers(channel) == 1; })) << name;  // it waits
    auto f = done.get_future();
    EXPECT_EQ(f.wait_for(0s), std::future_status::timeout);
    // Emitted on the client's executor, where the slot is also cleared at completion.
    const auto t0 = steady::now();
    asio::post(c.get_executor(), [&] { sig.emit(asio::cancellation_type::terminal); });
    ASSERT_EQ(f.wait_for(2s), std::future_status::ready) << name;
    EXPECT_EQ(f.get(), errc::operation_aborted) << name;
    EXPECT_LT(ms_since(t0), 500) << name;
    EXPECT_TRUE(eventually([&] { return subscribers(channel) == 0; })) << name;  // it left the channel

    l.async_unlock(holder, asio::use_future).get();
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 0) << name << ": the cancelled waiter took it";
    EXPECT_FALSE(l.valid(waiter)) << name;
    // The owner can acquire again afterwards, as if nothing had happened.
    EXPECT_TRUE(l.async_try_lock(waiter, 0ms, asio::use_future).get()) << name;
    l.async_unlock(waiter, asio::use_future).get();
  }
}

// Cancelled while its attempt is on the wire (the network stalls it), and that attempt is granted
// when the network resumes: the grant is given back before the operation completes.
TEST_F(async_test, cancellation_with_an_attempt_on_the_wire_releases_its_grant_first) {
  fault_proxy proxy(server().port());
  auto conf = cfg();
  conf.port = proxy.port();
  conf.request_timeout = 5000ms;
  client c{conf};
  c.ping();
  for (bool mutex : {false, true}) {
    const std::string name = mutex ? "cancel:wire:m" : "cancel:wire:r";
    auto l = mutex ? detail::lock_handle(c.mutex(name)) : detail::lock_handle(c.lock(name));
    const owner_id o = c.new_owner();
    asio::cancellation_signal sig;
    std::promise<std::pair<std::error_code, bool>> done;
    const auto up0 = proxy.bytes_up();
    proxy.stall(true);
    l.async_try_lock(o, 10000ms, asio::bind_cancellation_slot(sig.slot(), [&](std::error_code ec, bool got) {
                       done.set_value({ec, got});
                     }));
    ASSERT_TRUE(proxy.wait_for([&] { return proxy.bytes_up() > up0; }, 2000ms));  // the attempt is sent
    asio::post(c.get_executor(), [&] { sig.emit(asio::cancellation_type::total); });
    auto f = done.get_future();
    // The attempt is still on the wire: the operation waits for its outcome.
    EXPECT_EQ(f.wait_for(100ms), std::future_status::timeout) << name;
    proxy.stall(false);
    ASSERT_EQ(f.wait_for(3s), std::future_status::ready) << name;
    auto [ec, got] = f.get();
    EXPECT_EQ(ec, errc::operation_aborted) << name;
    EXPECT_FALSE(got) << name;
    // The attempt ran (the lock was free) and its grant was given back before the completion.
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 0) << name;
    EXPECT_FALSE(l.valid(o)) << name;
  }
}

// An unlock message ("0") wakes one local waiter. A waiter cancelled while its attempt was on the
// wire is not finished until that attempt answers, and a message that came meanwhile went to it
// and was lost: the waiter behind it slept until the holder's TTL (here a minute; for ever for a
// key without one). A cancelled waiter is passed over.
TEST_F(async_test, an_unlock_message_is_not_lost_to_a_waiter_cancelled_with_its_attempt_on_the_wire) {
  const std::string name = "cancel:wake";
  const std::string channel = "redisson_lock__channel:{" + name + "}";
  // Before the client: its completions (the one at its close too) must find them alive.
  asio::cancellation_signal sig;
  std::promise<std::error_code> first_done;
  std::promise<std::error_code> second_done;
  auto first_result = first_done.get_future();
  auto second_result = second_done.get_future();
  fault_proxy proxy(server().port());
  auto conf = cfg();
  conf.port = proxy.port();
  conf.request_timeout = 5000ms;   // the held reply must not time out
  conf.health_check_interval = 0ms;
  // Nothing else on the held connection: a card write held there too would make two writes out,
  // and the second waiter's attempt would wait behind them unwritten (the TSan flake of an earlier
  // CI), while this test counts written commands.
  conf.client_card = false;
  client c{conf};
  const std::uint64_t command_connection = 0;  // the first the proxy accepted
  client h{cfg()};
  auto held = h.lock(name);
  held.lock(60000ms);  // the waiters' bound: a minute
  auto l = c.lock(name);
  const owner_id first = c.new_owner(), second = c.new_owner();
  auto on_executor = [&](auto f) {
    std::promise<void> ran;
    asio::post(c.get_executor(), [&] {
      f();
      ran.set_value();
    });
    ran.get_future().wait();
  };
  // Nothing outstanding on the command connection, and every handler of its replies has run.
  auto settled = [&] {
    EXPECT_TRUE(eventually([&] { return c.stats().commands == c.stats().replies; }));
    on_executor([] {});
  };
  l.async_lock(first, asio::bind_cancellation_slot(sig.slot(), [&](std::error_code ec) { first_done.set_value(ec); }));
  ASSERT_TRUE(eventually([&] { return subscribers(channel) == 1; }));
  settled();  // it tried again once subscribed, and sleeps
  auto replies = c.stats().replies;
  l.async_lock(second, [&](std::error_code ec) { second_done.set_value(ec); });
  ASSERT_TRUE(eventually([&] { return c.stats().replies > replies; }));
  settled();  // the second waits behind the first on the same channel

  // A message wakes the first; its attempt goes out and the reply is held.
  proxy.hold_replies(command_connection, true);
  auto sent = c.stats().commands;
  raw()({"PUBLISH", channel, "0"});
  ASSERT_TRUE(eventually([&] { return c.stats().commands > sent; }, 2000ms)) << "the first waiter did not try";
  on_executor([&] { sig.emit(asio::cancellation_type::terminal); });  // cancelled, attempt on the wire
  EXPECT_EQ(first_result.wait_for(0s), std::future_status::timeout);
  // The holder unlocks: "0" must reach the second waiter.
  sent = c.stats().commands;
  held.unlock();
  EXPECT_TRUE(eventually([&] { return c.stats().commands > sent; }, 2000ms)) << "the second waiter did not try";
  proxy.hold_replies(command_connection, false);
  ASSERT_EQ(second_result.wait_for(3s), std::future_status::ready) << "the unlock message was lost";
  EXPECT_FALSE(second_result.get());
  ASSERT_EQ(first_result.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(first_result.get(), errc::operation_aborted);
  EXPECT_TRUE(l.valid(second));
  EXPECT_FALSE(l.valid(first));
  l.async_unlock(second, asio::use_future).get();
  EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
}

// An unlock message ("0") wakes one local waiter: not one cancelled while its attempt is out (it
// ends when that attempt answers, without trying again). Before, the message went to the cancelled
// head waiter and the waiter behind it slept on the free lock until its own deadline (10 s).
TEST_F(async_test, an_unlock_message_skips_a_waiter_cancelled_with_its_attempt_out) {
  fault_proxy proxy(server().port());
  auto conf = cfg();
  conf.port = proxy.port();
  conf.request_timeout = 5000ms;
  conf.sync_lane = false;
  raw()({"HSET", "skip-cancelled", "other:1", "1"});
  raw()({"PEXPIRE", "skip-cancelled", "20000"});
  const std::string channel = "redisson_lock__channel:{skip-cancelled}";
  client c{conf};
  c.ping();  // the command connection is the proxy's connection 0
  auto l = c.lock("skip-cancelled");
  const owner_id a = c.new_owner(), b = c.new_owner();
  {
    // The scripts are loaded first: an EVALSHA answered NOSCRIPT would count as a reply below.
    auto warm = c.lock("skip-cancelled:warm");
    ASSERT_TRUE(warm.async_try_lock(a, 0ms, asio::use_future).get());
  }
  const auto r0 = c.stats().replies;
  asio::cancellation_signal sig;
  std::promise<std::error_code> a_done;
  l.async_lock(a, asio::bind_cancellation_slot(sig.slot(), [&](std::error_code ec) { a_done.set_value(ec); }));
  ASSERT_TRUE(eventually([&] { return c.stats().replies >= r0 + 2 && subscribers(channel) == 1; }));
  auto fb = l.async_try_lock(b, 10s, asio::use_future);
  ASSERT_TRUE(eventually([&] { return c.stats().replies >= r0 + 3; }));  // B waits behind A

  // A message (the lock still held) sends A's attempt, whose reply the proxy holds back.
  proxy.hold_replies(0, true);
  auto c0 = c.stats().commands;
  raw()({"PUBLISH", channel, "0"});
  ASSERT_TRUE(eventually([&] { return c.stats().commands >= c0 + 1; }));
  asio::post(c.get_executor(), [&] { sig.emit(asio::cancellation_type::terminal); });
  asio::post(c.get_executor(), asio::use_future).get();  // the cancellation has run

  // The lock is released: the message must go to B, whose attempt goes out at once.
  const auto t0 = steady::now();
  c0 = c.stats().commands;
  raw()({"DEL", "skip-cancelled"});
  raw()({"PUBLISH", channel, "0"});
  EXPECT_TRUE(eventually([&] { return c.stats().commands >= c0 + 1; }, 2000ms)) << "nobody tried";
  proxy.hold_replies(0, false);
  auto fa = a_done.get_future();
  ASSERT_EQ(fa.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(fa.get(), errc::operation_aborted);
  ASSERT_EQ(fb.wait_for(5s), std::future_status::ready) << "B slept on a free lock";
  EXPECT_TRUE(fb.get());
  EXPECT_LT(ms_since(t0), 3000);
  l.async_unlock(b, asio::use_future).get();
}

// An unlock whose reply is late is sent again in retry mode, expecting the count it leaves. A
// re-entry by the same owner that went out between the two made that count again, and the retry
// took a second level: the server held one level less than the owner, and the owner's last unlock
// found the lock freed under it. A re-entry now waits until the unlock is settled.
TEST_F(async_test, a_reentry_while_an_unlock_is_out_waits_for_it_to_settle) {
  fault_proxy proxy(server().port());
  // The unlock's reply is held: after twice the request timeout without a reply the connection is
  // dropped, and the unlock is sent again on the next one.
  const std::string name = "reentry-while-unlocking-" + std::to_string(::getpid());
  client c{behind(proxy, 1000ms)};
  c.ping();
  auto l = c.lock(name);
  const owner_id o = c.new_owner();
  hold_twice(l, o);
  auto count = [&] { return hold_count(name); };
  ASSERT_EQ(count(), 2);

  proxy.hold_replies(0, true);
  auto unlocked = l.async_unlock(o, asio::use_future);
  ASSERT_TRUE(eventually([&] { return count() == 1; })) << "the unlock did not run";
  // A wait of its own that outlasts the unlock's retries: with none, it would give up after one
  // request timeout (a_reentry_waiting_for_an_unlock_to_settle_keeps_its_own_deadline).
  auto reentered = l.async_try_lock(o, 5000ms, asio::use_future);
  // The unlock's retry (on the new connection) leaves its latch on the server.
  ASSERT_TRUE(eventually([&] { return !raw()({"KEYS", "redisson_unlock_latch:{" + name + "}:*"}).elements.empty(); },
                         5000ms));
  proxy.hold_replies(0, false);
  ASSERT_EQ(unlocked.wait_for(5s), std::future_status::ready);
  EXPECT_NO_THROW(unlocked.get());
  ASSERT_EQ(reentered.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(reentered.get());
  EXPECT_EQ(count(), 2) << "the server's count is not the owner's";
  EXPECT_NO_THROW(l.async_unlock(o, asio::use_future).get());
  EXPECT_EQ(count(), 1);
  EXPECT_NO_THROW(l.async_unlock(o, asio::use_future).get());
  EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
}

// A re-entry that waits for an unlock of its hold to settle is cancelled: it completes at once with
// operation_aborted, not when the unlock settles, and it never runs.
TEST_F(async_test, a_reentry_waiting_for_an_unlock_to_settle_is_cancelled_at_once) {
  fault_proxy proxy(server().port());
  const std::string name = "reentry-cancelled-" + std::to_string(::getpid());
  asio::cancellation_signal sig;  // before the client: its close may complete the operation
  client c{behind(proxy, 5000ms)};  // the held reply must not time out
  c.ping();
  auto l = c.lock(name);
  const owner_id o = c.new_owner();
  hold_twice(l, o);
  auto count = [&] { return hold_count(name); };
  ASSERT_EQ(count(), 2);

  proxy.hold_replies(0, true);
  auto unlocked = l.async_unlock(o, asio::use_future);
  ASSERT_TRUE(eventually([&] { return count() == 1; })) << "the unlock did not run";
  std::promise<std::pair<std::error_code, bool>> reentry;
  auto reentered = reentry.get_future();
  l.async_try_lock(o, 10s, asio::bind_cancellation_slot(sig.slot(), [&](std::error_code ec, bool got) {
                     reentry.set_value({ec, got});
                   }));
  const auto sent = c.stats().commands;
  asio::post(c.get_executor(), [&] { sig.emit(asio::cancellation_type::terminal); });
  ASSERT_EQ(reentered.wait_for(2s), std::future_status::ready) << "it waited for the unlock";
  auto [ec, got] = reentered.get();
  EXPECT_EQ(ec, errc::operation_aborted);
  EXPECT_FALSE(got);
  EXPECT_EQ(unlocked.wait_for(0s), std::future_status::timeout) << "the unlock settled first: nothing was tested";
  proxy.hold_replies(0, false);
  EXPECT_NO_THROW(unlocked.get());
  EXPECT_EQ(c.stats().commands, sent) << "the cancelled re-entry was sent";
  EXPECT_EQ(count(), 1);
  EXPECT_NO_THROW(l.async_unlock(o, asio::use_future).get());
  EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
}

// A parked re-entry keeps its own time: its wait plus one request timeout (what a lone attempt
// would have had), then request_timeout, nothing sent. Before, a try_lock(0) behind an unlock that
// a stalled server did not answer waited out the unlock's retries (about 4 s here).
TEST_F(async_test, a_reentry_waiting_for_an_unlock_to_settle_keeps_its_own_deadline) {
  fault_proxy proxy(server().port());
  const std::string name = "reentry-deadline-" + std::to_string(::getpid());
  client c{behind(proxy, 1000ms)};
  c.ping();
  auto l = c.lock(name);
  const owner_id o = c.new_owner();
  hold_twice(l, o);
  ASSERT_EQ(hold_count(name), 2);
  proxy.hold_replies(0, true);
  std::promise<std::error_code> unlocked;
  l.async_unlock(o, [&](std::error_code ec) { unlocked.set_value(ec); });
  ASSERT_TRUE(eventually([&] { return hold_count(name) == 1; })) << "the unlock did not run";
  std::promise<std::pair<std::error_code, bool>> reentry;
  auto reentered = reentry.get_future();
  auto t0 = steady::now();
  l.async_try_lock(o, 0ms, [&](std::error_code ec, bool got) { reentry.set_value({ec, got}); });
  ASSERT_EQ(reentered.wait_for(10s), std::future_status::ready);
  auto took = ms_since(t0);
  auto [ec, got] = reentered.get();
  EXPECT_EQ(ec, errc::request_timeout) << ec.message();
  EXPECT_FALSE(got);
  EXPECT_GE(took, 900);
  EXPECT_LT(took, 2500) << "it waited out the unlock's retries";
  proxy.hold_replies(0, false);
  auto settled = unlocked.get_future();
  ASSERT_EQ(settled.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(hold_count(name), 1) << "the re-entry was sent";
  EXPECT_NO_THROW(l.async_unlock(o, asio::use_future).get());
  EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
}

// The grant of an attempt whose reply was lost is given back by an undo. When the undo cannot be
// delivered either (the reconnect goes nowhere), it is sent again until the server answers it.
// Before, it was sent once and forgotten: the grant stayed on the server for a lease, held by
// nobody (a reentrant owner's next attempt even re-entered it: one level too many, so the lock
// stayed held after its last unlock).
TEST_F(async_test, an_undo_that_cannot_be_delivered_is_sent_again) {
  fault_proxy proxy(server().port());
  auto conf = cfg();
  conf.port = proxy.port();
  conf.request_timeout = 500ms;
  conf.connect_timeout = 300ms;
  conf.sync_lane = false;
  client c{conf};
  c.ping();
  for (auto kind : {lock_kind::reentrant, lock_kind::mutex, lock_kind::fair}) {
    const std::string name = "undo-lost:" + std::to_string(static_cast<int>(kind));
    SCOPED_TRACE(name);
    auto l = kind == lock_kind::mutex  ? detail::lock_handle(c.mutex(name))
             : kind == lock_kind::fair ? detail::lock_handle(c.fair_lock(name))
                                       : detail::lock_handle(c.lock(name));
    const owner_id o = c.new_owner();
    // The scripts are loaded first: the reply lost below must be the grant's, not a NOSCRIPT.
    ASSERT_TRUE(l.async_try_lock(o, 0ms, asio::use_future).get());
    l.async_unlock(o, asio::use_future).get();
    const auto accepted = proxy.accepted();
    proxy.lose_next_reply();  // the grant runs, its reply is lost, the connection is reset
    proxy.blackhole(true);    // and the reconnects that would carry the undo go nowhere
    try {
      l.async_try_lock(o, 0ms, asio::use_future).get();
      ADD_FAILURE() << "the attempt whose reply was lost succeeded";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), errc::connection_lost) << e.what();
    }
    // A second connection attempt: the first timed out, and the undo queued on it failed with it.
    ASSERT_TRUE(proxy.wait_for([&] { return proxy.accepted() >= accepted + 2; }, 5000ms));
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 1);  // the grant is still there
    proxy.blackhole(false);
    proxy.drop_all();
    EXPECT_TRUE(eventually([&] { return raw()({"EXISTS", name}).integer == 0; }, 5000ms)) << "the grant leaked";
    // The owner starts afresh: one level, freed by one unlock.
    ASSERT_TRUE(l.async_try_lock(o, 0ms, asio::use_future).get());
    l.async_unlock(o, asio::use_future).get();
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
  }
}

// The attempt and its undo sit in a dropped connection on the way to the server (3 s late); the
// undo, sent again on the new connection, runs first and finds nothing, and its latch then makes
// the first undo change nothing. The late grant is found by the reads that follow a resent undo and
// given back. Before, it stayed for a whole lease (30 s) held by nobody, and the server counted a
// hold the client did not know of.
TEST_F(async_test, a_late_grant_that_a_resent_undo_overtook_is_given_back) {
  fault_proxy proxy(server().port());
  auto conf = cfg();  // request_timeout 1 s, watchdog 30 s
  conf.port = proxy.port();
  conf.sync_lane = false;  // one connection: the order is the proxy's
  client c{conf};
  const std::string name = "undo-overtaken-" + std::to_string(::getpid());
  auto l = c.lock(name);
  ASSERT_TRUE(l.try_lock());  // scripts loaded, connection up
  l.unlock();
  proxy.set_latency(3000ms, 0ms);  // requests reach the server 3 s after they are sent
  std::error_code ec;
  EXPECT_FALSE(l.try_lock(0ms, ec));
  EXPECT_EQ(ec, errc::request_timeout) << ec.message();
  proxy.set_latency(0ms, 0ms);  // new bytes go through at once
  // The resent undo ran first: it found nothing, and its latch says so.
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& k : raw()({"KEYS", "redisson_unlock_latch:{" + name + "}:*"}).elements)
          if (raw()({"GET", k.str}).str == "-1") return true;
        return false;
      },
      5000ms))
      << "the resent undo did not overtake the attempt: nothing tested";
  // The late grant (at +3 s) is found by the reads that follow the resent undo, and given back.
  std::this_thread::sleep_for(2500ms);  // past the late attempt's arrival
  EXPECT_TRUE(eventually([&] { return raw()({"EXISTS", name}).integer == 0; }, 10000ms))
      << "the late grant was never given back, PTTL " << raw()({"PTTL", name}).integer;
  EXPECT_EQ(l.hold_count(), 0);
  EXPECT_FALSE(l.valid());
  // The owner's own locking goes on as before.
  ASSERT_TRUE(l.try_lock());
  EXPECT_EQ(l.hold_count(), 1);
  l.unlock();
  EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
}

// A protocol fault (here: a reply over max_reply_elements, read before the lock's reply) fails every
// request written on the connection with protocol_error, although the server ran them. A grant or a
// release is then as unknown as after a dropped connection. Before, both were taken as not done: the
// grant stayed on the server for a lease, held by nobody; the release was not retried, and the
// owner's next unlock, in first-attempt mode, took a second level: it freed the lock while the owner
// still held a level, and reported that level lost.
TEST_F(async_test, a_protocol_fault_leaves_a_grant_or_release_unknown_not_undone) {
  fault_proxy proxy(server().port());
  auto conf = cfg();
  conf.port = proxy.port();
  conf.sync_lane = false;
  conf.max_reply_elements = 64;
  std::vector<std::string> push{"RPUSH", "big"};
  for (int i = 0; i < 100; ++i) push.push_back("x");
  raw().command(push);
  client c{conf};
  auto l = c.lock("pfault");
  const owner_id o = c.new_owner();
  std::atomic<int> lost{0};
  l.on_lost([&](const lost_info&) { ++lost; });
  // The scripts are loaded first: the commands below run at once on the server.
  ASSERT_TRUE(l.async_try_lock(o, 0ms, asio::use_future).get());
  l.async_unlock(o, asio::use_future).get();
  // The fault comes in the reply before the lock's: both commands are written, then delivered.
  auto faulted = [&](auto&& start) {
    proxy.stall(true);
    const auto c0 = c.stats().commands;
    auto big = c.async_command(std::vector<std::string>{"LRANGE", "big", "0", "-1"}, asio::use_future);
    auto op = start();
    EXPECT_TRUE(eventually([&] { return c.stats().commands >= c0 + 2; }));
    proxy.stall(false);
    try {
      big.get();
      ADD_FAILURE() << "the reply over the bounds was taken";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), errc::protocol_error) << e.what();
    }
    return op;
  };

  // A grant: undone once the connection is back.
  auto grant = faulted([&] { return l.async_try_lock(o, 0ms, asio::use_future); });
  try {
    grant.get();
    ADD_FAILURE() << "the attempt succeeded";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::protocol_error) << e.what();
  }
  EXPECT_TRUE(eventually([&] { return raw()({"EXISTS", "pfault"}).integer == 0; })) << "the grant leaked";
  // Until it reconnects, the connection fails requests at once with the protocol error.
  auto back = [&] {
    return eventually([&] {
      std::error_code e;
      c.ping(e);
      return !e;
    });
  };
  ASSERT_TRUE(back());
  raw()({"DEL", "pfault"});  // whatever a leaked grant left: the release below is checked alone

  // A release: retried in retry mode (or continued by the next unlock), never taken twice.
  l.async_lock(o, asio::use_future).get();
  l.async_lock(o, asio::use_future).get();
  auto release = faulted([&] { return l.async_unlock(o, asio::use_future); });
  std::error_code ec;
  try {
    release.get();
  } catch (const std::system_error& e) {
    ec = e.code();
  }
  if (ec) {
    EXPECT_EQ(ec, errc::protocol_error);
    ASSERT_TRUE(back());
    l.async_unlock(o, asio::use_future).get();  // continues the first, in retry mode
  }
  const std::string field = c.id() + ":" + std::to_string(o);
  EXPECT_EQ(raw()({"HGET", "pfault", field}).str, "1") << "a second level was taken";
  EXPECT_TRUE(l.valid(o));
  l.async_unlock(o, asio::use_future).get();
  EXPECT_EQ(raw()({"EXISTS", "pfault"}).integer, 0);
  EXPECT_EQ(lost.load(), 0);
  l.on_lost(nullptr);
}

// The common use: an acquisition raced against a timer with Asio's awaitable operators. The timer
// wins, the acquisition is cancelled, and nothing is left held.
TEST_F(async_test, awaitable_operators_race_an_acquisition_against_a_timer) {
  using namespace asio::experimental::awaitable_operators;
  asio::io_context ioc;
  client c{ioc.get_executor(), cfg()};
  auto l = c.lock("cancel:race");
  const owner_id holder = c.new_owner(), racer = c.new_owner();
  bool timer_won = false, lock_won_later = false;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await l.async_lock(holder, asio::use_awaitable);
        asio::steady_timer t(co_await asio::this_coro::executor, 200ms);
        auto r = co_await (l.async_lock(racer, asio::use_awaitable) || t.async_wait(asio::use_awaitable));
        timer_won = r.index() == 1;
        co_await l.async_unlock(holder, asio::use_awaitable);
        // Free now, and the cancelled racer holds nothing: a fresh acquisition by it is a first level.
        co_await l.async_lock(racer, asio::use_awaitable);
        lock_won_later = co_await l.async_hold_count(racer, asio::use_awaitable) == 1;
        co_await l.async_unlock(racer, asio::use_awaitable);
        c.close();
      },
      asio::detached);
  ioc.run_for(10s);
  EXPECT_TRUE(timer_won);
  EXPECT_TRUE(lock_won_later);
  EXPECT_EQ(raw()({"EXISTS", "cancel:race"}).integer, 0);
}

// A coroutine resumes inside the completion, so the server's words are still there in the catch
// around the co_await that threw (docs/errors.md), on the coroutine's own executor's thread.
TEST_F(async_test, a_coroutines_catch_sees_the_servers_words) {
  raw()({"SET", "words:str", "x"});
  asio::io_context ioc;
  client c{cfg()};
  auto l = c.lock("words:str");
  std::string lock_words, command_words;
  std::error_code lock_ec;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        try {
          co_await l.async_lock(c.new_owner(), asio::use_awaitable);
        } catch (const std::system_error& e) {
          lock_ec = e.code();
          lock_words = last_error_text();
        }
        try {
          std::vector<std::string> incr{"INCR", "words:str"};
          co_await c.async_command(std::move(incr), asio::use_awaitable);
        } catch (const std::system_error&) {
          command_words = last_error_text();
        }
      },
      asio::detached);
  ioc.run_for(10s);
  EXPECT_EQ(lock_ec, errc::wrong_type);
  EXPECT_NE(lock_words.find("WRONGTYPE"), std::string::npos) << lock_words;
  EXPECT_NE(command_words.find("not an integer"), std::string::npos) << command_words;
  // Outside the completion the slot is this thread's own again.
  EXPECT_EQ(last_error_text(), "");
}

// One renewal call carries runs of one owner's locks (the owner field sent once per run), another
// owner's lock and a mutex in between: every lock is renewed, and a lock taken from under its owner
// is reported for that lock alone.
TEST_F(async_test, mixed_renewal_batch_renews_each_lock_and_reports_only_the_stolen_one) {
  client c{cfg(300ms)};
  const owner_id a = c.new_owner(), b = c.new_owner();
  struct entry {
    std::string name;
    bool mutex;
    owner_id owner;
  };
  const std::vector<entry> es{{"mix:r0", false, a}, {"mix:r1", false, a}, {"mix:r2", false, a}, {"mix:r3", false, b},
                              {"mix:m0", true, a},  {"mix:r4", false, a}, {"mix:r5", false, b}};
  std::vector<detail::lock_handle> ls;
  std::vector<std::promise<lost_info>> lost(es.size());
  for (std::size_t i = 0; i < es.size(); ++i) {
    ls.push_back(es[i].mutex ? detail::lock_handle(c.mutex(es[i].name)) : detail::lock_handle(c.lock(es[i].name)));
    ls.back().on_lost([&lost, i](const lost_info& info) { lost[i].set_value(info); });
  }
  // Taken back to back, so that their renewals fall due together and share calls.
  for (std::size_t i = 0; i < es.size(); ++i) ls[i].async_lock(es[i].owner, asio::use_future).get();
  const auto calls0 = c.stats().renew_calls;
  const auto renewed0 = c.stats().renewed_locks;
  // Three renewals each (a lease at least, at one every 100 ms): the keys outlive their first lease.
  ASSERT_TRUE(eventually([&] { return c.stats().renewed_locks - renewed0 >= 3 * es.size(); }));
  EXPECT_LT(c.stats().renew_calls - calls0, c.stats().renewed_locks - renewed0);  // batched
  for (std::size_t i = 0; i < es.size(); ++i) {
    EXPECT_TRUE(ls[i].valid(es[i].owner)) << es[i].name;
    EXPECT_EQ(raw()({"EXISTS", es[i].name}).integer, 1) << es[i].name;
    if (!es[i].mutex) {
      EXPECT_EQ(raw()({"HGET", es[i].name, c.id() + ":" + std::to_string(es[i].owner)}).str, "1");
    }
  }
  // Someone else takes mix:r1 (the middle of owner a's run).
  raw().pipeline({{"DEL", "mix:r1"}, {"HSET", "mix:r1", "someone-else:1", "1"}, {"PEXPIRE", "mix:r1", "30000"}});
  auto f = lost[1].get_future();
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(f.get().reason, lost_reason::taken);
  const auto renewed1 = c.stats().renewed_locks;  // two more rounds for the others
  ASSERT_TRUE(eventually([&] { return c.stats().renewed_locks - renewed1 >= 2 * (es.size() - 1); }));
  for (std::size_t i = 0; i < es.size(); ++i) {
    if (i == 1) continue;
    EXPECT_TRUE(ls[i].valid(es[i].owner)) << es[i].name;
    EXPECT_EQ(lost[i].get_future().wait_for(0s), std::future_status::timeout) << es[i].name;
    EXPECT_GT(raw()({"PTTL", es[i].name}).integer, 0) << es[i].name;
  }
  EXPECT_FALSE(ls[1].valid(a));
  for (std::size_t i = 0; i < es.size(); ++i) {
    if (i == 1) {
      EXPECT_THROW(ls[i].async_unlock(es[i].owner, asio::use_future).get(), std::system_error);
      continue;
    }
    ls[i].async_unlock(es[i].owner, asio::use_future).get();
    EXPECT_EQ(raw()({"EXISTS", es[i].name}).integer, 0) << es[i].name;
  }
  EXPECT_EQ(raw()({"HGET", "mix:r1", "someone-else:1"}).str, "1");  // the other holder's lock is untouched
  raw()({"DEL", "mix:r1"});
}

}  // namespace
}  // namespace redlease::test
