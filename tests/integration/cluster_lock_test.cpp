// SPDX-License-Identifier: MIT
// Locks on a Redis Cluster (3 masters + 3 replicas, tests/support/cluster_rig.hpp), one rig for the
// whole binary: the client pointed at one node routes every key to its slot's master, follows
// MOVED after a resharding and ASK during one, keeps a hold through a failover, and wakes a waiter
// on another node. Each test leaves the cluster ready for the next.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "cluster_suite.hpp"
#include "lock_test_support.hpp"
#include "redis_fixture.hpp"
#include "redlease/client.hpp"

#include <asio/use_future.hpp>

namespace redlease::test {
namespace {

using namespace std::chrono_literals;

class cluster_lock_test : public cluster_suite {
 protected:
  // A client given the node on `port` as its one seed, with a short watchdog.
  static config cfg_at(std::uint16_t port, std::chrono::milliseconds watchdog = 3000ms) {
    config c;
    c.host = "127.0.0.1";
    c.port = port;
    c.watchdog_timeout = watchdog;
    c.connect_timeout = 1000ms;
    c.request_timeout = 2000ms;
    return c;
  }
  static bool held_on(std::uint16_t port, const std::string& key) {
    return rig_->client(port)({"EXISTS", key}).integer == 1;
  }
  // As held_on, on a node that imports the key's slot (ASKING) or replicates it (READONLY).
  static bool held_on_with(std::uint16_t port, const std::string& key, const char* first) {
    auto raw = rig_->client(port);
    raw({first});
    return raw({"EXISTS", key}).integer == 1;
  }
  static std::string channel_of(const std::string& name) { return "redisson_lock__channel:{" + name + "}"; }
  static long long shard_subscribers(std::uint16_t port, const std::string& channel) {
    auto r = rig_->client(port)({"PUBSUB", "SHARDNUMSUB", channel});
    return r.elements.size() == 2 ? r.elements[1].integer : -1;
  }
  static long long classic_subscribers(const std::string& channel) {
    long long n = 0;
    for (auto p : rig_->ports()) n += rig_->client(p)({"PUBSUB", "NUMSUB", channel}).elements.at(1).integer;
    return n;
  }
  // A thread that takes `name` with `c` (however long that takes), sets `got`, and releases it.
  static std::thread wait_then_release(client& c, const std::string& name, std::atomic<bool>& got) {
    return std::thread([&c, name, &got] {
      auto l = c.lock(name);
      l.lock();
      got = true;
      l.unlock();
    });
  }
  // A name whose slot the master on `port` serves.
  static std::string name_on(std::uint16_t port, const std::string& stem) {
    for (int i = 0;; ++i) {
      auto n = stem + ":" + std::to_string(i);
      if (rig_->master_of(n) == port) return n;
    }
  }

};


TEST_F(cluster_lock_test, one_node_url_routes_every_key_to_its_slots_master) {
  const auto masters = rig_->masters();
  client c(cfg_at(masters[1]));
  std::vector<lock> held;
  for (int i = 0; i < 30; ++i) {
    auto l = c.lock("cluster:route:" + std::to_string(i));
    ASSERT_TRUE(l.try_lock()) << i;
    held.push_back(l);
  }
  std::set<std::uint16_t> used;
  for (int i = 0; i < 30; ++i) {
    const auto name = "cluster:route:" + std::to_string(i);
    const auto owner = rig_->master_of(name);
    used.insert(owner);
    EXPECT_TRUE(held_on(owner, name)) << name << " on " << owner;
  }
  EXPECT_EQ(used.size(), 3u) << "30 names span the three masters";
  for (auto& l : held) l.unlock();
  for (int i = 0; i < 30; ++i) {
    const auto name = "cluster:route:" + std::to_string(i);
    EXPECT_FALSE(held_on(rig_->master_of(name), name)) << name;
  }
}

TEST_F(cluster_lock_test, several_seeds_the_first_down) {
  const auto masters = rig_->masters();
  // Port 1: nothing listens there on a test machine; the second seed answers.
  auto cfg = config::from_url("redis://127.0.0.1:1,127.0.0.1:" + std::to_string(masters[2]));
  cfg.connect_timeout = 1000ms;
  client c(cfg);
  auto l = c.lock("cluster:seeds");
  ASSERT_TRUE(l.try_lock());
  EXPECT_TRUE(held_on(rig_->master_of("cluster:seeds"), "cluster:seeds"));
  l.unlock();
}

// Segments spread the load, so in a cluster they sit on several masters: one call per segment. The
// stock is still never oversold and never split an order; a name with a hash tag keeps them in one
// slot and one call.
TEST_F(cluster_lock_test, a_segmented_stock_spread_over_the_masters) {
  const auto masters = rig_->masters();
  client c(cfg_at(masters[0]));
  for (const std::string name : {"cluster:stock", "{cluster:tagged}:stock"}) {
    SCOPED_TRACE(name);
    auto s = c.stock(name, 6);
    s.init(60);
    std::set<std::uint16_t> nodes;
    for (std::size_t i = 0; i < 6; ++i) {
      const auto key = s.segment_key(i);
      nodes.insert(rig_->master_of(key));
      EXPECT_EQ(rig_->client(rig_->master_of(key))({"GET", key}).str, "10");
    }
    EXPECT_EQ(nodes.size(), name[0] == '{' ? 1u : 3u);
    EXPECT_EQ(s.remaining(), 60);
    std::atomic<int> taken{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&] {
        for (int i = 0; i < 20; ++i)
          if (s.try_take(1)) ++taken;
      });
    for (auto& t : ts) t.join();
    EXPECT_EQ(taken.load(), 60);
    EXPECT_EQ(s.remaining(), 0);
    EXPECT_FALSE(s.try_take(1));
  }
}

TEST_F(cluster_lock_test, a_hold_is_renewed_through_moved_after_its_slot_moves) {
  const auto masters = rig_->masters();
  client c(cfg_at(masters[0], 600ms));  // renewals every 200 ms
  const auto name = name_on(masters[0], "cluster:moved");
  const int slot = rig_->slot_of(name);
  auto l = c.lock(name);
  std::atomic<int> lost{0};
  l.on_lost([&](const lost_info&) { ++lost; });
  l.lock();
  rig_->migrate_slot(slot, masters[0], masters[1]);
  ASSERT_TRUE(held_on(masters[1], name));
  // Renewals keep it alive on the new master: well past its TTL, still held.
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(lost.load(), 0);
  EXPECT_TRUE(l.valid());
  EXPECT_GT(rig_->client(masters[1])({"PTTL", name}).integer, 0);
  l.unlock();
  EXPECT_FALSE(held_on(masters[1], name));
  rig_->migrate_slot(slot, masters[1], masters[0]);
}

// The holds of one slot, taken at different times, renew in one script call per interval: each is
// renewed at its slot's phase of the interval (aligned_due), not a third of its TTL after its own
// grant. Unaligned, eight holds taken 70 ms apart over more than the interval fall due at three or
// four firings per interval.
TEST_F(cluster_lock_test, the_holds_of_one_slot_renew_together) {
  const auto masters = rig_->masters();
  client c(cfg_at(masters[0], 1500ms));  // interval 500 ms
  std::vector<lock> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(c.lock("{cluster:slotmates}:" + std::to_string(i)));
    held.back().lock();
    std::this_thread::sleep_for(70ms);  // spreads the grants: what the test is about, not a wait
  }
  // From the first renewal on (within an interval of each grant) they share their slot's phase.
  std::this_thread::sleep_for(600ms);
  const auto a = c.stats();
  std::this_thread::sleep_for(1500ms);  // three intervals
  const auto b = c.stats();
  EXPECT_GE(b.renewed_locks - a.renewed_locks, 8u * 2) << "each hold renewed about once per interval";
  EXPECT_LE(b.renew_calls - a.renew_calls, 4u) << "one call per interval (a fourth at the window's edge)";
  EXPECT_LE(b.watchdog_ticks - a.watchdog_ticks, 4u);
  for (auto& l : held) {
    EXPECT_TRUE(l.valid());
    l.unlock();
  }
}

TEST_F(cluster_lock_test, ask_during_a_migration_reaches_the_importing_node) {
  const auto masters = rig_->masters();
  client c(cfg_at(masters[2]));
  const auto name = name_on(masters[0], "cluster:ask");
  const int slot = rig_->slot_of(name);
  rig_->migrate_begin(slot, masters[0], masters[1]);
  // The key is missing on the source: the source answers ASK, and the lock is taken on the target.
  auto l = c.lock(name);
  ASSERT_TRUE(l.try_lock());
  EXPECT_TRUE(held_on_with(masters[1], name, "ASKING"));
  EXPECT_FALSE(held_on(masters[0], name));
  // The release names the lock's channel too, a key that never exists: the importing node answers
  // TRYAGAIN until the slot is its own, and the release is retried until then.
  auto released = l.async_unlock(this_thread_owner(), asio::use_future);
  rig_->migrate_end(slot, masters[0], masters[1]);
  EXPECT_NO_THROW(released.get());
  EXPECT_FALSE(held_on(masters[1], name));
  rig_->migrate_slot(slot, masters[1], masters[0]);
}

TEST_F(cluster_lock_test, a_hold_is_kept_through_a_failover_and_released_on_the_new_master) {
  const auto masters = rig_->masters();
  error_log log;
  auto cfg = cfg_at(masters[0], 3000ms);
  cfg.on_error = log.hook();
  client c(cfg);
  const auto name = name_on(masters[1], "cluster:failover");
  auto l = c.lock(name);
  std::atomic<int> lost{0};
  l.on_lost([&](const lost_info&) { ++lost; });
  l.lock();
  const auto replica = rig_->replica_of(masters[1]);
  ASSERT_TRUE(eventually([&] { return held_on_with(replica, name, "READONLY"); }, 3000ms)) << "not replicated";
  rig_->failover(replica);
  // The client sees the new owner of the slot and re-checks the hold there at once.
  EXPECT_TRUE(eventually([&] { return log.has("replica promoted"); }, 8000ms));
  EXPECT_TRUE(eventually([&] { return rig_->client(replica)({"PTTL", name}).integer > 2000; }, 3000ms));
  EXPECT_EQ(lost.load(), 0);
  EXPECT_TRUE(l.valid());
  // The promoted replica never ran our scripts by SHA1 (EVALSHA is not replicated as such); and a
  // SCRIPT FLUSH there now: NOSCRIPT falls back to EVAL on the new master.
  ASSERT_TRUE(rig_->client(replica)({"SCRIPT", "FLUSH"}).is_ok());
  l.unlock();
  EXPECT_FALSE(held_on(replica, name));
  EXPECT_TRUE(l.try_lock());
  EXPECT_TRUE(held_on(replica, name));
  l.unlock();
  rig_->failover(masters[1]);  // back as it was
}

TEST_F(cluster_lock_test, a_waiter_on_another_node_is_woken_by_the_unlock) {
  const auto masters = rig_->masters();
  client a(cfg_at(masters[0], 30000ms));
  client b(cfg_at(masters[2], 30000ms));
  const auto name = name_on(masters[1], "cluster:wake");
  auto la = a.lock(name);
  la.lock();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto lb = b.lock(name);
    lb.lock();  // 30 s TTL: only the unlock message wakes it early
    got = true;
    lb.unlock();
  });
  // Sharded pub/sub (Redis 7, AUTO): the waiter's subscription is on the channel's slot's master.
  ASSERT_TRUE(eventually([&] { return shard_subscribers(masters[1], channel_of(name)) == 1; }));
  EXPECT_FALSE(got.load());
  const auto t0 = steady::now();
  la.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(ms_since(t0), 2000) << "woken by the message, not by the TTL";
}

TEST_F(cluster_lock_test, a_waiter_follows_its_channel_when_the_slot_moves) {
  const auto masters = rig_->masters();
  client a(cfg_at(masters[0], 30000ms));
  client b(cfg_at(masters[0], 30000ms));
  const auto name = name_on(masters[2], "cluster:follow");
  const int slot = rig_->slot_of(name);
  auto la = a.lock(name);
  la.lock();
  std::atomic<bool> got{false};
  std::thread waiter = wait_then_release(b, name, got);
  ASSERT_TRUE(eventually([&] { return shard_subscribers(masters[2], channel_of(name)) == 1; }));
  // The slot moves: the server ends the sharded subscription, and the client subscribes on the new
  // owner at once (not at a periodic scan).
  const auto t0 = steady::now();
  rig_->migrate_slot(slot, masters[2], masters[1]);
  EXPECT_TRUE(eventually([&] { return shard_subscribers(masters[1], channel_of(name)) == 1; }, 3000ms));
  std::printf("re-subscribed on the new owner %lld ms after the move began\n", ms_since(t0));
  EXPECT_EQ(shard_subscribers(masters[2], channel_of(name)), 0);
  EXPECT_FALSE(got.load());
  const auto t1 = steady::now();
  la.unlock();  // on the new owner, with SPUBLISH
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(ms_since(t1), 2000) << "woken by the message, not by the TTL";
  rig_->migrate_slot(slot, masters[1], masters[2]);
}

// A Redisson 3.22+ client on a Redis 7 cluster releases with SPUBLISH on the lock's channel, and
// waits with SSUBSCRIBE: both directions, with raw commands in Redisson's layout.
TEST_F(cluster_lock_test, interop_with_a_redisson_peer_in_sharded_mode) {
  const auto masters = rig_->masters();
  client c(cfg_at(masters[0], 30000ms));
  const auto name = name_on(masters[1], "cluster:redisson");
  auto owner = rig_->client(masters[1]);
  ASSERT_EQ(owner({"HSET", name, "redisson-uuid:1", "1"}).integer, 1);
  ASSERT_EQ(owner({"PEXPIRE", name, "30000"}).integer, 1);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto l = c.lock(name);
    l.lock();
    got = true;
    // Our release, heard by a Redisson waiter (SSUBSCRIBE on the slot's master).
    auto peer = rig_->client(masters[1]);
    peer.set_timeout(3000ms);
    auto sub = peer({"SSUBSCRIBE", channel_of(name)});
    EXPECT_TRUE(sub.is_array()) << sub.to_string();
    l.unlock();
    auto msg = peer.read_reply();
    ASSERT_TRUE(msg.is_array()) << msg.to_string();
    ASSERT_EQ(msg.elements.size(), 3u);
    EXPECT_EQ(msg.elements[0].str, "smessage");
    EXPECT_EQ(msg.elements[1].str, channel_of(name));
    EXPECT_EQ(msg.elements[2].str, "0");
  });
  ASSERT_TRUE(eventually([&] { return shard_subscribers(masters[1], channel_of(name)) == 1; }));
  // Redisson's unlock: delete, then SPUBLISH "0".
  const auto t0 = steady::now();
  ASSERT_EQ(owner({"DEL", name}).integer, 1);
  owner({"SPUBLISH", channel_of(name), "0"});
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(ms_since(t0), 2000) << "woken by SPUBLISH, not by the TTL";
}

TEST_F(cluster_lock_test, classic_pub_sub_when_configured) {
  const auto masters = rig_->masters();
  auto cfg = cfg_at(masters[0], 30000ms);
  cfg.cluster.sharded_pubsub = sharded_pubsub_mode::off;
  client a(cfg), b(cfg);
  const auto name = name_on(masters[2], "cluster:classic");
  auto la = a.lock(name);
  la.lock();
  std::atomic<bool> got{false};
  std::thread waiter = wait_then_release(b, name, got);
  ASSERT_TRUE(eventually([&] { return classic_subscribers(channel_of(name)) == 1; }));
  EXPECT_EQ(shard_subscribers(masters[2], channel_of(name)), 0);
  const auto t0 = steady::now();
  la.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(ms_since(t0), 2000);
}

}  // namespace
}  // namespace redlease::test

namespace redlease::test {
namespace {

// The semaphores and the latch on a cluster: the scripts' keys and channel share the name's slot, a
// waiter on another node is woken by a release's SPUBLISH, and the watchdog renews a permit (its
// zset on the name's master) in its slot's batch.
TEST_F(cluster_lock_test, semaphores_and_the_latch_work_across_the_masters) {
  const auto masters = rig_->masters();
  client a(cfg_at(masters[0], 1500ms));
  client b(cfg_at(masters[2], 1500ms));
  const auto name = name_on(masters[1], "cluster:sem");
  auto sa = a.semaphore(name);
  ASSERT_TRUE(sa.try_set_permits(0));
  auto got = std::async(std::launch::async, [&] { return b.semaphore(name).try_acquire(2, 20s); });
  ASSERT_TRUE(eventually([&] { return shard_subscribers(masters[1], "redisson_sc:{" + name + "}") == 1; }));
  const auto t0 = steady::now();
  sa.release(2);
  EXPECT_TRUE(got.get());
  EXPECT_LT(ms_since(t0), 2000) << "woken by the message";

  const auto pname = name_on(masters[1], "cluster:pes");
  auto ps = a.permit_semaphore(pname);
  ASSERT_TRUE(ps.try_set_permits(1));
  auto p = ps.acquire(1);
  std::this_thread::sleep_for(3500ms);  // more than two watchdog timeouts: renewed, or lost
  EXPECT_TRUE(p.valid());
  EXPECT_EQ(rig_->client(masters[1])({"ZCARD", "{" + pname + "}:timeout"}).integer, 1);
  EXPECT_EQ(b.permit_semaphore(pname).available_permits(), 0);
  p.release();
  EXPECT_EQ(b.permit_semaphore(pname).available_permits(), 1);

  const auto lname = name_on(masters[1], "cluster:latch");
  auto la = a.count_down_latch(lname);
  ASSERT_TRUE(la.try_set_count(1));
  auto passed = std::async(std::launch::async, [&] { return b.count_down_latch(lname).await_for(20s); });
  ASSERT_TRUE(eventually([&] {
    return shard_subscribers(masters[1], "redisson_countdownlatch__channel__{" + lname + "}") == 1;
  }));
  la.count_down();
  EXPECT_TRUE(passed.get());
}

}  // namespace
}  // namespace redlease::test
