// SPDX-License-Identifier: MIT
// Tests of the Sentinel rig (tests/support/sentinel_rig.hpp) against real redis-server and Sentinel
// processes. They print the measured start, failover and pause-to-switch times.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "redis_fixture.hpp"
#include "rig_timing.hpp"
#include "sentinel_rig.hpp"

namespace redlease::test {
namespace {

using namespace std::chrono_literals;
using clock_type = rig_clock;

std::string role_of(raw_client& c) {
  raw_reply r = c({"ROLE"});
  return r.is_array() && !r.elements.empty() ? r.elements.front().str : r.to_string();
}

class sentinel_rig_test : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLEASE_REQUIRE(sentinel_rig::available(), no_redis_server);
  }

  // Starts a rig and reports how long that took.
  sentinel_rig& start(sentinel_rig_options opts = {}) {
    const auto t0 = clock_type::now();
    rig_.emplace(std::move(opts));
    report("rig start", seconds_since(t0));
    return *rig_;
  }

  std::optional<sentinel_rig> rig_;
};

TEST_F(sentinel_rig_test, ComesUpAndFailsOver) {
  sentinel_rig& rig = start();
  const std::vector<std::uint16_t> data = rig.data_ports();
  ASSERT_EQ(data.size(), 2u);
  const std::vector<std::uint16_t> sentinels = rig.sentinel_ports();
  ASSERT_EQ(sentinels.size(), 3u);
  EXPECT_EQ(std::set<std::uint16_t>(sentinels.begin(), sentinels.end()).size(), 3u);
  EXPECT_EQ(rig.master_name(), "mymaster");
  EXPECT_EQ(rig.current_master_port(), data[0]);
  EXPECT_EQ(rig.master_ports_by_sentinel(), std::vector<std::uint16_t>(3, data[0]));
  EXPECT_EQ(rig.master().port(), data[0]);
  EXPECT_EQ(rig.replica().port(), data[1]);
  for (std::size_t i = 0; i < 3; ++i) {
    raw_client s = rig.sentinel_client(i);
    EXPECT_EQ(s({"PING"}).str, "PONG");
    EXPECT_EQ(s({"SENTINEL", "CKQUORUM", "mymaster"}).str.rfind("OK 3 usable", 0), 0u);
  }

  raw_client m = rig.master_client();
  raw_client r = rig.replica_client();
  EXPECT_EQ(role_of(m), "master");
  EXPECT_EQ(role_of(r), "slave");
  ASSERT_TRUE(m({"SET", "kept", "1"}).is_ok());
  ASSERT_TRUE(m({"SET", "dropped", "1"}).is_ok());
  EXPECT_EQ(rig.wait_replicated(), 1);
  EXPECT_EQ(r({"GET", "dropped"}).str, "1");
  EXPECT_TRUE(rig.drop_key_on_replica("dropped"));
  EXPECT_FALSE(rig.drop_key_on_replica("never-set"));
  EXPECT_TRUE(r({"GET", "dropped"}).is_nil());
  EXPECT_EQ(r({"CONFIG", "GET", "replica-read-only"}).elements.at(1).str, "yes");
  EXPECT_TRUE(r({"SET", "x", "1"}).is_error());  // read-only again

  const auto t0 = clock_type::now();
  const std::uint16_t new_port = rig.failover();
  report("failover()", seconds_since(t0));
  EXPECT_EQ(new_port, data[1]);
  EXPECT_EQ(rig.current_master_port(), data[1]);
  EXPECT_EQ(rig.master_ports_by_sentinel(), std::vector<std::uint16_t>(3, data[1]));
  EXPECT_EQ(rig.master().port(), data[1]);
  EXPECT_EQ(rig.replica().port(), data[0]);

  // The promoted replica lacks the dropped key; the old master, not yet demoted (that takes
  // Sentinel ~10 s), still has it.
  raw_client promoted = rig.client(data[1]);
  EXPECT_EQ(role_of(promoted), "master");
  EXPECT_EQ(promoted({"GET", "kept"}).str, "1");
  EXPECT_TRUE(promoted({"GET", "dropped"}).is_nil());
  raw_client old = rig.client(data[0]);
  EXPECT_EQ(old({"GET", "dropped"}).str, "1");
}

TEST_F(sentinel_rig_test, PausedMasterIsReplacedAndComesBack) {
  sentinel_rig& rig = start();
  const std::uint16_t old_port = rig.pause_master();
  const auto t0 = clock_type::now();
  EXPECT_TRUE(rig.node(old_port).paused());
  const std::uint16_t new_port = rig.wait_for_switch(old_port, t0 + 10s);
  report("pause_master() -> switch", seconds_since(t0));
  EXPECT_NE(new_port, old_port);
  EXPECT_EQ(rig.master().port(), new_port);
  EXPECT_EQ(rig.replica().port(), old_port);
  raw_client promoted = rig.master_client();
  EXPECT_EQ(role_of(promoted), "master");
  EXPECT_TRUE(promoted({"SET", "after", "1"}).is_ok());

  rig.resume(old_port);
  EXPECT_FALSE(rig.node(old_port).paused());
  // It answers again; Sentinel demotes it later (not timed here).
  raw_client old = rig.client(old_port);
  old.set_timeout(5s);
  EXPECT_EQ(old({"PING"}).str, "PONG");
}

TEST_F(sentinel_rig_test, PasswordsForDataNodesAndSentinels) {
  sentinel_rig_options opts;
  opts.master_name = "locks";
  opts.password = "data \"pw\"";
  opts.sentinel_password = "sentinel-pw";
  sentinel_rig& rig = start(opts);

  // Without AUTH, both kinds of server refuse.
  for (std::uint16_t port : {rig.sentinel_ports()[0], rig.data_ports()[0]}) {
    raw_client anonymous("127.0.0.1", port);
    raw_reply r = anonymous({"PING"});
    EXPECT_TRUE(r.is_error()) << port;
    EXPECT_EQ(r.str.rfind("NOAUTH", 0), 0u) << r;
  }
  // A Sentinel does not take the data password, a data node not the Sentinel password.
  EXPECT_THROW(raw_client("127.0.0.1", rig.sentinel_ports()[0], opts.password), std::runtime_error);
  EXPECT_THROW(raw_client("127.0.0.1", rig.data_ports()[0], opts.sentinel_password),
               std::runtime_error);

  raw_client s = rig.sentinel_client(1);
  EXPECT_EQ(s({"PING"}).str, "PONG");
  raw_reply addr = s({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "locks"});
  ASSERT_TRUE(addr.is_array()) << addr;
  EXPECT_EQ(addr.elements.at(1).str, std::to_string(rig.data_ports()[0]));

  raw_client m = rig.master_client();
  ASSERT_TRUE(m({"SET", "k", "v"}).is_ok());
  EXPECT_EQ(rig.wait_replicated(), 1);
  // The Sentinels reconfigure password-protected nodes (auth-pass) and the nodes replicate with
  // masterauth.
  const std::uint16_t new_port = rig.failover();
  EXPECT_EQ(new_port, rig.data_ports()[1]);
  EXPECT_EQ(rig.master_client()({"GET", "k"}).str, "v");
}

TEST_F(sentinel_rig_test, NotReadyInTimeThrowsAndStopsEverything) {
  sentinel_rig_options opts;
  opts.start_timeout = 1ms;  // The Sentinels cannot know each other this fast.
  try {
    sentinel_rig rig(opts);
    FAIL() << "the rig claimed to be ready within 1 ms";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("not ready after 1 ms"), std::string::npos) << what;
    EXPECT_NE(what.find("redis.log (tail)"), std::string::npos) << what;
  }
  // Every child was stopped and reaped.
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace redlease::test
