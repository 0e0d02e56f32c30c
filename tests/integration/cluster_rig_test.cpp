// SPDX-License-Identifier: MIT
// Tests of the cluster rig (tests/support/cluster_rig.hpp) against six real redis-server processes
// in cluster mode, one rig for the whole suite. They print the measured start and failover times.
// Each test leaves the cluster ready (3 masters, 3 attached replicas) for the next.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>

#include "cluster_rig.hpp"
#include "redis_fixture.hpp"
#include "rig_timing.hpp"

namespace redlease::test {
namespace {

using namespace std::chrono_literals;
using clock_type = rig_clock;

std::string addr(std::uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

class cluster_rig_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cluster_rig::available()) return;
    const auto t0 = clock_type::now();
    try {
      rig_ = std::make_unique<cluster_rig>();
    } catch (const std::exception& e) {
      start_error_ = e.what();  // every test fails with it
      return;
    }
    report("rig start", seconds_since(t0));
  }
  static void TearDownTestSuite() { rig_.reset(); }

  void SetUp() override {
    REDLEASE_REQUIRE(cluster_rig::available(), no_redis_server);
    ASSERT_NE(rig_, nullptr) << start_error_;
  }
  // After a test, the next one finds the cluster ready again.
  void TearDown() override {
    if (rig_ != nullptr) rig_->wait_ready(15s);
  }

  static std::unique_ptr<cluster_rig> rig_;
  static std::string start_error_;
};

std::unique_ptr<cluster_rig> cluster_rig_test::rig_;
std::string cluster_rig_test::start_error_;

TEST_F(cluster_rig_test, ComesUpWithThreeMastersAndThreeReplicas) {
  cluster_rig& rig = *rig_;
  const std::vector<std::uint16_t> ports = rig.ports();
  ASSERT_EQ(ports.size(), 6u);
  EXPECT_EQ(std::set<std::uint16_t>(ports.begin(), ports.end()).size(), 6u);
  EXPECT_EQ(rig.not_ready(), "");

  const std::vector<std::uint16_t> masters = rig.masters();
  ASSERT_EQ(masters.size(), 3u);
  std::set<std::uint16_t> replicas;
  for (std::uint16_t m : masters) {
    EXPECT_EQ(rig.role(m), "master");
    const std::uint16_t r = rig.replica_of(m);
    EXPECT_EQ(rig.role(r), "slave");
    replicas.insert(r);
  }
  EXPECT_EQ(replicas.size(), 3u);

  const std::vector<cluster_node> nodes = rig.nodes();
  ASSERT_EQ(nodes.size(), 6u);
  int master_count = 0;
  for (const cluster_node& n : nodes) {
    EXPECT_EQ(n.url, "redis://127.0.0.1:" + std::to_string(n.port));
    EXPECT_EQ(n.id, rig.id(n.port));
    EXPECT_EQ(n.id.size(), 40u);
    if (n.master) {
      ++master_count;
    } else {
      EXPECT_EQ(rig.replica_of(n.master_port), n.port);
    }
  }
  EXPECT_EQ(master_count, 3);

  raw_client c = rig.client(masters[0]);
  const std::string info = c({"CLUSTER", "INFO"}).str;
  EXPECT_NE(info.find("cluster_state:ok"), std::string::npos) << info;
  EXPECT_NE(info.find("cluster_slots_ok:16384"), std::string::npos) << info;
  EXPECT_NE(info.find("cluster_known_nodes:6"), std::string::npos) << info;
  raw_reply slots = c({"CLUSTER", "SLOTS"});
  ASSERT_TRUE(slots.is_array()) << slots;
  long long covered = 0;
  for (const raw_reply& range : slots.elements) {
    ASSERT_EQ(range.elements.size(), 4u) << range;  // start, end, master, one replica
    covered += range.elements[1].integer - range.elements[0].integer + 1;
  }
  EXPECT_EQ(covered, 16384);
  EXPECT_EQ(c({"CONFIG", "GET", "cluster-node-timeout"}).elements.at(1).str, "2000");
  EXPECT_EQ(c({"CONFIG", "GET", "enable-debug-command"}).elements.at(1).str, "local");
  EXPECT_TRUE(c({"DEBUG", "SLEEP", "0"}).is_ok());
  EXPECT_EQ(c({"CONFIG", "GET", "save"}).elements.at(1).str, "");
  // The key of §4.6: 'foo' hashes to slot 12182, owned by the third master.
  EXPECT_EQ(rig.slot_of("foo"), 12182);
  EXPECT_EQ(rig.slot_of("{foo}x"), 12182);
  EXPECT_EQ(rig.master_of("foo"), masters[2]);
}

TEST_F(cluster_rig_test, WrongMasterAnswersMovedNamingTheOwner) {
  cluster_rig& rig = *rig_;
  const int slot = rig.slot_of("moved-key");
  const std::uint16_t owner = rig.master_of_slot(slot);
  raw_client wrong = rig.client(rig.other_master(slot));
  raw_reply r = wrong({"SET", "moved-key", "v"});
  ASSERT_TRUE(r.is_error()) << r;
  EXPECT_EQ(r.str, "MOVED " + std::to_string(slot) + " " + addr(owner));
  EXPECT_TRUE(rig.client(owner)({"SET", "moved-key", "v"}).is_ok());
  // A replica of the owner redirects writes to it too.
  raw_reply on_replica = rig.client(rig.replica_of(owner))({"SET", "moved-key", "w"});
  EXPECT_EQ(on_replica.str, "MOVED " + std::to_string(slot) + " " + addr(owner)) << on_replica;
}

TEST_F(cluster_rig_test, MigrationGivesAskThenMoved) {
  cluster_rig& rig = *rig_;
  const int slot = rig.slot_of("foo");
  const std::uint16_t from = rig.master_of_slot(slot);
  const std::uint16_t to = rig.other_master(slot);
  raw_client src = rig.client(from);
  raw_client dst = rig.client(to);
  ASSERT_TRUE(src({"SET", "foo", "v1"}).is_ok());
  ASSERT_TRUE(src({"SET", "{foo}x", "v2"}).is_ok());
  const std::string ask = "ASK " + std::to_string(slot) + " " + addr(to);

  rig.migrate_begin(slot, from, to);
  rig.migrate_keys(from, to, {"foo"});
  EXPECT_EQ(src({"GET", "foo"}).str, ask);                  // moved key: ASK
  EXPECT_EQ(src({"GET", "{foo}x"}).str, "v2");              // key still there: served
  EXPECT_EQ(src({"SET", "{foo}new", "1"}).str, ask);        // new key: ASK
  EXPECT_EQ(src({"MGET", "foo", "{foo}x"}).str.rfind("TRYAGAIN", 0), 0u);
  EXPECT_EQ(dst({"GET", "foo"}).str, "MOVED " + std::to_string(slot) + " " + addr(from));  // no ASKING
  const std::vector<raw_reply> asked = dst.pipeline({{"ASKING"}, {"GET", "foo"}, {"GET", "foo"}});
  EXPECT_TRUE(asked[0].is_ok()) << asked[0];
  EXPECT_EQ(asked[1].str, "v1");
  EXPECT_EQ(asked[2].str.rfind("MOVED", 0), 0u) << asked[2];  // ASKING covers one command

  EXPECT_EQ(rig.migrate_all_keys(slot, from, to), 1u);  // {foo}x
  rig.migrate_end(slot, from, to);
  EXPECT_EQ(rig.master_of_slot(slot), to);
  EXPECT_EQ(src({"GET", "foo"}).str, "MOVED " + std::to_string(slot) + " " + addr(to));
  EXPECT_EQ(dst({"GET", "foo"}).str, "v1");
  EXPECT_EQ(dst({"GET", "{foo}x"}).str, "v2");

  // And back, in one call, so the next tests find the initial layout.
  rig.migrate_slot(slot, to, from);
  EXPECT_EQ(rig.master_of_slot(slot), from);
  EXPECT_EQ(src({"GET", "foo"}).str, "v1");
}

TEST_F(cluster_rig_test, GracefulFailoverPromotesTheReplica) {
  cluster_rig& rig = *rig_;
  const std::uint16_t old_master = rig.master_of("graceful");
  const std::uint16_t replica = rig.replica_of(old_master);
  raw_client writer = rig.client(old_master);  // WAIT waits for this connection's writes
  ASSERT_TRUE(writer({"SET", "graceful", "1"}).is_ok());
  ASSERT_EQ(writer({"WAIT", "1", "2000"}).integer, 1);

  const auto t0 = clock_type::now();
  EXPECT_EQ(rig.failover(replica), old_master);
  report("failover() graceful", seconds_since(t0));
  EXPECT_EQ(rig.role(replica), "master");
  EXPECT_EQ(rig.master_of("graceful"), replica);
  EXPECT_EQ(rig.client(replica)({"GET", "graceful"}).str, "1");
  raw_reply moved = rig.client(old_master)({"GET", "graceful"});
  EXPECT_EQ(moved.str, "MOVED " + std::to_string(rig.slot_of("graceful")) + " " + addr(replica)) << moved;

  const auto t1 = clock_type::now();
  rig.wait_ready(10s);  // the old master is attached as the replica
  report("old master attached as replica", seconds_since(t1));
  EXPECT_EQ(rig.role(old_master), "slave");
  EXPECT_EQ(rig.replica_of(replica), old_master);
}

TEST_F(cluster_rig_test, KilledMasterIsReplacedAndRestartsAsReplica) {
  cluster_rig& rig = *rig_;
  const std::uint16_t old_master = rig.master_of("killed");
  const std::uint16_t replica = rig.replica_of(old_master);
  raw_client writer = rig.client(old_master);  // WAIT waits for this connection's writes
  ASSERT_TRUE(writer({"SET", "killed", "1"}).is_ok());
  ASSERT_EQ(writer({"WAIT", "1", "2000"}).integer, 1);

  rig.kill(old_master);
  EXPECT_FALSE(rig.live(old_master));
  const auto t0 = clock_type::now();
  EXPECT_EQ(rig.failover(replica, cluster_rig::failover_mode::force), old_master);
  report("failover() FORCE of a killed master", seconds_since(t0));
  EXPECT_EQ(rig.master_of("killed"), replica);
  EXPECT_EQ(rig.client(replica)({"GET", "killed"}).str, "1");

  const auto t1 = clock_type::now();
  rig.restart(old_master);  // same port, same nodes.conf, no data
  rig.wait_ready(15s);
  report("restart() -> attached as replica", seconds_since(t1));
  EXPECT_EQ(rig.role(old_master), "slave");
  EXPECT_EQ(rig.replica_of(replica), old_master);
  EXPECT_EQ(rig.masters().size(), 3u);
}

TEST_F(cluster_rig_test, PausedMasterIsFailedOverByTheClusterAndResumesAsReplica) {
  cluster_rig& rig = *rig_;
  const std::uint16_t old_master = rig.master_of("paused");
  const std::uint16_t replica = rig.replica_of(old_master);
  raw_client writer = rig.client(old_master);  // WAIT waits for this connection's writes
  ASSERT_TRUE(writer({"SET", "paused", "1"}).is_ok());
  ASSERT_EQ(writer({"WAIT", "1", "2000"}).integer, 1);

  rig.pause(old_master);
  const auto t0 = clock_type::now();
  rig.wait_promoted(replica, t0 + 15s);  // no command: the replica's own election after node-timeout
  report("pause() -> replica promoted", seconds_since(t0));
  EXPECT_EQ(rig.master_of("paused"), replica);
  EXPECT_EQ(rig.client(replica)({"GET", "paused"}).str, "1");

  const auto t1 = clock_type::now();
  rig.resume(old_master);
  rig.wait_ready(15s);
  report("resume() -> attached as replica", seconds_since(t1));
  EXPECT_EQ(rig.role(old_master), "slave");
  EXPECT_EQ(rig.replica_of(replica), old_master);
}

TEST_F(cluster_rig_test, NotReadyInTimeThrowsWithTheLogs) {
  cluster_rig_options opts;
  opts.start_timeout = 1ms;  // A master is not ok before 2 s (CLUSTER_WRITABLE_DELAY).
  try {
    cluster_rig other(opts);
    FAIL() << "a second cluster claimed to be ready within 1 ms";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("not ready after 1 ms"), std::string::npos) << what;
    EXPECT_NE(what.find("redis.log (tail)"), std::string::npos) << what;
  }
  EXPECT_EQ(rig_->not_ready(), "");  // the suite's cluster is untouched
}

}  // namespace
}  // namespace redlease::test
