// SPDX-License-Identifier: MIT
// Unit tests of how the lock protocols read their acquire scripts' replies (src/lock/protocol.hpp),
// without a server: the fair lock's two kinds of wait (at the head, or behind another waiter), and
// replies that no script sends.
#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>
#include <string>
#include <vector>

#include "lock/protocol.hpp"

namespace redlease::detail {
namespace {

reply integer(long long v) {
  reply r;
  r.type = reply::kind::integer;
  r.integer = v;
  return r;
}
reply bulk(std::string s) {
  reply r;
  r.type = reply::kind::string;
  r.str = std::move(s);
  return r;
}
reply array(std::initializer_list<reply> elements) {
  reply r;
  r.type = reply::kind::array;
  r.elements = elements;
  return r;
}

using k = acquire_result::kind;

// The arguments an encoder wrote (bulk strings, "$<n>\r\n<bytes>\r\n" each).
std::vector<std::string> args_of(const arg_list& a) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < a.buf.size() && a.buf[at] == '$') {
    auto eol = a.buf.find("\r\n", at);
    auto n = static_cast<std::size_t>(std::stoul(a.buf.substr(at + 1, eol - at - 1)));
    out.push_back(a.buf.substr(eol + 2, n));
    at = eol + 2 + n + 2;
  }
  return out;
}

// A fair waiter that gives up takes its own allowance off the deadlines behind it: never
// Redisson's 300000 for one it did not declare (the undo of a lost attempt passed 0, which became
// 300000 and purged everyone behind it).
TEST(protocols_test, a_fair_give_up_passes_the_waiters_own_allowance) {
  const auto& fair = protocol_of(lock_kind::fair);
  auto give_up = [&](long long allowance) {
    arg_list a;
    fair.encode_give_up(a, acquire_request{"n", "uuid:1", "", ms(30000), false, ms(allowance), true});
    auto args = args_of(a);
    EXPECT_EQ(args.size(), static_cast<std::size_t>(std::stoll(args.at(0)) + 1 + 5)) << "numkeys, keys, ARGV";
    // ARGV[5]: now, the client's epoch ms (fair_cancel's floor, as fair_acquire's ARGV[4]).
    auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch()).count();
    EXPECT_NEAR(static_cast<double>(std::stoll(args.at(8))), static_cast<double>(now), 5000.0);
    return args.at(5);  // numkeys, N, Q, Z, then ARGV[1] owner, ARGV[2] W
  };
  EXPECT_EQ(give_up(20000), "20000");
  EXPECT_EQ(give_up(300000), "300000");
  EXPECT_EQ(give_up(900000), "300000");
  EXPECT_EQ(give_up(0), "0");
}

TEST(protocols_test, a_fair_waiter_hears_whether_it_is_behind_another) {
  const auto& fair = protocol_of(lock_kind::fair);
  auto head = fair.decode_acquire(integer(2500));
  EXPECT_EQ(head.what, k::busy);
  EXPECT_EQ(head.pttl, 2500);
  EXPECT_FALSE(head.behind);
  auto behind = fair.decode_acquire(array({integer(2500)}));
  EXPECT_EQ(behind.what, k::busy);
  EXPECT_EQ(behind.pttl, 2500);
  EXPECT_TRUE(behind.behind);
  auto no_expiry = fair.decode_acquire(array({integer(-1)}));
  EXPECT_EQ(no_expiry.what, k::busy);
  EXPECT_EQ(no_expiry.pttl, -1);
  EXPECT_TRUE(no_expiry.behind);
}

TEST(protocols_test, a_fair_grant_is_nil_or_a_token) {
  const auto& fair = protocol_of(lock_kind::fair);
  EXPECT_EQ(fair.decode_acquire(reply{}).what, k::granted);
  auto fenced = fair.decode_acquire(bulk("1795000000000123"));
  EXPECT_EQ(fenced.what, k::granted);
  EXPECT_EQ(fenced.token, 1795000000000123u);
  EXPECT_FALSE(fenced.behind);
}

// Waiters that Redisson may never wake (its silent downgrade, a fair waiter's give-up, delete())
// re-check at the poll cap; the reentrant lock's do not need to (every release publishes).
TEST(protocols_test, fair_and_read_write_waiters_are_poll_capped) {
  EXPECT_TRUE(protocol_of(lock_kind::fair).poll_capped());
  EXPECT_TRUE(protocol_of(lock_kind::read).poll_capped());
  EXPECT_TRUE(protocol_of(lock_kind::write).poll_capped());
  EXPECT_FALSE(protocol_of(lock_kind::reentrant).poll_capped());
}

TEST(protocols_test, replies_no_script_sends_are_bad) {
  const auto& fair = protocol_of(lock_kind::fair);
  for (const reply& r : {array({}), array({integer(1), integer(2)}), array({bulk("7")}), bulk("0"), bulk("x7"),
                         array({array({integer(1)})})}) {
    EXPECT_EQ(fair.decode_acquire(r).what, k::bad);
  }
  // Only the fair lock queues: the other kinds' waits are bare integers.
  for (lock_kind kind : {lock_kind::reentrant, lock_kind::mutex, lock_kind::read, lock_kind::write}) {
    EXPECT_EQ(protocol_of(kind).decode_acquire(array({integer(2500)})).what, k::bad);
    auto busy = protocol_of(kind).decode_acquire(integer(2500));
    EXPECT_EQ(busy.what, k::busy);
    EXPECT_FALSE(busy.behind);
  }
}

// Whom a message wakes is the kind's to say (the engine reads nothing else of a payload). Every kind
// today follows Redisson's LockPubSub: "1", a write lock's release, wakes every waiter (readers may
// all enter); anything else, its unlock "0" among them, wakes the first.
TEST(protocols_test, a_write_release_wakes_all_and_an_unlock_wakes_one) {
  for (auto kind : {lock_kind::reentrant, lock_kind::mutex, lock_kind::fair, lock_kind::read, lock_kind::write}) {
    EXPECT_EQ(protocol_of(kind).wakes("1"), wake_policy::all);
    EXPECT_EQ(protocol_of(kind).wakes("0"), wake_policy::one);
    EXPECT_EQ(protocol_of(kind).wakes("garbage"), wake_policy::one);  // it re-checks: a wasted call at worst
  }
}

}  // namespace
}  // namespace redlease::detail
