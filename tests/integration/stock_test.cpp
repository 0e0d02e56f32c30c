// SPDX-License-Identifier: MIT
// segmented_stock: atomic deduction across segments, never oversold.
#include <gtest/gtest.h>

#include <asio/use_future.hpp>

#include <atomic>
#include <thread>

#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

class stock_test : public lock_fixture {};

TEST_F(stock_test, init_splits_evenly_and_remaining_sums) {
  client c{cfg()};
  auto s = c.stock("sku:1", 4);
  s.init(10);
  EXPECT_EQ(raw()({"GET", "sku:1:0"}).str, "3");
  EXPECT_EQ(raw()({"GET", "sku:1:1"}).str, "3");
  EXPECT_EQ(raw()({"GET", "sku:1:2"}).str, "2");
  EXPECT_EQ(raw()({"GET", "sku:1:3"}).str, "2");
  EXPECT_EQ(s.remaining(), 10);
  std::error_code ec;
  s.init(-1, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  s.try_take(0, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_THROW(c.stock("", 3), redlease::error);
  EXPECT_THROW(c.stock("x", 0), redlease::error);
}

TEST_F(stock_test, moves_on_when_a_segment_is_empty_and_never_splits_an_order) {
  client c{cfg()};
  auto s = c.stock("sku:2", 3);
  s.init(3);  // 1, 1, 1
  EXPECT_FALSE(s.try_take(2));  // no single segment has 2
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.try_take(1));
  EXPECT_FALSE(s.try_take(1));
  EXPECT_EQ(s.remaining(), 0);
}

TEST_F(stock_test, sixteen_threads_racing_for_the_last_units_never_oversell) {
  client c{cfg()};
  auto s = c.stock("sku:hot", 8);
  s.init(1000);
  std::atomic<long long> sold{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 16; ++t) {
    ts.emplace_back([&, t] {
      for (;;) {
        long long n = 1 + (t % 3);  // orders of 1..3 units
        if (s.try_take(n)) {
          sold += n;
        } else if (n > 1 && s.try_take(1)) {
          sold += 1;
        } else if (s.remaining() == 0) {
          return;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(sold.load(), 1000);
  EXPECT_EQ(s.remaining(), 0);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(raw()({"GET", "sku:hot:" + std::to_string(i)}).str, "0");
}

TEST_F(stock_test, async_take_with_future) {
  client c{cfg()};
  auto s = c.stock("sku:async", 2);
  s.init(1);
  EXPECT_TRUE(s.async_try_take(1, asio::use_future).get());
  EXPECT_FALSE(s.async_try_take(1, asio::use_future).get());
}

}  // namespace
}  // namespace redlease::test
