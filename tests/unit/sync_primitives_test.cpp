// SPDX-License-Identifier: MIT
// Unit tests of the blocking call's one-shot event (src/one_shot.hpp) and of the callback slot's
// teardown promise (src/callback_slot.hpp), without a server.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/dispatch.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "callback_slot.hpp"
#include "runtime/io_guard.hpp"
#include "runtime/one_shot.hpp"
#include "redlease/config.hpp"

namespace redlease::detail {
namespace {

using namespace std::chrono_literals;

TEST(OneShot, SetBeforeWaitReturnsAtOnce) {
  one_shot e;
  EXPECT_FALSE(e.ready());
  e.set();
  EXPECT_TRUE(e.ready());
  e.wait();
  EXPECT_TRUE(e.ready());
}

TEST(OneShot, WaiterSleepsUntilSetFromAnotherThread) {
  one_shot e;
  std::atomic<bool> woke{false};
  std::thread t([&] {
    e.wait();
    woke = true;
  });
  std::this_thread::sleep_for(20ms);  // let it fall asleep (the test holds either way)
  EXPECT_FALSE(woke.load());
  e.set();
  t.join();
  EXPECT_TRUE(woke.load());
}

// Ping-pong through fresh events, as blocking calls do: no wake is ever lost.
TEST(OneShot, ThousandsOfRendezvousLoseNoWake) {
  constexpr int rounds = 5000;
  std::vector<std::unique_ptr<one_shot>> req(rounds), rep(rounds);
  for (int i = 0; i < rounds; ++i) {
    req[i] = std::make_unique<one_shot>();
    rep[i] = std::make_unique<one_shot>();
  }
  std::thread server([&] {
    for (int i = 0; i < rounds; ++i) {
      req[i]->wait();
      rep[i]->set();
    }
  });
  for (int i = 0; i < rounds; ++i) {
    req[i]->set();
    rep[i]->wait();
    ASSERT_TRUE(rep[i]->ready());
  }
  server.join();
}

// Board mode, as the I/O thread uses it: an owner thread completes many sleeping callers and wakes
// them in batches with one wake each; no caller is ever left asleep, and bits shared by more than
// 32 threads only cost a spurious wake.
TEST(WakeBoard, BatchedWakesLoseNoCaller) {
  for (int callers : {4, 40}) {
    constexpr int rounds = 300;
    wake_board board;
    std::vector<std::vector<std::unique_ptr<one_shot>>> ev(static_cast<std::size_t>(callers));
    for (auto& v : ev)
      for (int i = 0; i < rounds; ++i) v.push_back(std::make_unique<one_shot>());
    std::atomic<int> posted{0};  // events whose callers are waiting for them (or about to)
    std::vector<std::thread> ts;
    for (int t = 0; t < callers; ++t) {
      ts.emplace_back([&, t] {
        for (int i = 0; i < rounds; ++i) {
          posted.fetch_add(1);
          ev[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)]->wait(board);
        }
      });
    }
    std::thread owner([&] {
      board.adopt_this_thread();
      ASSERT_TRUE(board.on_owner_thread());
      std::vector<int> next(static_cast<std::size_t>(callers), 0);
      int done = 0;
      while (done < callers * rounds) {
        // Complete every caller's current event (in a batch), then wake the batch once.
        for (int t = 0; t < callers; ++t) {
          auto& i = next[static_cast<std::size_t>(t)];
          if (i == rounds) continue;
          auto& e = *ev[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)];
          if (e.set_quietly()) board.defer(e.bit());
          ++i;
          ++done;
        }
        board.flush();
        // Let the callers get to their next event before the next batch (either way it must hold).
        while (posted.load() < std::min(done + callers, callers * rounds) && posted.load() < callers * rounds)
          std::this_thread::yield();
      }
    });
    owner.join();
    for (auto& t : ts) t.join();  // a lost wake would hang here (ctest's timeout)
    for (auto& v : ev)
      for (auto& e : v) EXPECT_TRUE(e->ready());
  }
}

TEST(WakeBoard, OnlyTheOwnerThreadIsTheOwner) {
  wake_board a, b;
  a.adopt_this_thread();
  EXPECT_TRUE(a.on_owner_thread());
  EXPECT_FALSE(b.on_owner_thread());
  std::thread([&] { EXPECT_FALSE(a.on_owner_thread()); }).join();
  EXPECT_NE(wake_board::my_bit(), 0u);
}

// Every handler of a guarded executor runs under its guard: posted functions, timer completions,
// and a dispatch from inside a handler (inline, without locking the guard twice).
TEST(IoGuard, EveryHandlerRunsUnderTheGuardAndNestedDispatchDoesNotDeadlock) {
  asio::io_context ctx(1);
  redlease::detail::io_guard g;
  asio::any_io_executor ex = redlease::detail::guarded_executor<asio::io_context::executor_type>(ctx.get_executor(), &g);
  int under = 0, total = 0;
  auto check = [&] {
    ++total;
    if (redlease::detail::io_guard::held() == &g) ++under;
  };
  asio::post(ex, [&] {
    check();
    bool inline_ran = false;
    asio::dispatch(ex, [&] {
      check();
      inline_ran = true;
    });
    EXPECT_TRUE(inline_ran);  // dispatched inline on the executor's own thread
  });
  asio::steady_timer t(ex);
  t.expires_after(std::chrono::milliseconds(1));
  t.async_wait([&](std::error_code ec) {
    EXPECT_FALSE(ec);
    check();
  });
  ctx.run();
  EXPECT_EQ(total, 3);
  EXPECT_EQ(under, 3);
  EXPECT_EQ(redlease::detail::io_guard::held(), nullptr);
}

// A caller can take the guard only while no handler runs, and holds the I/O thread's handlers off
// while it has it.
TEST(IoGuard, TryScopeFailsWhileAHandlerRunsAndHandlersWaitForTheHolder) {
  asio::io_context ctx(1);
  redlease::detail::io_guard g;
  asio::any_io_executor ex = redlease::detail::guarded_executor<asio::io_context::executor_type>(ctx.get_executor(), &g);
  auto work = asio::make_work_guard(ctx);
  std::thread io([&] { ctx.run(); });
  redlease::detail::one_shot in_handler, release_handler;
  asio::post(ex, [&] {
    in_handler.set();
    release_handler.wait();
  });
  in_handler.wait();
  std::atomic<bool> ran{false};
  {
    redlease::detail::io_guard::scope s(g, std::try_to_lock);
    EXPECT_FALSE(s.owns());
    EXPECT_EQ(redlease::detail::io_guard::held(), nullptr);
    release_handler.set();
    // Once the handler is over the guard is free again (the I/O thread sleeps without it).
    for (int i = 0; i < 10'000'000 && !s.owns(); ++i) s.try_again(g);
    ASSERT_TRUE(s.owns());
    EXPECT_EQ(redlease::detail::io_guard::held(), &g);
    asio::post(ex, [&] { ran = true; });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(ran.load());  // the posted handler waits for the guard
  }
  EXPECT_EQ(redlease::detail::io_guard::held(), nullptr);
  work.reset();
  io.join();
  EXPECT_TRUE(ran.load());
}

TEST(CallbackSlot, CallsAndReportsAThrow) {
  callback_slot<int> s;
  int got = 0;
  std::vector<std::string> reported;
  config cfg;
  cfg.on_error = [&](const background_error& e) { reported.push_back(std::string(e.source) + ": " + e.message); };
  s.set([&](int v) { got = v; });
  s.call(cfg, "test callback", 7);
  EXPECT_EQ(got, 7);
  s.set([](int) { throw std::runtime_error("boom"); });
  s.call(cfg, "test callback", 1);
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0], "test callback: exception: boom");
  s.set(nullptr);
  s.call(cfg, "test callback", 9);  // cleared: nothing runs
  EXPECT_EQ(got, 7);
}

TEST(CallbackSlot, SetFromInsideReplacesWithoutDestroyingTheRunningOne) {
  callback_slot<int> s;
  config cfg;
  auto alive = std::make_shared<int>(1);
  std::weak_ptr<int> watch = alive;
  int first_calls = 0, second_calls = 0;
  s.set([&, keep = std::move(alive)](int) {
    ++first_calls;
    s.set([&](int) { ++second_calls; });
    // The running function (and its captures) must still be alive here.
    EXPECT_FALSE(watch.expired());
    EXPECT_EQ(*keep, 1);
  });
  s.call(cfg, "t", 0);
  EXPECT_TRUE(watch.expired()) << "the replaced callback's captures die once it returns";
  s.call(cfg, "t", 0);
  EXPECT_EQ(first_calls, 1);
  EXPECT_EQ(second_calls, 1);
}

TEST(CallbackSlot, ClearFromAnotherThreadWaitsForTheRunningCall) {
  callback_slot<int> s;
  config cfg;
  std::atomic<bool> entered{false}, finished{false};
  s.set([&](int) {
    entered = true;
    std::this_thread::sleep_for(100ms);
    finished = true;
  });
  std::thread io([&] { s.call(cfg, "t", 0); });
  while (!entered) std::this_thread::yield();
  s.set(nullptr);
  EXPECT_TRUE(finished.load()) << "set() returned while the callback ran";
  io.join();
}

}  // namespace
}  // namespace redlease::detail
