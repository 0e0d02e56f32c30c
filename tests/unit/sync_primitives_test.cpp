// SPDX-License-Identifier: MIT
// Unit tests of the blocking call's one-shot event (src/one_shot.hpp) and of the callback slot's
// teardown promise (src/callback_slot.hpp), without a server.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "callback_slot.hpp"
#include "one_shot.hpp"
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
