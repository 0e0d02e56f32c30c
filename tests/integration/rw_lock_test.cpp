// SPDX-License-Identifier: MIT
// The read-write lock through the library (issue 12 §4): readers share, a writer excludes, a
// downgrade works and its release wakes readers, an upgrade fails at once, the watchdog renews the
// readers' timeout keys, and redlease and a Redisson-behaviour peer exclude and wake each other.
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <thread>

#include "lock_test_support.hpp"
#include "redisson_peer.hpp"
#include "slowlog.hpp"

namespace redlease::test {
namespace {

class rw_lock_test : public lock_fixture {
 protected:
  // A waiter's client that re-checks only every 8 s: within the tests' 1 s bounds, only a message
  // (or a release that wakes the local waiters) can let it in.
  config no_poll() {
    auto c = cfg();
    c.mutex_poll_cap = 8000ms;
    return c;
  }
};

TEST_F(rw_lock_test, readers_share_and_a_writer_excludes) {
  client a(cfg()), b(no_poll());
  auto ra = a.read_lock("rw:share");
  auto rb = b.read_lock("rw:share");
  auto wb = b.write_lock("rw:share");
  ASSERT_TRUE(ra.try_lock());
  ASSERT_TRUE(rb.try_lock());
  EXPECT_EQ(raw()({"HGET", "rw:share", "mode"}).str, "read");
  std::error_code ec;
  EXPECT_FALSE(std::async(std::launch::async, [&] { return wb.try_lock(0ms, ec); }).get());
  EXPECT_FALSE(ec);
  // The writer waits, and is woken when the last reader leaves.
  auto w = std::async(std::launch::async, [&] {
    bool got = wb.try_lock(5000ms);
    if (got) wb.unlock();
    return got;
  });
  ra.unlock();
  EXPECT_EQ(w.wait_for(200ms), std::future_status::timeout) << "a reader is still in";
  auto t0 = steady::now();
  rb.unlock();
  EXPECT_TRUE(w.get());
  EXPECT_LT(ms_since(t0), 1000);
}

// An ACL that grants the lock's name but not its readers' timeout keys ({NAME}:...): the read grant
// fails with no_permission and leaves nothing. It used to write the hash first and fail at the
// timeout key, leaving a read-write hash with no TTL that nobody held: every writer waited for ever.
TEST_F(rw_lock_test, a_read_grant_refused_its_timeout_key_leaves_no_hash) {
  ASSERT_TRUE(raw()({"ACL", "SETUSER", "noreadkeys", "on", ">pw", "~acl-rw:*", "~redisson_unlock_latch:{acl-rw:*", "&*",
                     "+@all"})
                  .is_ok());
  auto c = cfg();
  c.username = "noreadkeys";
  c.password = "pw";
  client cl(c);
  // A fresh hash, and a re-entry into a hash another reader holds.
  for (bool other_reader : {false, true}) {
    SCOPED_TRACE(other_reader);
    std::string name = other_reader ? "acl-rw:held" : "acl-rw:fresh";
    client admin(cfg());
    auto theirs = admin.read_lock(name);
    if (other_reader) {
      ASSERT_TRUE(theirs.try_lock());
    }
    std::error_code ec;
    EXPECT_FALSE(cl.read_lock(name).try_lock(ec));
    EXPECT_EQ(ec, make_error_code(errc::no_permission)) << ec.message() << ": " << last_error_text();
    if (other_reader) {
      EXPECT_EQ(raw()({"HLEN", name}).integer, 2) << "mode and the other reader only";
      theirs.unlock();
    }
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
  }
  raw()({"ACL", "DELUSER", "noreadkeys"});
}

TEST_F(rw_lock_test, a_downgrade_works_and_its_release_lets_readers_in_at_once) {
  client a(cfg()), b(no_poll());
  auto wa = a.write_lock("rw:down");
  auto ra = a.read_lock("rw:down");
  auto rb = b.read_lock("rw:down");
  wa.lock();
  EXPECT_TRUE(ra.try_lock());  // the writer may read: one owner holds both sides
  EXPECT_TRUE(wa.valid());
  EXPECT_TRUE(ra.valid());
  auto reader = std::async(std::launch::async, [&] {
    bool got = rb.try_lock(5000ms);
    if (got) rb.unlock();
    return got;
  });
  EXPECT_EQ(reader.wait_for(200ms), std::future_status::timeout);
  auto t0 = steady::now();
  wa.unlock();  // mode flips to read: the waiting reader is woken (Redisson publishes nothing here)
  EXPECT_TRUE(reader.get());
  EXPECT_LT(ms_since(t0), 1000);
  ra.unlock();
  EXPECT_EQ(raw()({"EXISTS", "rw:down"}).integer, 0);
}

TEST_F(rw_lock_test, an_upgrade_fails_at_once_with_would_deadlock) {
  client c(cfg());
  auto r = c.read_lock("rw:up");
  auto w = c.write_lock("rw:up");
  r.lock();
  std::error_code ec;
  auto t0 = steady::now();
  EXPECT_FALSE(w.try_lock(5000ms, ec));
  EXPECT_EQ(ec, make_error_code(errc::would_deadlock));
  EXPECT_LT(ms_since(t0), 1000) << "Redisson waits until the timeout";
  r.unlock();
  EXPECT_TRUE(w.try_lock());
  w.unlock();
}

TEST_F(rw_lock_test, the_watchdog_renews_the_readers_timeout_keys) {
  client c(cfg(1500ms));  // renewed every 500 ms
  auto r = c.read_lock("rw:wd");
  r.lock();
  std::this_thread::sleep_for(2000ms);  // beyond the lease: only renewals keep hash and timeout key
  EXPECT_TRUE(r.valid());
  EXPECT_GT(raw()({"PTTL", "rw:wd"}).integer, 0);
  auto keys = raw()({"KEYS", "{rw:wd}:*rwlock_timeout*"});
  ASSERT_EQ(keys.elements.size(), 1u);
  EXPECT_GT(raw()({"PTTL", keys.elements[0].str}).integer, 0);
  r.unlock();
  EXPECT_EQ(raw()({"EXISTS", "rw:wd"}).integer, 0);
}

TEST_F(rw_lock_test, redlease_and_redisson_exclude_and_wake_each_other) {
  const std::string name = "rw:peer";
  redisson_peer peer(server().host(), server().port());
  auto reader = peer.owner(1);
  ASSERT_TRUE(peer.read_lock(name, reader, 30000, 0));
  client c(no_poll());
  auto w = c.write_lock(name);
  auto got = std::async(std::launch::async, [&] {
    bool ok = w.try_lock(5000ms);
    if (ok) w.unlock();
    return ok;
  });
  EXPECT_EQ(got.wait_for(200ms), std::future_status::timeout) << "Redisson's reader must exclude our writer";
  auto t0 = steady::now();
  peer.read_unlock(name, reader);  // Redisson's release publishes: our writer wakes
  EXPECT_TRUE(got.get());
  EXPECT_LT(ms_since(t0), 1000);
  // Our reader excludes Redisson's writer; our readers and Redisson's share.
  auto r = c.read_lock(name);
  r.lock();
  EXPECT_FALSE(peer.write_lock(name, peer.owner(2), 30000, 0));
  EXPECT_TRUE(peer.read_lock(name, peer.owner(3), 30000, 0));
  peer.read_unlock(name, peer.owner(3));
  r.unlock();
  EXPECT_TRUE(peer.write_lock(name, peer.owner(2), 30000, 0));
}

// Redisson's downgrade (its writer takes a read, then unlocks the write) frees the lock for readers
// and publishes nothing. Our waiting reader re-checks every poll cap; it slept until the Java
// writer's PTTL (here ten minutes, so until the end of its wait) instead.
TEST_F(rw_lock_test, a_reader_waiting_on_a_redisson_writer_gets_in_after_its_silent_downgrade) {
  const std::string name = "rw:silent";
  redisson_peer peer(server().host(), server().port());
  const std::string writer = peer.owner(5);
  ASSERT_TRUE(peer.write_acquire(name, writer, 600000).is_nil());
  client c(cfg());
  auto r = c.read_lock(name);
  auto got = std::async(std::launch::async, [&] {
    bool ok = r.try_lock(5000ms);
    if (ok) r.unlock();
    return ok;
  });
  EXPECT_EQ(got.wait_for(300ms), std::future_status::timeout) << "the Redisson writer must exclude our reader";
  ASSERT_TRUE(peer.read_acquire(name, writer, 600000).is_nil());  // its own read
  auto t0 = steady::now();
  EXPECT_EQ(peer.write_unlock(name, writer).integer, 1);  // mode read, no message
  EXPECT_EQ(raw()({"HGET", name, "mode"}).str, "read");
  EXPECT_TRUE(got.get()) << "the reader slept out its wait";
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_EQ(peer.read_unlock(name, writer).integer, 1);
}

TEST_F(rw_lock_test, readers_and_writers_draw_fencing_tokens_from_one_sequence) {
  client c(cfg());
  auto w = c.write_lock("rw:fence");
  auto r = c.read_lock("rw:fence");
  auto t1 = w.lock_and_get_token();
  auto t2 = r.lock_and_get_token();  // a downgrade
  EXPECT_GT(t2, t1);
  EXPECT_EQ(w.token(), t1);
  EXPECT_EQ(r.token(), t2);
  w.unlock();
  r.unlock();
  auto t3 = w.try_lock_and_get_token(0ms);
  ASSERT_TRUE(t3);
  EXPECT_GT(*t3, t2);
  w.unlock();
  EXPECT_GT(raw()({"PTTL", "redlease_rwlock_token:{rw:fence}"}).integer, 0);
}

// A hold count is eleven bytes in the hash, not eleven digits' worth of keys: Java's release and
// renewal loop over it (a crashed reader's "100000000" kept the server busy for a minute). Here the
// scripts look at no more than 1000 timeout keys; undecided, the hash keeps its TTL.
TEST_F(rw_lock_test, a_huge_hold_count_in_the_hash_does_not_keep_the_server_busy) {
  client c(cfg());
  raw()({"HSET", "rw:huge", "mode", "read", "crashed:1", "100000000"});
  raw()({"PEXPIRE", "rw:huge", "20000"});
  auto r = c.read_lock("rw:huge");
  ASSERT_TRUE(r.try_lock());
  auto t0 = steady::now();
  std::error_code ec;
  r.unlock(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_LT(ms_since(t0), 500);
  EXPECT_EQ(raw()({"PING"}).str, "PONG");
  // The crashed reader is undecided: it counts as alive, and the lock is free when the hash expires.
  EXPECT_EQ(raw()({"HGET", "rw:huge", "mode"}).str, "read");
  auto ttl = raw()({"PTTL", "rw:huge"}).integer;
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 30000) << "no longer than the lease our read gave it";

  // A writer's last release with such a field beside it (the downgrade's scan of the reads left).
  raw()({"DEL", "rw:huge"});
  auto w = c.write_lock("rw:huge");
  ASSERT_TRUE(w.try_lock());
  raw()({"HSET", "rw:huge", "crashed:1", "100000000"});
  t0 = steady::now();
  w.unlock(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_LT(ms_since(t0), 500);
  EXPECT_EQ(raw()({"HGET", "rw:huge", "mode"}).str, "read");
  EXPECT_GT(raw()({"PTTL", "rw:huge"}).integer, 0) << "the writer's TTL stands";
}

// Adds `n` fields of crashed readers ("crashed-<i>:1" -> 1) to the hash `name`.
void add_crashed_readers(raw_client& r, const std::string& name, int n) {
  std::vector<std::string> hset{"HSET", name};
  for (int k = 0; k < n; k += 20000) {
    hset.resize(2);
    for (int i = k; i < std::min(n, k + 20000); ++i) {
      hset.push_back("crashed-" + std::to_string(i) + ":1");
      hset.push_back("1");
    }
    r.command(hset);
  }
}

// The server's time (us) to copy every field of the hash `name` into a script, as the releases did
// before (HGETALL).
long long whole_hash_us(raw_client& r, const std::string& name) {
  slowest_logged_us(r);
  r({"EVAL", "return #redis.call('hgetall', KEYS[1])", "1", name});
  return slowest_logged_us(r);
}

// A hash that crashed readers grew to 300,000 fields: a release looks at one HSCAN step (about
// 1,000 fields), not all of them (HGETALL copied every field: about 0.25 s of a busy server per
// release here). Each release is timed against that copy of the same hash, by the server's clock.
TEST_F(rw_lock_test, a_release_looks_at_a_thousand_fields_of_a_hash_of_300000_crashed_readers) {
  client c(cfg());
  auto fill = [&](const std::string& name) { add_crashed_readers(raw(), name, 300000); };
  raw()({"HSET", "rw:many", "mode", "read"});
  fill("rw:many");
  raw()({"PEXPIRE", "rw:many", "20000"});
  auto r = c.read_lock("rw:many");
  log_every_command(raw());
  std::error_code ec;
  // Each in the best of three trials (slowlog.hpp).
  const auto read_release = best_of_three([&] {
    EXPECT_TRUE(r.try_lock());
    timed_pair t;
    t.reference_us = whole_hash_us(raw(), "rw:many");
    r.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
    t.us = slowest_logged_us(raw());
    return t;
  });
  EXPECT_TRUE(read_release.a_third()) << "the read release (" << read_release.us << " us) read the whole hash ("
                                      << read_release.reference_us << " us)";
  // Undecided: the readers it did not look at count as alive, and the hash keeps its TTL.
  EXPECT_EQ(raw()({"HGET", "rw:many", "mode"}).str, "read");
  EXPECT_EQ(raw()({"HLEN", "rw:many"}).integer, 300001);
  EXPECT_GT(raw()({"PTTL", "rw:many"}).integer, 0);

  // A writer's last release with them beside it (the downgrade's scan of the reads left).
  auto w = c.write_lock("rw:many");
  const auto write_release = best_of_three([&] {
    raw()({"DEL", "rw:many"});
    EXPECT_TRUE(w.try_lock());
    fill("rw:many");
    timed_pair t;
    t.reference_us = whole_hash_us(raw(), "rw:many");
    w.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
    t.us = slowest_logged_us(raw());
    return t;
  });
  EXPECT_TRUE(write_release.a_third()) << "the write release (" << write_release.us << " us) read the whole hash ("
                                       << write_release.reference_us << " us)";
  EXPECT_EQ(raw()({"HGET", "rw:many", "mode"}).str, "read");
  EXPECT_GT(raw()({"PTTL", "rw:many"}).integer, 0) << "the writer's TTL stands";
}

// A forced unlock of such a hash does not block the server while 300,000 fields are freed (a DEL
// did, for about 60 ms here): UNLINK hands the memory to Redis's background thread. With UNLINK
// renamed or refused to the user, the script deletes with DEL and the outcome is the same.
TEST_F(rw_lock_test, a_forced_unlock_frees_a_hash_of_300000_crashed_readers_in_the_background) {
  client c(cfg());
  auto lazyfreed = [&]() -> long long {
    const std::string info = raw()({"INFO", "memory"}).str, field = "lazyfreed_objects:";
    auto at = info.find(field);
    return at == std::string::npos ? -1 : std::stoll(info.substr(at + field.size()));
  };
  const long long before = lazyfreed();
  ASSERT_GE(before, 0) << "Redis 6.2 or later reports lazyfreed_objects";
  raw()({"HSET", "rw:forced", "mode", "read"});
  add_crashed_readers(raw(), "rw:forced", 300000);
  EXPECT_TRUE(c.read_lock("rw:forced").force_unlock());
  EXPECT_EQ(raw()({"EXISTS", "rw:forced"}).integer, 0);
  EXPECT_TRUE(eventually([&] { return lazyfreed() == before + 1; })) << "the hash was freed by the server's own thread";

  raw()({"ACL", "SETUSER", "default", "-unlink"});
  ASSERT_TRUE(raw()({"UNLINK", "rw:forced"}).is_error());
  raw()({"HSET", "rw:forced", "mode", "read", "crashed-0:1", "1"});
  std::error_code ec;
  EXPECT_TRUE(c.read_lock("rw:forced").force_unlock(ec));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(raw()({"EXISTS", "rw:forced"}).integer, 0);
  EXPECT_FALSE(c.read_lock("rw:forced").force_unlock(ec)) << "nothing left to delete";
  raw()({"ACL", "SETUSER", "default", "+unlink"});
}

// A forced unlock frees a read-write lock for everyone, so it publishes "1" (Redisson's write
// forceUnlock), which wakes every Java waiter of a client; "0" wakes one, and a Java reader behind
// it sleeps until its TTL. (Our waiters chain their wake-ups and get it either way.)
TEST_F(rw_lock_test, a_forced_unlock_tells_every_java_waiter) {
  client c(cfg());
  auto w = c.write_lock("rw:forced-wake");
  w.lock();
  raw_client sub(server().host(), server().port());
  ASSERT_TRUE(sub.command({"SUBSCRIBE", "redisson_rwlock:{rw:forced-wake}"}).is_array());
  EXPECT_TRUE(c.write_lock("rw:forced-wake").force_unlock());
  sub.set_timeout(5000ms);
  auto m = sub.read_reply();
  ASSERT_TRUE(m.is_array() && m.elements.size() == 3) << m.to_string();
  EXPECT_EQ(m.elements[0].str, "message");
  EXPECT_EQ(m.elements[2].str, "1");
}

TEST_F(rw_lock_test, a_read_hold_nests_at_most_1000_deep) {
  client c(cfg());
  auto r = c.read_lock("rw:deep");
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(r.try_lock()) << i;
  std::error_code ec;
  EXPECT_FALSE(r.try_lock(0ms, ec));
  EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
  std::string field;
  for (auto& f : raw()({"HKEYS", "rw:deep"}).elements)
    if (f.str != "mode") field = f.str;
  EXPECT_EQ(raw()({"HGET", "rw:deep", field}).str, "1000");
  EXPECT_EQ(raw()({"EXISTS", "{rw:deep}:" + field + ":rwlock_timeout:1001"}).integer, 0);
  EXPECT_EQ(raw()({"EXISTS", "{rw:deep}:" + field + ":rwlock_timeout:1000"}).integer, 1);
  for (int i = 0; i < 1000; ++i) r.unlock();
  EXPECT_EQ(raw()({"EXISTS", "rw:deep"}).integer, 0);
}

// One bad value must not fail the renewal of every hold in its batch.
TEST_F(rw_lock_test, the_watchdog_reports_a_read_hold_whose_count_is_garbage_and_renews_the_others) {
  client c(cfg(1500ms));  // renewed every 500 ms
  auto bad = c.read_lock("rw:garbage");
  auto good = c.read_lock("rw:fine");
  std::promise<lost_info> lost;
  bad.on_lost([&lost](const lost_info& i) { lost.set_value(i); });
  bad.lock();
  good.lock();
  std::string field;
  for (auto& f : raw()({"HKEYS", "rw:garbage"}).elements)
    if (f.str != "mode") field = f.str;
  ASSERT_FALSE(field.empty());
  raw()({"HSET", "rw:garbage", field, "99999999999"});
  auto f = lost.get_future();
  ASSERT_EQ(f.wait_for(5000ms), std::future_status::ready);
  auto info = f.get();
  EXPECT_EQ(info.reason, lost_reason::taken);
  EXPECT_EQ(info.cause, make_error_code(errc::bad_reply));
  EXPECT_NE(info.detail.find("rw:garbage"), std::string::npos) << info.detail;
  std::this_thread::sleep_for(2000ms);  // beyond the lease: only renewals keep the other hold
  EXPECT_TRUE(good.valid());
  EXPECT_GT(raw()({"PTTL", "rw:fine"}).integer, 0);
  good.unlock();
}

TEST_F(rw_lock_test, a_mode_that_is_neither_read_nor_write_is_the_wrong_type) {
  client c(cfg());
  raw()({"HSET", "rw:bogus", "mode", "bogus"});
  std::error_code ec;
  EXPECT_FALSE(c.read_lock("rw:bogus").try_lock(1000ms, ec));
  EXPECT_EQ(ec, make_error_code(errc::wrong_type));
  ec.clear();
  EXPECT_FALSE(c.write_lock("rw:bogus").try_lock(1000ms, ec));
  EXPECT_EQ(ec, make_error_code(errc::wrong_type));
  auto all = raw()({"HGETALL", "rw:bogus"});
  ASSERT_EQ(all.elements.size(), 2u) << "nothing written";
  EXPECT_EQ(all.elements[1].str, "bogus");

  // A read held when the mode is overwritten: its unlock says so and deletes nothing (it deleted the
  // whole hash, and answered "freed").
  raw()({"DEL", "rw:bogus"});
  auto r = c.read_lock("rw:bogus");
  ASSERT_TRUE(r.try_lock());
  raw()({"HSET", "rw:bogus", "mode", "bogus"});
  ec.clear();
  r.unlock(ec);
  EXPECT_EQ(ec, make_error_code(errc::wrong_type)) << ec.message();
  EXPECT_EQ(raw()({"HLEN", "rw:bogus"}).integer, 2) << "the hash was changed";
  EXPECT_EQ(raw()({"HGET", "rw:bogus", "mode"}).str, "bogus");
  raw()({"DEL", "rw:bogus"});
}

// A read re-entry on an owner count someone overwrote with what no client makes (below 0, or deeper
// than a read nests) is refused with the script's words, and the count is left as it was. Before, it
// was granted, and the first renewal found it lost.
TEST_F(rw_lock_test, a_read_reentry_on_a_count_that_is_no_count_is_refused) {
  client c(cfg());
  const std::string me = c.id() + ":" + std::to_string(this_thread_owner());
  for (const char* count : {"99999999999", "1000", "-3"}) {
    SCOPED_TRACE(count);
    raw()({"HSET", "rw:count", "mode", "read", me, count});
    raw()({"PEXPIRE", "rw:count", "30000"});
    std::error_code ec;
    EXPECT_FALSE(c.read_lock("rw:count").try_lock_and_get_token(0ms, ec));
    EXPECT_EQ(ec, errc::server_error) << ec.message();
    EXPECT_NE(last_error_text().find("not a count of read holds"), std::string::npos) << last_error_text();
    EXPECT_EQ(raw()({"HGET", "rw:count", me}).str, count) << "the count was changed";
    EXPECT_EQ(raw()({"EXISTS", "redlease_rwlock_token:{rw:count}"}).integer, 0) << "a refused re-entry took a token";
    EXPECT_EQ(c.stats().held_locks, 0u);
    raw()({"DEL", "rw:count"});
  }
}

}  // namespace
}  // namespace redlease::test
