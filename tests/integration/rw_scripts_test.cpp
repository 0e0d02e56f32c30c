// SPDX-License-Identifier: MIT
// The read-write lock scripts (src/lua/rw_*.lua) against redisson_peer (Redisson's own scripts and
// wait loops, restated from the protocol notes) on one real server. Test names carry the Redisson
// acceptance scenario they follow (redisson-protocol-2.md §2.10).
#include "family_scripts_test_support.hpp"

namespace redlease::test {
namespace {

/// The read-write client loop over our scripts: attempt, subscribe to redisson_rwlock:{name}, attempt
/// again, wait at most the bound; WOULD_DEADLOCK ends it at once.
bool our_rw_lock(const redis_server& s, bool write, const std::string& name, const std::string& owner,
                 long long lease, long long wait) {
  ours o{s.client(), name};
  auto attempt = [&] { return write ? o.write_acquire(owner, lease) : o.read_acquire(owner, lease); };
  auto t0 = steady::now();
  if (attempt().is_nil()) return true;
  auto sub = s.client();
  sub.command({"SUBSCRIBE", o.rw_channel});
  for (;;) {
    auto r = attempt();
    if (r.is_nil()) return true;
    if (r.is_status()) return false;
    long long remaining = wait - ms_since(t0);
    if (remaining <= 0) return false;
    next_message(sub, r.integer < 0 ? remaining : std::min(r.integer, remaining));
  }
}

// ---- read-write lock ---------------------------------------------------------------------------------

TEST_F(family_scripts_test, rw_testMultiRead_readers_share_across_clients_and_block_writers) {
  auto o = mine("r1");
  auto j = java();
  const std::string jr = j.owner(1), me = peer::new_client_id() + ":1", me2 = peer::new_client_id() + ":2";
  ASSERT_TRUE(j.read_lock("r1", jr, 10000, 0));
  EXPECT_TRUE(o.read_acquire(me, 10000).is_nil());
  EXPECT_TRUE(o.read_acquire(me2, 10000).is_nil());
  EXPECT_TRUE(o.read_acquire(me, 10000).is_nil());  // re-entry: level 2
  EXPECT_EQ(raw()({"HGET", "r1", "mode"}).str, "read");
  EXPECT_EQ(raw()({"HGET", "r1", me}).str, "2");
  for (int level : {1, 2}) {
    auto t = raw()({"PTTL", o.timeout_key(me, level)}).integer;
    EXPECT_GT(t, 9000) << level;
    EXPECT_LE(t, 10000) << level;
  }
  auto w = o.write_acquire(me2 + "x", 10000);
  ASSERT_TRUE(w.is_integer()) << w;
  EXPECT_GT(w.integer, 0);
  EXPECT_FALSE(j.write_lock("r1", j.owner(2), 10000, 0));
  EXPECT_EQ(o.read_release(me, 2).integer, 0);
  EXPECT_EQ(raw()({"EXISTS", o.timeout_key(me, 2)}).integer, 0);
  EXPECT_EQ(raw()({"EXISTS", o.timeout_key(me, 1)}).integer, 1);
  EXPECT_EQ(o.read_release(me, 1).integer, 0);
  EXPECT_EQ(o.read_release(me2, 1).integer, 0);
  EXPECT_TRUE(o.read_release(me2, 1).is_nil());  // holds nothing any more
  EXPECT_EQ(j.read_unlock("r1", jr).integer, 1);  // the last reader frees it
  EXPECT_EQ(raw()({"EXISTS", "r1"}).integer, 0);
  EXPECT_TRUE(o.write_acquire(me2 + "x", 10000).is_nil());
}

TEST_F(family_scripts_test, rw_testWriteLock_writer_excludes_both_ways) {
  auto o = mine("r2");
  auto j = java();
  const std::string me = peer::new_client_id() + ":1", jw = j.owner(1);
  ASSERT_TRUE(o.write_acquire(me, 10000).is_nil());
  EXPECT_EQ(raw()({"HGET", "r2", me + ":write"}).str, "1");
  EXPECT_TRUE(j.read_acquire("r2", jw, 10000).is_integer());
  EXPECT_TRUE(j.write_acquire("r2", jw, 10000).is_integer());
  EXPECT_TRUE(j.write_unlock("r2", jw).is_nil());
  EXPECT_EQ(o.write_release(me).integer, 1);
  EXPECT_EQ(raw()({"EXISTS", "r2"}).integer, 0);
  ASSERT_TRUE(j.write_lock("r2", jw, 10000, 0));
  auto r = o.read_acquire(me, 10000);
  EXPECT_TRUE(r.is_integer()) << r;
  r = o.write_acquire(me, 10000);
  EXPECT_TRUE(r.is_integer()) << r;  // contention, not WOULD_DEADLOCK: it holds no read
  EXPECT_TRUE(o.write_release(me).is_nil());
  EXPECT_EQ(j.write_unlock("r2", jw).integer, 1);
  EXPECT_TRUE(o.read_acquire(me, 10000).is_nil());
  // Releasing what is gone: nil, and (unlike Redisson) no message.
  EXPECT_EQ(o.read_release(me).integer, 1);
  auto rec = record({o.rw_channel});
  EXPECT_TRUE(o.read_release(me).is_nil());
  EXPECT_TRUE(o.write_release(me).is_nil());
  EXPECT_TRUE(rec.drain().empty());
}

TEST_F(family_scripts_test, rw_testWR_downgrade_and_the_downgraded_release_publishes) {
  auto o = mine("r3");
  auto j = java();
  const std::string me = peer::new_client_id() + ":1", jr = j.owner(1);
  ASSERT_TRUE(o.write_acquire(me, 30000).is_nil());
  ASSERT_TRUE(o.read_acquire(me, 5000).is_nil());  // downgrade
  EXPECT_TRUE(j.read_acquire("r3", jr, 10000).is_integer());
  auto rec = record({o.rw_channel});
  EXPECT_EQ(o.write_release(me).integer, 1);
  EXPECT_EQ(rec.drain(), (std::vector<message>{{o.rw_channel, "1"}}));
  EXPECT_EQ(raw()({"HGET", "r3", "mode"}).str, "read");
  auto ttl = raw()({"PTTL", "r3"}).integer;
  EXPECT_LE(ttl, 5000);  // from the read's timeout key, not the writer's 30 s
  EXPECT_GT(ttl, 3000);
  EXPECT_TRUE(j.read_acquire("r3", jr, 10000).is_nil());
  EXPECT_EQ(j.read_unlock("r3", jr).integer, 0);
  EXPECT_EQ(o.read_release(me).integer, 1);
  EXPECT_EQ(rec.drain(), (std::vector<message>{{o.rw_channel, "0"}}));

  // Redisson's own downgraded release flips the mode without a message (bug 1).
  ASSERT_TRUE(j.write_acquire("r3", jr, 30000).is_nil());
  ASSERT_TRUE(j.read_acquire("r3", jr, 5000).is_nil());
  EXPECT_EQ(j.write_unlock("r3", jr).integer, 1);
  EXPECT_TRUE(rec.drain().empty());
  EXPECT_EQ(raw()({"HGET", "r3", "mode"}).str, "read");
  // Java's read unlock then frees it and says so.
  EXPECT_EQ(j.read_unlock("r3", jr).integer, 1);
  EXPECT_EQ(rec.drain(), (std::vector<message>{{o.rw_channel, "0"}}));
}

TEST_F(family_scripts_test, rw_testWriteReadReentrancy_upgrade_is_refused_at_once) {
  auto o = mine("r4");
  auto j = java();
  const std::string me = peer::new_client_id() + ":1";
  ASSERT_TRUE(o.read_acquire(me, 30000).is_nil());
  ASSERT_TRUE(j.read_lock("r4", j.owner(1), 30000, 0));
  auto t0 = steady::now();
  auto r = o.write_acquire(me, 30000);
  EXPECT_TRUE(r.is_status()) << r;
  EXPECT_EQ(r.str, "WOULD_DEADLOCK");
  EXPECT_FALSE(our_rw_lock(server(), true, "r4", me, 30000, 10000));  // the loop ends at once too
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_EQ(raw()({"HGET", "r4", "mode"}).str, "read");  // nothing changed
  EXPECT_EQ(raw()({"HEXISTS", "r4", me + ":write"}).integer, 0);
  // Another owner's write is plain contention.
  EXPECT_TRUE(o.write_acquire(peer::new_client_id() + ":2", 30000).is_integer());
  EXPECT_EQ(j.read_unlock("r4", j.owner(1)).integer, 0);
  EXPECT_EQ(o.read_release(me).integer, 1);
  EXPECT_TRUE(o.write_acquire(me, 30000).is_nil());
  // Write, then read, then write again: re-entry, not an upgrade.
  EXPECT_TRUE(o.read_acquire(me, 30000).is_nil());
  EXPECT_TRUE(o.write_acquire(me, 30000).is_nil());
  EXPECT_EQ(raw()({"HGET", "r4", me + ":write"}).str, "2");
}

// An upgrade is refused only while the owner's read is alive (one of its timeout keys): a reader
// field whose fixed lease ran out stays in the hash while other readers keep it, and holds nothing.
// WOULD_DEADLOCK there failed the owner's write at once, for as long as other readers came and went,
// where it only had to wait for them.
TEST_F(family_scripts_test, rw_an_expired_read_is_no_upgrade_only_contention) {
  auto o = mine("r4z");
  const std::string me = peer::new_client_id() + ":1", other = peer::new_client_id() + ":2";
  ASSERT_TRUE(o.read_acquire(me, 200).is_nil());
  ASSERT_TRUE(o.read_acquire(other, 60000).is_nil());
  ASSERT_TRUE(eventually([&] { return raw()({"EXISTS", o.timeout_key(me, 1)}).integer == 0; }));
  EXPECT_EQ(raw()({"HGET", "r4z", me}).str, "1");  // the field stays
  auto r = o.write_acquire(me, 30000);
  ASSERT_TRUE(r.is_integer()) << r;  // contention: wait for the other reader
  EXPECT_GT(r.integer, 50000);
  // A live level above an expired one is still a read held: refused at once.
  ASSERT_TRUE(o.read_acquire(me, 60000).is_nil());  // level 2
  r = o.write_acquire(me, 30000);
  EXPECT_TRUE(r.is_status() && r.str == "WOULD_DEADLOCK") << r;
  EXPECT_EQ(o.read_release(me, 2).integer, 0);  // level 2 goes; level 1 had ended
  r = o.write_acquire(me, 30000);
  EXPECT_TRUE(r.is_integer()) << r;
  // The other reader leaves: no live reader is left, the hash goes, and the owner's write gets in.
  EXPECT_EQ(o.read_release(other).integer, 1);
  EXPECT_TRUE(o.write_acquire(me, 30000).is_nil());
  // A read count that is no number holds no level either.
  EXPECT_EQ(o.write_release(me).integer, 1);
  raw()({"HSET", "r4z", "mode", "read", me, "junk", other, "1"});
  raw()({"SET", o.timeout_key(other, 1), "1", "PX", "60000"});
  raw()({"PEXPIRE", "r4z", "60000"});
  r = o.write_acquire(me, 30000);
  EXPECT_TRUE(r.is_integer()) << r;
  raw()({"DEL", "r4z", o.timeout_key(other, 1)});
}

TEST_F(family_scripts_test, rw_testMultiInstanceReadLockZombieCleanup_read_unlock_deletes_the_hash) {
  for (bool java_zombie : {true, false}) {
    const std::string name = java_zombie ? "r5j" : "r5";
    auto o = mine(name);
    auto j = java();
    const std::string zombie = java_zombie ? j.owner(1) : peer::new_client_id() + ":1";
    const std::string live = java_zombie ? peer::new_client_id() + ":2" : j.owner(2);
    if (java_zombie) {
      ASSERT_TRUE(j.read_acquire(name, zombie, 200).is_nil());
      ASSERT_TRUE(o.read_acquire(live, 30000).is_nil());
    } else {
      ASSERT_TRUE(o.read_acquire(zombie, 200).is_nil());
      ASSERT_TRUE(j.read_acquire(name, live, 30000).is_nil());
    }
    ASSERT_TRUE(eventually([&] { return raw()({"EXISTS", o.timeout_key(zombie, 1)}).integer == 0; }));
    EXPECT_EQ(raw()({"HEXISTS", name, zombie}).integer, 1);  // the crashed reader's field stays
    auto rec = record({o.rw_channel});
    auto r = java_zombie ? o.read_release(live) : j.read_unlock(name, live);
    EXPECT_EQ(r.integer, 1) << name;
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 0) << name;
    EXPECT_EQ(rec.drain(), (std::vector<message>{{o.rw_channel, "0"}})) << name;
    EXPECT_TRUE(o.write_acquire(peer::new_client_id() + ":3", 5000).is_nil()) << name;
  }
}

// The read release first checks one random field's level-1 key (HRANDFIELD), then every field: a
// reader alive only through a later level, among crashed readers, keeps the lock whatever the pick.
TEST_F(family_scripts_test, rw_read_release_finds_a_live_reader_behind_crashed_ones_whatever_the_random_pick) {
  const std::string name = "r5m";
  auto o = mine(name);
  std::vector<std::string> zombies;
  for (int i = 0; i < 4; ++i) {
    zombies.push_back(peer::new_client_id() + ":" + std::to_string(i));
    ASSERT_TRUE(o.read_acquire(zombies.back(), 200).is_nil());
  }
  const std::string live = peer::new_client_id() + ":9";
  ASSERT_TRUE(o.read_acquire(live, 200).is_nil());    // level 1: dies with the zombies
  ASSERT_TRUE(o.read_acquire(live, 60000).is_nil());  // level 2: alive
  ASSERT_TRUE(eventually([&] { return raw()({"EXISTS", o.timeout_key(live, 1)}).integer == 0; }));
  for (auto& z : zombies) EXPECT_EQ(raw()({"EXISTS", o.timeout_key(z, 1)}).integer, 0);
  EXPECT_EQ(raw()({"EXISTS", o.timeout_key(live, 2)}).integer, 1);
  for (int round = 0; round < 20; ++round) {
    const std::string r = peer::new_client_id() + ":" + std::to_string(100 + round);
    ASSERT_TRUE(o.read_acquire(r, 30000).is_nil());
    EXPECT_EQ(o.read_release(r).integer, 0) << round;  // still held: by `live`
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 1) << round;
    EXPECT_GT(raw()({"PTTL", name}).integer, 50000) << round;  // as long as live's level 2
  }
  // The live reader's last live level goes: only expired keys remain (its own level 1 and the
  // crashed readers'), so the hash goes and the lock is free.
  EXPECT_EQ(o.read_release(live).integer, 1);
  EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
}

// A hash whose mode is neither "read" nor "write" is no read-write lock: both acquires refuse it
// with WRONGTYPE, and so does the read release, which changes nothing. It took the hash for one in
// read mode, found no live reader, deleted it whole and said "freed".
TEST_F(family_scripts_test, rw_read_release_refuses_a_mode_that_is_neither_read_nor_write) {
  auto o = mine("r-bogus");
  const std::string me = peer::new_client_id() + ":1";
  raw()({"HSET", "r-bogus", "mode", "bogus", me, "1", "other", "x"});
  raw()({"PEXPIRE", "r-bogus", "60000"});
  auto before = raw()({"DUMP", "r-bogus"}).str;
  auto rec = record({o.rw_channel});
  for (const char* retry : {"0", "1"}) {
    const std::string latch = o.latch();
    auto r = raw()({"EVAL", std::string(lua::rw_read_release.body), "2", "r-bogus", latch, o.rw_channel, "publish", me,
                    "1", retry, "20000"});
    ASSERT_TRUE(r.is_error()) << r;
    EXPECT_EQ(r.str.rfind("WRONGTYPE", 0), 0u) << r.str;
    EXPECT_EQ(raw()({"DUMP", "r-bogus"}).str, before) << "changed";
    EXPECT_EQ(raw()({"EXISTS", latch}).integer, 0);
  }
  EXPECT_TRUE(rec.drain().empty());
  for (auto* acquire : {&lua::rw_read_acquire, &lua::rw_write_acquire}) {
    auto r = raw()({"EVAL", std::string(acquire->body), "1", "r-bogus", "30000", me});
    EXPECT_TRUE(r.is_error() && r.str.rfind("WRONGTYPE", 0) == 0) << acquire->name << ": " << r;
  }
  raw()({"DEL", "r-bogus"});
}

TEST_F(family_scripts_test, rw_testReadLockLeaseTimeoutDiffThreadsRRW_and_testName_timeout_keys_interoperate) {
  for (std::string name : {std::string("r6"), std::string("{test}:abc:key")}) {
    auto o = mine(name);
    auto j = java();
    const std::string a = peer::new_client_id() + ":1", b = j.owner(2);
    ASSERT_TRUE(o.read_acquire(a, 5000).is_nil());
    const std::string expect_key = name == "r6" ? "{r6}:" + a + ":rwlock_timeout:1" : name + ":" + a + ":rwlock_timeout:1";
    EXPECT_EQ(raw()({"EXISTS", expect_key}).integer, 1) << name;
    ASSERT_TRUE(j.read_acquire(name, b, 30000).is_nil());
    EXPECT_GT(raw()({"PTTL", name}).integer, 20000);
    // Java's unlock of B finds our A's timeout key: the hash now lives as long as A's read.
    EXPECT_EQ(j.read_unlock(name, b).integer, 0) << name;
    auto ttl = raw()({"PTTL", name}).integer;
    EXPECT_LE(ttl, 5000) << name;
    EXPECT_GT(ttl, 3000) << name;
    auto w = o.write_acquire(peer::new_client_id() + ":3", 5000);
    ASSERT_TRUE(w.is_integer()) << name;
    EXPECT_LE(w.integer, 5000) << name;
    // And the other way round: our unlock finds Java's key.
    ASSERT_TRUE(j.read_acquire(name, b, 30000).is_nil());
    EXPECT_EQ(o.read_release(a).integer, 0) << name;
    EXPECT_GT(raw()({"PTTL", name}).integer, 20000) << name;
    EXPECT_EQ(j.read_unlock(name, b).integer, 1) << name;
  }
}

TEST_F(family_scripts_test, rw_testWriteRead_release_wakes_waiters_on_the_channel) {
  // Three Java readers waiting on redisson_rwlock:{r7} come in on our write release (message "1").
  {
    auto o = mine("r7");
    const std::string me = peer::new_client_id() + ":1";
    ASSERT_TRUE(o.write_acquire(me, 30000).is_nil());
    const std::string java_id = peer::new_client_id();
    std::atomic<int> got{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; ++i) {
      ts.emplace_back([&, i] {
        auto jt = java(java_id);
        if (jt.read_lock("r7", jt.owner(10 + i), 5000, 10000)) ++got;
      });
    }
    ASSERT_TRUE(eventually([&] { return subscribers(o.rw_channel) == 3; }));
    auto t0 = steady::now();
    EXPECT_EQ(o.write_release(me).integer, 1);
    for (auto& t : ts) t.join();
    EXPECT_EQ(got.load(), 3);
    EXPECT_LT(ms_since(t0), 2000);
  }
  // Our waiting writer comes in on a Java write unlock.
  {
    auto o = mine("r7b");
    auto j = java();
    ASSERT_TRUE(j.write_lock("r7b", j.owner(1), 30000, 0));
    std::atomic<bool> got{false};
    std::thread t([&] { got = our_rw_lock(server(), true, "r7b", peer::new_client_id() + ":2", 5000, 10000); });
    ASSERT_TRUE(eventually([&] { return subscribers(o.rw_channel) == 1; }));
    auto t0 = steady::now();
    EXPECT_EQ(j.write_unlock("r7b", j.owner(1)).integer, 1);
    t.join();
    EXPECT_TRUE(got.load());
    EXPECT_LT(ms_since(t0), 2000);
  }
}

TEST_F(family_scripts_test, rw_testWriteLockExpiration_reentry_does_not_accumulate_ttl) {
  auto o = mine("r8");
  auto j = java();
  const std::string me = peer::new_client_id() + ":1";
  ASSERT_TRUE(o.write_acquire(me, 10000).is_nil());
  ASSERT_TRUE(o.write_acquire(me, 1000).is_nil());
  EXPECT_LE(raw()({"PTTL", "r8"}).integer, 10000);
  EXPECT_GT(raw()({"PTTL", "r8"}).integer, 9000);
  ASSERT_TRUE(j.write_acquire("r8j", j.owner(1), 10000).is_nil());
  ASSERT_TRUE(j.write_acquire("r8j", j.owner(1), 10000).is_nil());
  EXPECT_GT(raw()({"PTTL", "r8j"}).integer, 19000);  // Redisson's PTTL + lease (bug 3)
}

// A release that leaves write holds sets the hash's TTL to the lease of the holds left (ARGV[3]),
// but never below the owner's own reads taken under the write: it cut the hash to the outer write's
// 2 s while the owner's 60 s read was held, and another writer got in 2 s later (mutual exclusion).
TEST_F(family_scripts_test, rw_write_release_never_cuts_the_hash_below_the_owners_own_reads) {
  auto o = mine("r10");
  const std::string me = peer::new_client_id() + ":1", other = peer::new_client_id() + ":2";
  auto pttl = [&](const std::string& k) { return raw()({"PTTL", k}).integer; };
  // A read with a longer lease than the write holds left: the hash lives as long as the read.
  ASSERT_TRUE(o.write_acquire(me, 2000).is_nil());
  ASSERT_TRUE(o.write_acquire(me, 2000).is_nil());  // re-entry
  ASSERT_TRUE(o.read_acquire(me, 60000).is_nil());  // its own read (a downgrade read)
  EXPECT_EQ(o.write_release(me, 2, 2000).integer, 0);
  auto hash_ttl = pttl("r10");  // read first: it can only be the longer one
  auto read_ttl = pttl(o.timeout_key(me, 1));
  EXPECT_GT(read_ttl, 50000);
  EXPECT_GE(hash_ttl + 5, read_ttl) << "the hash would expire under the owner's read";
  EXPECT_TRUE(o.write_acquire(other, 30000).is_integer());
  EXPECT_EQ(o.write_release(me, 1).integer, 1);  // the downgrade: the read keeps the lock
  EXPECT_EQ(o.read_release(me).integer, 1);

  // The released level's longer lease does not stay: the TTL is the longest of the write holds
  // left (2 s) and the reads (5 s), below the 60 s the inner write had given the hash.
  ASSERT_TRUE(o.write_acquire(me, 2000).is_nil());
  ASSERT_TRUE(o.write_acquire(me, 60000).is_nil());
  ASSERT_TRUE(o.read_acquire(me, 5000).is_nil());
  ASSERT_TRUE(o.read_acquire(me, 3000).is_nil());  // level 2: the longest is level 1's
  EXPECT_GT(pttl("r10"), 50000);
  EXPECT_EQ(o.write_release(me, 2, 2000).integer, 0);
  hash_ttl = pttl("r10");
  EXPECT_GE(hash_ttl + 5, pttl(o.timeout_key(me, 1)));
  EXPECT_LE(hash_ttl, 5000);
  EXPECT_GT(hash_ttl, 3000);
  raw()({"DEL", "r10", o.timeout_key(me, 1), o.timeout_key(me, 2)});

  // Without reads the lease given is set, shorter or not (as before).
  ASSERT_TRUE(o.write_acquire(me, 2000).is_nil());
  ASSERT_TRUE(o.write_acquire(me, 60000).is_nil());
  EXPECT_EQ(o.write_release(me, 2, 2000).integer, 0);
  EXPECT_LE(pttl("r10"), 2000);

  // A read count it cannot follow (garbage in the owner's field): the TTL is only ever lengthened.
  raw()({"DEL", "r10"});
  ASSERT_TRUE(o.write_acquire(me, 2000).is_nil());
  ASSERT_TRUE(o.write_acquire(me, 60000).is_nil());
  raw()({"HSET", "r10", me, "junk"});
  EXPECT_EQ(o.write_release(me, 2, 2000).integer, 0);
  EXPECT_GT(pttl("r10"), 50000);
  raw()({"DEL", "r10"});
}

// The watchdog's renewal of a write hold set the hash's TTL to its lease unconditionally (as Java's
// LockTask does): with the owner's own read (a downgrade) on a longer fixed lease, the hash expired
// under that read and another writer got in.
TEST_F(family_scripts_test, rw_renew_of_a_write_never_cuts_the_hash_below_the_owners_own_reads) {
  auto o = mine("r11");
  const std::string me = peer::new_client_id() + ":1", other = peer::new_client_id() + ":2";
  ASSERT_TRUE(o.write_acquire(me, 2000).is_nil());
  ASSERT_TRUE(o.read_acquire(me, 60000).is_nil());  // its own read, on a longer lease
  auto r = o.eval(lua::rw_renew, {"r11"}, {"2000", "w", me});
  ASSERT_TRUE(r.is_array()) << r;
  EXPECT_TRUE(r.elements.empty()) << r;
  EXPECT_GT(raw()({"PTTL", "r11"}).integer, 50000) << "the hash would expire under the owner's read";
  // Still extends a shorter TTL.
  raw()({"PEXPIRE", "r11", "500"});
  r = o.eval(lua::rw_renew, {"r11"}, {"2000", "w", me});
  EXPECT_TRUE(r.is_array() && r.elements.empty()) << r;
  EXPECT_GT(raw()({"PTTL", "r11"}).integer, 1500);
  EXPECT_TRUE(o.write_acquire(other, 30000).is_integer());  // still held
  raw()({"DEL", "r11", o.timeout_key(me, 1)});
}

TEST_F(family_scripts_test, rw_testReadLockExpirationRenewal_rw_renew_extends_reads_and_writes) {
  auto o = mine("r9");
  auto w = mine("r9w");
  const std::string me = peer::new_client_id() + ":1";
  ASSERT_TRUE(o.read_acquire(me, 1000).is_nil());
  ASSERT_TRUE(o.read_acquire(me, 1000).is_nil());
  ASSERT_TRUE(w.write_acquire(me, 1000).is_nil());
  raw()({"SET", "r9s", "x"});
  auto r = o.eval(lua::rw_renew, {"r9", "r9w", "r9", "r9s", "r9gone"}, {"30000", "rwwrr", me, "", "", "", ""});
  ASSERT_TRUE(r.is_array()) << r;
  std::vector<long long> failed;
  for (auto& e : r.elements) failed.push_back(e.integer);
  // "r9" as a write: no write field (2); "r9s": wrong type (3); "r9gone": gone (0).
  EXPECT_EQ(failed, (std::vector<long long>{3, 2, 4, 3, 5, 0}));
  for (const std::string& k : {std::string("r9"), std::string("r9w"), o.timeout_key(me, 1), o.timeout_key(me, 2)}) {
    EXPECT_GT(raw()({"PTTL", k}).integer, 20000) << k;
  }
  // A Java read unlock now keeps the hash alive from our renewed timeout keys.
  auto j = java();
  ASSERT_TRUE(j.read_acquire("r9", j.owner(1), 500).is_nil());
  EXPECT_EQ(j.read_unlock("r9", j.owner(1)).integer, 0);
  EXPECT_GT(raw()({"PTTL", "r9"}).integer, 20000);
}

}  // namespace
}  // namespace redlease::test
