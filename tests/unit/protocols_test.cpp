// SPDX-License-Identifier: MIT
// Unit tests of how the lock protocols read their acquire scripts' replies (src/lock/protocol.hpp),
// without a server: the fair lock's two kinds of wait (at the head, or behind another waiter), and
// replies that no script sends.
#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>
#include <string>
#include <vector>

#include "lock/naming.hpp"
#include "lock/protocol.hpp"
#include "lock/protocols/common.hpp"

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

// One hash-tag rule for every derived name (Redisson's prefixName): a name with its own tag keeps it.
TEST(protocols_test, derived_names_share_the_locks_slot) {
  EXPECT_EQ(tagged("redisson_lock__channel", "orders:42"), "redisson_lock__channel:{orders:42}");
  EXPECT_EQ(tagged("redisson_lock__channel", "{orders}:42"), "redisson_lock__channel:{orders}:42");
  EXPECT_EQ(latch_key("job", "r1"), "redisson_unlock_latch:{job}:r1");
  EXPECT_EQ(latch_key("{job}x", "r1"), "redisson_unlock_latch:{job}x:r1");
  EXPECT_EQ(protocol_of(lock_kind::read).channel("n"), "redisson_rwlock:{n}");
  EXPECT_EQ(protocol_of(lock_kind::fair).waiter_channel("n", "u:1"), "redisson_lock__channel:{n}:u:1");
}

// The renewal's wire layout is the codec's: KEYS the names, ARGV the lease, the letters, and one id
// per key, a run of one owner's fields sent once; tokens are never elided.
TEST(protocols_test, a_renewal_encodes_each_owner_run_once) {
  const auto& codec = protocol_of(lock_kind::reentrant).renewal();
  EXPECT_EQ(&codec, &protocol_of(lock_kind::mutex).renewal());  // one call for both kinds
  EXPECT_EQ(&codec, &protocol_of(lock_kind::fair).renewal());
  EXPECT_EQ(&protocol_of(lock_kind::read).renewal(), &protocol_of(lock_kind::write).renewal());
  EXPECT_NE(&codec, &protocol_of(lock_kind::read).renewal());
  std::vector<renew_item> items{{"a", "u:1", true, 'h'},
                                {"b", "u:1", true, 'h'},
                                {"c", "tok", false, 's'},
                                {"d", "tok", false, 's'},
                                {"e", "u:1", true, 'h'},
                                {"f", "u:2", true, 'h'}};
  arg_list a;
  codec.encode(a, items, ms(30000));
  EXPECT_EQ(args_of(a), (std::vector<std::string>{"6", "a", "b", "c", "d", "e", "f", "30000", "hhsshh", "u:1", "",
                                                  "tok", "tok", "u:1", "u:2"}));
  arg_list check;
  codec.encode(check, std::span(items).first(1), ms(0));
  EXPECT_EQ(args_of(check), (std::vector<std::string>{"1", "a", "0", "h", "u:1"}));
}

TEST(protocols_test, a_renewal_reply_lists_failures_only) {
  const auto& codec = protocol_of(lock_kind::write).renewal();
  std::vector<renew_outcome> out(6);
  codec.decode(array({integer(2), integer(0), integer(3), integer(2), integer(4), integer(3), integer(5),
                      integer(4), integer(6), integer(9), integer(99), integer(0)}),
               out);
  EXPECT_EQ(out, (std::vector<renew_outcome>{renew_outcome::renewed, renew_outcome::gone, renew_outcome::taken,
                                             renew_outcome::wrong_type, renew_outcome::bad_count,
                                             renew_outcome::unknown}));
  codec.decode(bulk("OK"), out);  // no script sends it: nothing is known of any hold
  for (auto o : out) EXPECT_EQ(o, renew_outcome::unknown);
}

// What the semaphore and latch kinds will need from the seam, as today's kinds leave it: one unit per
// acquisition, a grant that names nothing, and every grant a hold.
TEST(protocols_test, todays_kinds_take_one_unit_and_every_grant_is_a_hold) {
  acquire_request r{"n", "u:1", "", ms(1000), false, ms(0), true};
  EXPECT_EQ(r.amount, 1);
  for (auto kind : {lock_kind::reentrant, lock_kind::mutex, lock_kind::fair, lock_kind::read, lock_kind::write}) {
    const auto& p = protocol_of(kind);
    EXPECT_TRUE(p.grant_is_hold());
    auto g = p.decode_acquire(reply{});
    EXPECT_EQ(g.what, k::granted);
    std::string cmd;
    p.encode_remaining_ttl(cmd, "n");
    EXPECT_EQ(cmd, "*2\r\n$4\r\nPTTL\r\n$1\r\nn\r\n");
    EXPECT_EQ(p.decode_remaining_ttl(integer(-2)), -2);
    EXPECT_EQ(p.decode_remaining_ttl(bulk("x")), std::nullopt);
    EXPECT_EQ(p.decode_is_locked(integer(1)), true);
    EXPECT_EQ(p.decode_is_locked(integer(0)), false);
  }
  // The key type a release checks a WRONGTYPE against: only the mutex's is a string.
  EXPECT_EQ(protocol_of(lock_kind::mutex).key_type(), "string");
  EXPECT_EQ(protocol_of(lock_kind::fair).key_type(), "hash");
}

// The semaphore: a grant that is no hold, busy with nothing to wait on but a message, and messages
// read as counts (a waiter is woken by how many permits a message says are free).
TEST(protocols_test, semaphore_reads_replies_and_messages_by_count) {
  const auto& p = protocol_of(lock_kind::semaphore);
  EXPECT_FALSE(p.grant_is_hold());
  EXPECT_EQ(p.key_type(), "string");
  EXPECT_EQ(p.channel("s"), "redisson_sc:{s}");
  EXPECT_EQ(p.channel("{t}:s"), "redisson_sc:{t}:s");
  EXPECT_EQ(p.decode_acquire(integer(1)).what, acquire_result::kind::granted);
  auto busy = p.decode_acquire(integer(0));
  EXPECT_EQ(busy.what, acquire_result::kind::busy);
  EXPECT_EQ(busy.pttl, -1);
  EXPECT_EQ(p.decode_acquire(bulk("x")).what, acquire_result::kind::bad);
  EXPECT_EQ(p.units_available("3"), 3);
  EXPECT_EQ(p.units_available("0"), 0);
  EXPECT_EQ(p.units_available("x"), 0);
  EXPECT_EQ(protocol_of(lock_kind::reentrant).units_available("3"), std::nullopt);
}

}  // namespace
}  // namespace redlease::detail

namespace redlease::detail {
namespace {

// The permit-expirable semaphore: an attempt's id names its permits (32 hex digits, "+n" for n), the
// ids are 16 bytes each and distinct, and a hold renews by those ids in its {name}:timeout zset.
TEST(protocols_test, permit_semaphore_names_its_permits_by_the_attempt_id) {
  const auto& p = protocol_of(lock_kind::permit_semaphore);
  EXPECT_TRUE(p.grant_is_hold());
  EXPECT_TRUE(p.per_attempt_id());
  EXPECT_TRUE(p.poll_capped());
  EXPECT_EQ(p.channel("s"), "redisson_sc:{s}");
  const auto one = p.attempt_id(1);
  EXPECT_EQ(one.size(), 32u);
  const auto three = p.attempt_id(3);
  EXPECT_EQ(three.substr(32), "+3");
  EXPECT_EQ(protocols::permit_count(one), 1);
  EXPECT_EQ(protocols::permit_count(three), 3);
  const auto ids = protocols::permit_ids("000000000000000000000000fffffffe+3");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], std::string(12, '\0') + "\xff\xff\xff\xfe");
  EXPECT_EQ(ids[1], std::string(12, '\0') + "\xff\xff\xff\xff");
  EXPECT_EQ(ids[2], std::string(16, '\0'));  // the last four bytes wrap
  arg_list a;
  const renew_item items[] = {{"n", three, false, 'p'}};
  p.renewal().encode(a, items, ms(3000));
  EXPECT_NE(a.buf.find("{n}:timeout"), std::string::npos);
  EXPECT_EQ(a.count, 1u + 1u + 1u + 1u + 3u);  // numkeys, the zset, the lease, the count, three ids
  for (const auto& id : protocols::permit_ids(three)) EXPECT_NE(a.buf.find("$16\r\n" + id + "\r\n"), std::string::npos);
  // A token whose digits do not decode names 16 zero bytes; an odd count of digits too.
  EXPECT_EQ(protocols::permit_ids("zz"), std::vector<std::string>{std::string(16, '\0')});
  EXPECT_EQ(protocols::permit_ids("abc"), std::vector<std::string>{std::string(16, '\0')});
  EXPECT_EQ(protocols::permit_ids("0102"), std::vector<std::string>{std::string("\x01\x02", 2)});
  EXPECT_EQ(p.decode_acquire(reply{}).what, acquire_result::kind::granted);
  EXPECT_EQ(p.units_available("2"), 2);
}

}  // namespace
}  // namespace redlease::detail
