// SPDX-License-Identifier: MIT
// segmented_stock: atomic deduction across segments, never oversold.
#include <gtest/gtest.h>

#include <asio/use_future.hpp>

#include <atomic>
#include <climits>
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

// Segment counts are bounded: a huge count was accepted and only failed at the first call, with
// bad_alloc out of the error_code overload.
TEST_F(stock_test, segment_count_is_bounded_at_the_handle) {
  client c{cfg()};
  for (std::size_t n : {segmented_stock::max_segments + 1, std::size_t{1} << 40}) {
    try {
      (void)c.stock("sku:many", n);
      ADD_FAILURE() << "client::stock accepted " << n << " segments";
    } catch (const redlease::error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
    }
  }
  auto s = c.stock("sku:many", segmented_stock::max_segments);
  s.init(2048);
  EXPECT_EQ(raw()({"GET", "sku:many:1023"}).str, "2");
  EXPECT_TRUE(s.try_take(2));
  EXPECT_EQ(s.remaining(), 2046);
}

// init splits in 64-bit integers: a Lua double stored 99999999999999999 as "1e+17" and rounded
// 2^53 + 1 to 2^53.
TEST_F(stock_test, init_stores_every_count_exactly_up_to_llong_max) {
  client c{cfg()};
  auto one = c.stock("sku:big1", 1);
  one.init(99'999'999'999'999'999);
  EXPECT_EQ(raw()({"GET", "sku:big1:0"}).str, "99999999999999999");
  one.init(9'007'199'254'740'993);  // 2^53 + 1
  EXPECT_EQ(raw()({"GET", "sku:big1:0"}).str, "9007199254740993");
  EXPECT_EQ(one.remaining(), 9'007'199'254'740'993);

  auto three = c.stock("sku:big3", 3);
  three.init(LLONG_MAX);  // 9223372036854775807 = 3 * 3074457345618258602 + 1
  EXPECT_EQ(raw()({"GET", "sku:big3:0"}).str, "3074457345618258603");
  EXPECT_EQ(raw()({"GET", "sku:big3:1"}).str, "3074457345618258602");
  EXPECT_EQ(raw()({"GET", "sku:big3:2"}).str, "3074457345618258602");
  EXPECT_EQ(three.remaining(), LLONG_MAX);
  EXPECT_TRUE(three.try_take(1));
  EXPECT_EQ(three.remaining(), LLONG_MAX - 1);

  // Counts each valid but whose sum a long long cannot hold: bad_reply that says so, blaming no key.
  raw()({"SET", "sku:big3:0", std::to_string(LLONG_MAX)});
  std::error_code ec;
  three.remaining(ec);
  EXPECT_EQ(ec, errc::bad_reply);
  EXPECT_NE(last_error_text().find("sum is outside"), std::string::npos) << last_error_text();
  EXPECT_EQ(last_error_text().find("not a count"), std::string::npos) << last_error_text();
}

// try_take compares and deducts exactly: n = 2^53 + 1 rounded to 2^53 and took a segment holding
// 2^53 to 0 (one unit oversold).
TEST_F(stock_test, take_is_exact_above_two_to_the_53) {
  client c{cfg()};
  auto s = c.stock("sku:exact", 2);
  const long long p53 = 9'007'199'254'740'992;
  raw()({"SET", "sku:exact:0", std::to_string(p53)});
  raw()({"SET", "sku:exact:1", std::to_string(p53)});
  EXPECT_FALSE(s.try_take(p53 + 1));
  EXPECT_EQ(raw()({"GET", "sku:exact:0"}).str, "9007199254740992");
  EXPECT_EQ(raw()({"GET", "sku:exact:1"}).str, "9007199254740992");
  EXPECT_TRUE(s.try_take(p53 - 1));
  EXPECT_EQ(s.remaining(), p53 + 1);
  EXPECT_TRUE(s.try_take(p53));
  EXPECT_EQ(s.remaining(), 1);

  raw()({"SET", "sku:exact:0", std::to_string(LLONG_MAX - 1)});
  raw()({"SET", "sku:exact:1", "0"});
  EXPECT_FALSE(s.try_take(LLONG_MAX));
  raw()({"SET", "sku:exact:1", std::to_string(LLONG_MAX)});
  EXPECT_TRUE(s.try_take(LLONG_MAX));
  EXPECT_EQ(raw()({"GET", "sku:exact:1"}).str, "0");
  EXPECT_EQ(raw()({"GET", "sku:exact:0"}).str, std::to_string(LLONG_MAX - 1));
}

// A segment holding something DECRBY refuses: every take whose walk meets it fails with bad_reply
// naming the key (it was server_error with Lua's text, no key); the others sell from the good ones.
TEST_F(stock_test, a_segment_that_is_not_a_count_is_bad_reply_naming_the_key) {
  client c{cfg()};
  auto s = c.stock("sku:junk", 4);
  for (const char* junk : {"not-a-number", "1e3", "007", " 7", "9223372036854775808", "-0", ""}) {
    SCOPED_TRACE(junk);
    s.init(40);
    raw()({"SET", "sku:junk:2", junk});
    int taken = 0, bad = 0;
    for (int i = 0; i < 8; ++i) {  // consecutive calls: every start segment twice
      try {
        taken += s.try_take(1) ? 1 : 0;
      } catch (const redlease::error& e) {
        ++bad;
        EXPECT_EQ(e.code(), errc::bad_reply) << e.what();
        EXPECT_NE(std::string(e.what()).find("\"sku:junk:2\""), std::string::npos) << e.what();
      }
    }
    EXPECT_EQ(bad, 2);  // the calls that start at segment 2
    EXPECT_EQ(taken, 6);
    std::error_code ec;
    for (int i = 0; i < 4 && !ec; ++i) s.try_take(1, ec);
    EXPECT_EQ(ec, errc::bad_reply);
    EXPECT_NE(last_error_text().find("sku:junk:2"), std::string::npos) << last_error_text();
    s.remaining(ec);  // the same values are not counts to remaining() either
    EXPECT_EQ(ec, errc::bad_reply);
  }
  raw()({"DEL", "sku:junk:2"});
  raw()({"HSET", "sku:junk:2", "f", "v"});
  std::error_code ec;
  for (int i = 0; i < 4 && !ec; ++i) s.try_take(1, ec);
  EXPECT_EQ(ec, errc::bad_reply);
  EXPECT_NE(last_error_text().find("sku:junk:2"), std::string::npos) << last_error_text();
  // MGET reads a hash as nil, like a missing segment: remaining() counted it 0 while try_take failed.
  EXPECT_EQ(s.remaining(ec), 0);
  EXPECT_EQ(ec, errc::bad_reply);
  EXPECT_NE(last_error_text().find("\"sku:junk:2\" holds a hash"), std::string::npos) << last_error_text();
  try {
    s.remaining();
    ADD_FAILURE() << "remaining() summed a hash segment";
  } catch (const redlease::error& e) {
    EXPECT_EQ(e.code(), errc::bad_reply);
    EXPECT_NE(std::string(e.what()).find("sku:junk:2"), std::string::npos) << e.what();
  }
  // A missing segment still counts 0.
  raw()({"DEL", "sku:junk:2"});
  long long left = 0;
  for (const char* k : {"sku:junk:0", "sku:junk:1", "sku:junk:3"}) left += std::stoll(raw()({"GET", k}).str);
  EXPECT_EQ(s.remaining(ec), left);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(c.stats().connection_losses, 0u);
}

}  // namespace
}  // namespace redlease::test
