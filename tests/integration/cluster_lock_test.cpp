// SPDX-License-Identifier: MIT
// Locks on a Redis Cluster (3 masters + 3 replicas, tests/support/cluster_rig.hpp), one rig for the
// whole binary: the client pointed at one node routes every key to its slot's master, follows
// MOVED after a resharding and ASK during one, keeps a hold through a failover, and wakes a waiter
// on another node. Each test leaves the cluster ready for the next.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "cluster_rig.hpp"
#include "lock_test_support.hpp"
#include "redis_fixture.hpp"
#include "redlease/client.hpp"

#include <asio/use_future.hpp>

namespace redlease::test {
namespace {

using namespace std::chrono_literals;

class cluster_lock_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cluster_rig::available()) return;
    try {
      rig_ = std::make_unique<cluster_rig>();
    } catch (const std::exception& e) {
      start_error_ = e.what();
    }
  }
  static void TearDownTestSuite() { rig_.reset(); }

  void SetUp() override {
    REDLEASE_REQUIRE(cluster_rig::available(), no_redis_server);
    ASSERT_NE(rig_, nullptr) << start_error_;
  }
  void TearDown() override {
    if (rig_ != nullptr) rig_->wait_ready(15s);
  }

  // A client pointed at the node on `port` only, with a short watchdog.
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
  // A name whose slot the master on `port` serves.
  static std::string name_on(std::uint16_t port, const std::string& stem) {
    for (int i = 0;; ++i) {
      auto n = stem + ":" + std::to_string(i);
      if (rig_->master_of(n) == port) return n;
    }
  }

  static std::unique_ptr<cluster_rig> rig_;
  static std::string start_error_;
};

std::unique_ptr<cluster_rig> cluster_lock_test::rig_;
std::string cluster_lock_test::start_error_;

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
  l.unlock();
  EXPECT_FALSE(held_on(replica, name));
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
  // Classic pub/sub in a cluster: the waiter's subscription is on one of the nodes.
  const std::string channel = "redisson_lock__channel:{" + name + "}";
  ASSERT_TRUE(eventually([&] {
    long long n = 0;
    for (auto p : rig_->ports()) n += rig_->client(p)({"PUBSUB", "NUMSUB", channel}).elements.at(1).integer;
    return n == 1;
  }));
  EXPECT_FALSE(got.load());
  const auto t0 = steady::now();
  la.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_LT(ms_since(t0), 2000) << "woken by the message, not by the TTL";
}

}  // namespace
}  // namespace redlease::test
