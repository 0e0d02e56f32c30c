// SPDX-License-Identifier: MIT
// Fencing tokens (issue 12 §2): every kind can take a token that only grows for its name, from the
// acquire script itself; the reentrant lock shares Redisson's RFencedLock counter; the token key is
// not immortal; a paused holder's write is refused by a resource that checks tokens.
#include <gtest/gtest.h>

#include <asio/use_future.hpp>

#include <future>
#include <thread>

#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

class fencing_test : public lock_fixture {};

// Redisson's RFencedLock acquire, as the spec gives it (§5): INCR of a key without TTL.
constexpr const char* redisson_fenced_acquire = R"(
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  local token = redis.call('incr', KEYS[2]);
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return {-1, token};
end;
return {redis.call('pttl', KEYS[1]), -1};)";

TEST_F(fencing_test, tokens_only_grow_for_a_name_across_grants_reentries_and_kinds) {
  client c(cfg());
  auto l = c.lock("fence:a");
  auto t1 = l.lock_and_get_token();
  EXPECT_GT(t1, 0u);
  EXPECT_EQ(l.token(), t1);
  auto t2 = l.lock_and_get_token();  // a re-entry takes a new one, as Redisson's does
  EXPECT_GT(t2, t1);
  EXPECT_EQ(l.token(), t2);
  l.unlock();
  l.unlock();
  EXPECT_EQ(l.token(), 0u);
  auto t3 = l.try_lock_and_get_token(0ms);
  ASSERT_TRUE(t3);
  EXPECT_GT(*t3, t2);
  // The lease is honoured (Redisson ignores it on this path).
  l.unlock();
  auto t4 = l.lock_and_get_token(2000ms);
  EXPECT_GT(t4, *t3);
  auto pttl = raw()({"PTTL", "fence:a"}).integer;
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 2000);
  l.unlock();
  // A plain acquisition takes no token.
  l.lock();
  EXPECT_EQ(l.token(), 0u);
  l.unlock();

  auto m = c.mutex("fence:m");
  auto m1 = m.lock_and_get_token();
  m.unlock();
  auto m2 = m.try_lock_and_get_token(0ms, 5000ms);
  ASSERT_TRUE(m2);
  EXPECT_GT(*m2, m1);
  EXPECT_EQ(m.token(), *m2);
  m.unlock();
}

TEST_F(fencing_test, a_busy_lock_gives_no_token_even_without_a_ttl) {
  // Redisson reads [-1, -1] (a key without TTL held by another) as a grant with token -1.
  raw()({"HSET", "fence:nottl", "someone-else:1", "1"});
  client c(cfg());
  auto l = c.lock("fence:nottl");
  EXPECT_FALSE(l.try_lock_and_get_token(0ms));
  EXPECT_EQ(l.token(), 0u);
  raw()({"SET", "fence:mnottl", "x"});
  auto m = c.mutex("fence:mnottl");
  EXPECT_FALSE(m.try_lock_and_get_token(0ms));
}

TEST_F(fencing_test, tokens_interleave_with_redissons_fenced_lock_on_the_same_name) {
  client c(cfg());
  auto l = c.lock("fence:r");
  auto ours = l.lock_and_get_token();
  l.unlock();
  // Redisson's RFencedLock on the same name INCRs the same counter: its token follows ours.
  auto r = raw().command({"EVAL", redisson_fenced_acquire, "2", "fence:r", "redisson_lock_token:{fence:r}", "30000",
                          "java-uuid:1"});
  ASSERT_TRUE(r.is_array()) << r.str;
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[0].integer, -1);
  auto theirs = static_cast<std::uint64_t>(r.elements[1].integer);
  EXPECT_EQ(theirs, ours + 1);
  // While Redisson holds it, ours waits; after its unlock, ours is above Redisson's.
  EXPECT_FALSE(l.try_lock_and_get_token(0ms));
  raw()({"DEL", "fence:r"});
  auto next = l.lock_and_get_token();
  EXPECT_GT(next, theirs);
  l.unlock();
}

TEST_F(fencing_test, the_token_key_expires_and_the_next_token_is_still_higher) {
  client c(cfg());
  auto l = c.lock("fence:ttl");
  auto t1 = l.lock_and_get_token();
  l.unlock();
  auto ttl = raw()({"PTTL", "redisson_lock_token:{fence:ttl}"}).integer;
  EXPECT_GT(ttl, 0) << "the token key must not be immortal (Redisson's #6510)";
  EXPECT_LE(ttl, 7LL * 24 * 3600 * 1000);
  // The key gone (expired, or a replica that missed the last grant): the clock keeps the order.
  raw()({"DEL", "redisson_lock_token:{fence:ttl}"});
  auto t2 = l.lock_and_get_token();
  EXPECT_GT(t2, t1);
  l.unlock();
  // A token key someone overwrote with garbage is a typed error, and no lock is left held.
  raw()({"SET", "redisson_lock_token:{fence:ttl}", "not-a-number"});
  std::error_code ec;
  EXPECT_EQ(l.lock_and_get_token(ec), 0u);
  EXPECT_EQ(ec, errc::server_error) << "garbage in the token key must fail the fenced acquisition";
  EXPECT_NE(last_error_text().find("redisson_lock_token:{fence:ttl}"), std::string::npos) << last_error_text();
  EXPECT_EQ(raw()({"EXISTS", "fence:ttl"}).integer, 0);
  raw()({"SET", "redlease_mutex_token:{fence:mttl}", "not-a-number"});
  auto m = c.mutex("fence:mttl");
  EXPECT_EQ(m.lock_and_get_token(ec), 0u);
  EXPECT_EQ(ec, errc::server_error);
  EXPECT_NE(last_error_text().find("redlease_mutex_token:{fence:mttl}"), std::string::npos) << last_error_text();
  EXPECT_EQ(raw()({"EXISTS", "fence:mttl"}).integer, 0);
}

// Our token key expired while a Redisson client kept the name: Redisson's INCR restarts it at 1 (its
// keys have no TTL), below every token before. Our next grant used to continue from there (2), so a
// resource refused the new holder and took a paused earlier holder's late write. It moves the
// sequence back above the clock now, and leaves Redisson's key immortal.
TEST_F(fencing_test, a_redisson_sequence_restarted_after_the_key_expired_is_moved_above_the_clock) {
  client c(cfg());
  auto l = c.lock("fence:java");
  auto t1 = l.lock_and_get_token();
  l.unlock();
  raw()({"DEL", "redisson_lock_token:{fence:java}"});  // the 7 days are over
  auto r = raw().command({"EVAL", redisson_fenced_acquire, "2", "fence:java", "redisson_lock_token:{fence:java}",
                          "30000", "java-uuid:1"});
  ASSERT_TRUE(r.is_array()) << r.str;
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[1].integer, 1) << "Redisson starts a missing key at 1";
  raw()({"DEL", "fence:java"});  // Redisson's unlock
  auto t2 = l.lock_and_get_token();
  l.unlock();
  EXPECT_GT(t2, t1);
  EXPECT_EQ(raw()({"PTTL", "redisson_lock_token:{fence:java}"}).integer, -1) << "Redisson's key keeps no TTL";
  // And Redisson's next grant follows ours.
  r = raw().command({"EVAL", redisson_fenced_acquire, "2", "fence:java", "redisson_lock_token:{fence:java}", "30000",
                     "java-uuid:1"});
  ASSERT_TRUE(r.is_array()) << r.str;
  EXPECT_EQ(static_cast<std::uint64_t>(r.elements[1].integer), t2 + 1);
}

// A token key holding 0 or less (no sequence of ours ever does) starts again from the clock, as a
// missing key does, for every kind: before, INCR of "-5" made a grant with token -4, which the
// client read as a bad reply while the lock stayed held in Redis.
TEST_F(fencing_test, a_token_key_at_or_below_zero_starts_again_from_the_clock) {
  client c(cfg());
  const long long clock_floor = 1'600'000'000'000'000;  // microseconds: September 2020
  auto check = [&](auto&& l, const std::string& token_key) {
    SCOPED_TRACE(token_key);
    raw()({"SET", token_key, "-5"});
    std::error_code ec;
    auto t = l.lock_and_get_token(ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_GT(static_cast<long long>(t), clock_floor);
    EXPECT_EQ(std::to_string(t), raw()({"GET", token_key}).str);
    EXPECT_GT(raw()({"PTTL", token_key}).integer, 0);
    l.unlock();
  };
  check(c.lock("fence:neg"), "redisson_lock_token:{fence:neg}");
  check(c.mutex("fence:negm"), "redlease_mutex_token:{fence:negm}");
  check(c.fair_lock("fence:negf"), "redisson_lock_token:{fence:negf}");
  check(c.read_lock("fence:negrw"), "redlease_rwlock_token:{fence:negrw}");
  check(c.write_lock("fence:negrw"), "redlease_rwlock_token:{fence:negrw}");
}

// A token is never 2^53 or more: the scripts' numbers are doubles, which cannot hold such a token
// exactly (from a key at 2^53 + 1, two grants were handed the same token, and neither was the key's
// value). A key someone set that high fails the grant with an error naming it, is left as it was,
// and nothing is held or queued; 2^53 - 1 is still handed out exactly.
TEST_F(fencing_test, a_token_of_2_pow_53_or_more_fails_the_grant_instead_of_repeating_tokens) {
  client c(cfg());
  auto check = [&](auto&& l, const std::string& name, const std::string& token_key) {
    SCOPED_TRACE(token_key);
    raw()({"SET", token_key, "9007199254740990"});
    std::error_code ec;
    auto t = l.lock_and_get_token(ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(t, 9007199254740991u);  // 2^53 - 1: exact
    EXPECT_EQ(raw()({"GET", token_key}).str, "9007199254740991");
    l.unlock();
    for (const std::string& at : {std::string("9007199254740991"), std::string("9007199254740993")}) {
      raw()({"SET", token_key, at});
      EXPECT_EQ(l.lock_and_get_token(ec), 0u) << at;
      EXPECT_EQ(ec, errc::server_error) << at << ": " << ec.message();
      EXPECT_NE(last_error_text().find(token_key), std::string::npos) << last_error_text();
      EXPECT_EQ(raw()({"GET", token_key}).str, at) << "the key is left as it was";
      EXPECT_EQ(raw()({"EXISTS", name, "redisson_lock_queue:{" + name + "}"}).integer, 0) << "nothing held or queued";
    }
    raw()({"DEL", token_key});
  };
  check(c.lock("fence:big"), "fence:big", "redisson_lock_token:{fence:big}");
  check(c.mutex("fence:bigm"), "fence:bigm", "redlease_mutex_token:{fence:bigm}");
  check(c.fair_lock("fence:bigf"), "fence:bigf", "redisson_lock_token:{fence:bigf}");
  check(c.read_lock("fence:bigrw"), "fence:bigrw", "redlease_rwlock_token:{fence:bigrw}");
  check(c.write_lock("fence:bigrw"), "fence:bigrw", "redlease_rwlock_token:{fence:bigrw}");
}

// The fair and read-write locks take their token inside the grant, before writing anything: a
// token key holding garbage (or another type) fails the grant with a typed error, and nothing is
// held or queued afterwards; an attempt that finds the lock held does not touch the key at all
// (busy, no error); the lock works again once the key is repaired.
TEST_F(fencing_test, a_bad_token_key_fails_the_fair_and_read_write_grants_and_leaves_nothing_behind) {
  client c(cfg());
  client holder(cfg());
  std::error_code ec;
  raw()({"SET", "redisson_lock_token:{fence:fair}", "not-a-number"});
  auto f = c.fair_lock("fence:fair");
  {
    auto theirs = holder.fair_lock("fence:fair");
    theirs.lock();
    EXPECT_FALSE(f.try_lock_and_get_token(0ms, ec));
    EXPECT_FALSE(ec) << ec.message();
    theirs.unlock();
  }
  EXPECT_EQ(f.lock_and_get_token(ec), 0u);
  EXPECT_EQ(ec, errc::server_error) << ec.message();
  EXPECT_NE(last_error_text().find("redisson_lock_token:{fence:fair}"), std::string::npos) << last_error_text();
  EXPECT_EQ(raw()({"EXISTS", "fence:fair"}).integer, 0);
  EXPECT_EQ(raw()({"LLEN", "redisson_lock_queue:{fence:fair}"}).integer, 0);
  EXPECT_EQ(raw()({"ZCARD", "redisson_lock_timeout:{fence:fair}"}).integer, 0);
  // A waiter already queued when the key goes bad: handed the lock, its grant fails, and it leaves
  // the queue (Redisson leaves errored waiters queued, holding up everyone behind them).
  raw()({"DEL", "redisson_lock_token:{fence:fair}"});
  {
    auto theirs = holder.fair_lock("fence:fair");
    theirs.lock();
    std::error_code wait_ec;
    std::thread waiter([&] { f.lock_and_get_token(wait_ec); });
    ASSERT_TRUE(eventually([&] { return raw()({"LLEN", "redisson_lock_queue:{fence:fair}"}).integer == 1; }));
    raw()({"SET", "redisson_lock_token:{fence:fair}", "not-a-number"});
    theirs.unlock();
    waiter.join();
    EXPECT_EQ(wait_ec, errc::server_error) << wait_ec.message();
    EXPECT_TRUE(eventually([&] { return raw()({"LLEN", "redisson_lock_queue:{fence:fair}"}).integer == 0; }));
    EXPECT_EQ(raw()({"ZCARD", "redisson_lock_timeout:{fence:fair}"}).integer, 0);
    EXPECT_EQ(raw()({"EXISTS", "fence:fair"}).integer, 0);
  }

  raw()({"DEL", "redlease_rwlock_token:{fence:rw}"});
  raw()({"RPUSH", "redlease_rwlock_token:{fence:rw}", "x"});
  auto r = c.read_lock("fence:rw");
  auto w = c.write_lock("fence:rw");
  {
    auto theirs = holder.write_lock("fence:rw");
    theirs.lock();
    EXPECT_FALSE(r.try_lock_and_get_token(0ms, ec));
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(w.try_lock_and_get_token(0ms, ec));
    EXPECT_FALSE(ec) << ec.message();
    theirs.unlock();
  }
  EXPECT_EQ(r.lock_and_get_token(ec), 0u);
  EXPECT_EQ(ec, errc::wrong_type) << ec.message();
  EXPECT_EQ(w.lock_and_get_token(ec), 0u);
  EXPECT_EQ(ec, errc::wrong_type) << ec.message();
  EXPECT_EQ(raw()({"EXISTS", "fence:rw"}).integer, 0);
  EXPECT_EQ(raw()({"KEYS", "*fence:rw*rwlock_timeout*"}).elements.size(), 0u);

  // Repaired: the grants work, and a plain acquisition never looked at the key.
  raw()({"DEL", "redisson_lock_token:{fence:fair}", "redlease_rwlock_token:{fence:rw}"});
  EXPECT_GT(f.lock_and_get_token(), 0u);
  f.unlock();
  auto t1 = w.lock_and_get_token();
  auto t2 = r.lock_and_get_token();  // a downgrade: the writer reads too
  EXPECT_GT(t2, t1);
  r.unlock();
  w.unlock();
}

// Kleppmann's scenario: holder A takes token 33, pauses past its lease; B takes the lock (token 34)
// and writes; A wakes and writes with 33. The resource refuses A's write.
TEST_F(fencing_test, a_paused_holders_write_is_refused_by_the_resource) {
  client a(cfg());
  client b(cfg());
  auto la = a.mutex("fence:kleppmann");
  auto lb = b.mutex("fence:kleppmann");
  auto ta = la.lock_and_get_token(300ms);  // a fixed lease: nothing renews it while A "pauses"
  EXPECT_TRUE(a.fenced_set("fence:storage", ta, "a-before-pause"));
  // A is paused: its lease runs out (it is told it lost the lock, but a paused process would not
  // act on that before writing).
  auto tb = lb.try_lock_and_get_token(5000ms);
  ASSERT_TRUE(tb);
  EXPECT_GT(*tb, ta);
  EXPECT_TRUE(b.fenced_set("fence:storage", *tb, "b"));
  // A wakes up and writes with its old token: refused, and B's value stands.
  EXPECT_FALSE(a.fenced_set("fence:storage", ta, "a-after-pause"));
  EXPECT_EQ(raw()({"HGET", "fence:storage", "value"}).str, "b");
  EXPECT_TRUE(b.fenced_set("fence:storage", *tb, "b-again"));  // the holder may write again
  lb.unlock();
}

// The resource compared tokens as Lua numbers (doubles): above 2^53 two tokens one apart were
// equal, and the stale writer's was accepted. Tokens from another sequence can be that large.
TEST_F(fencing_test, the_resource_compares_tokens_above_2_pow_53_exactly) {
  client c(cfg());
  const std::uint64_t big = 9007199254740993ull;  // 2^53 + 1: as a double, 2^53
  EXPECT_TRUE(c.fenced_set("fence:big", big, "new"));
  EXPECT_FALSE(c.fenced_set("fence:big", big - 1, "stale"));
  EXPECT_FALSE(c.fenced_set("fence:big", 999, "stale"));
  EXPECT_EQ(raw()({"HGET", "fence:big", "value"}).str, "new");
  EXPECT_TRUE(c.fenced_set("fence:big", 18446744073709551615ull, "max"));  // 2^64 - 1
  EXPECT_FALSE(c.fenced_set("fence:big", 18446744073709551614ull, "stale"));
  EXPECT_EQ(raw()({"HGET", "fence:big", "value"}).str, "max");
  // A token stored with leading zeros (by another writer) compares by value.
  raw()({"HSET", "fence:big", "token", "000123"});
  EXPECT_FALSE(c.fenced_set("fence:big", 122, "stale"));
  EXPECT_TRUE(c.fenced_set("fence:big", 123, "same"));
  raw()({"DEL", "fence:big"});
}

TEST_F(fencing_test, async_fenced_acquisitions_complete_with_the_token) {
  client c(cfg());
  auto l = c.lock("fence:async");
  auto owner = c.new_owner();
  auto f = l.async_lock_and_get_token(owner, asio::use_future);
  auto t = f.get();
  EXPECT_GT(t, 0u);
  EXPECT_EQ(l.token(owner), t);
  auto other = c.new_owner();
  auto g = l.async_try_lock_and_get_token(other, 0ms, asio::use_future);
  EXPECT_EQ(g.get(), 0u);  // busy: no token, no error
  l.async_unlock(owner, asio::use_future).get();
}

}  // namespace
}  // namespace redlease::test
