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

}  // namespace
}  // namespace redlease::test
