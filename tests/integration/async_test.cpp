// SPDX-License-Identifier: MIT
// The async API: completion tokens (callbacks, use_future, use_awaitable) and explicit owners.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <future>

#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

class async_test : public lock_fixture {};

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
  std::this_thread::sleep_for(750ms);  // 2.5 leases: each lock needs at least two renewals
  EXPECT_GE(c.stats().renewed_locks - renewed0, 2 * es.size());
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
  std::this_thread::sleep_for(350ms);  // another round of renewals for the others
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
