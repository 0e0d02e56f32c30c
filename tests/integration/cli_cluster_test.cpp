// SPDX-License-Identifier: MIT
// The `redlease` binary against a Redis Cluster (3 masters + 3 replicas, tests/support/cluster_rig.hpp),
// one rig for the whole binary, pointed at a node that does not serve the lock: `run` takes the lock
// on its slot's master, `status` names that master and the slot, `unlock --force` deletes it there,
// `doctor` checks every master and the cluster's settings, and (with Prometheus support) `exporter`
// scans every master.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli_process.hpp"
#include "cluster_suite.hpp"
#include "exporter_scrape.hpp"
#include "redis_fixture.hpp"
#include "redlease/redlease.hpp"

namespace redlease::test {
namespace {

using namespace std::chrono_literals;

struct result {
  int status;
  std::string out, err;
};

class cli_cluster_test : public cluster_suite {
 protected:
  // A name whose slot the master on `port` serves.
  static std::string name_on(std::uint16_t port, const std::string& stem) {
    for (int i = 0;; ++i) {
      auto n = stem + ":" + std::to_string(i);
      if (rig_->master_of(n) == port) return n;
    }
  }
  // The URL of a master that does not serve `name`: the CLI must route, not just talk to it.
  static std::string url_away_from(const std::string& name) {
    return "redis://127.0.0.1:" + std::to_string(rig_->other_master(rig_->slot_of(name)));
  }
  static std::string node(std::uint16_t port) { return "127.0.0.1:" + std::to_string(port); }
  static bool exists_on(std::uint16_t port, const std::string& key) {
    return rig_->client(port)({"EXISTS", key}).integer == 1;
  }
  static config cfg_at(const std::string& url) {
    auto c = config::from_url(url);
    c.watchdog_timeout = 5000ms;
    return c;
  }

  result run_cli(const std::vector<std::string>& args) {
    cli_process p(REDLEASE_CLI_PATH, args, {}, dir_.path("out"), dir_.path("err"));
    int status = p.wait(20s);
    return {status, p.out(), p.err()};
  }

  scratch_dir dir_{"redlease-cli-cluster"};
};


TEST_F(cli_cluster_test, run_takes_the_lock_on_its_slots_master) {
  const auto masters = rig_->masters();
  const std::string name = name_on(masters[1], "cli:run");
  const std::string ready = dir_.path("ready"), go = dir_.path("go");
  // The command says it runs, then holds the lock until the test has looked at the nodes.
  const std::string body = "touch " + ready + "; i=0; while [ ! -e " + go +
                           " ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; echo \"$REDLEASE_LOCK_NAME\"";
  cli_process p(REDLEASE_CLI_PATH, {"run", name, "--redis", url_away_from(name), "--", "sh", "-c", body}, {},
                dir_.path("run.out"), dir_.path("run.err"));
  for (int i = 0; i < 200 && read_whole_file(ready).empty() && !exists_on(masters[1], name); ++i)
    std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(exists_on(masters[1], name)) << p.err();
  for (auto m : masters) {
    if (m == masters[1]) continue;
    EXPECT_FALSE(exists_on(m, name)) << "on " << m;
  }
  { std::ofstream(go).put('1'); }
  EXPECT_EQ(p.wait(20s), 0) << p.err();
  EXPECT_EQ(p.out(), name + "\n");
  EXPECT_FALSE(exists_on(masters[1], name)) << "released";
}

TEST_F(cli_cluster_test, status_names_the_node_and_the_slot) {
  const auto masters = rig_->masters();
  const std::string name = name_on(masters[2], "cli:status");
  const int slot = rig_->slot_of(name);
  client c{cfg_at(url_away_from(name))};
  auto l = c.lock(name);
  l.lock();
  auto text = run_cli({"status", name, "--redis", url_away_from(name)});
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("NODE"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("SLOT"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(node(masters[2]) + "  " + std::to_string(slot)), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("held   reentrant"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(c.id()), std::string::npos) << text.out;
  auto json = run_cli({"status", name, "--json", "--redis", url_away_from(name)});
  EXPECT_EQ(json.status, 0) << json.err;
  EXPECT_NE(json.out.find("\"node\":\"" + node(masters[2]) + "\",\"slot\":" + std::to_string(slot) + ","),
            std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"state\":\"held\""), std::string::npos) << json.out;
  l.unlock();
  auto free = run_cli({"status", name, "--json", "--redis", url_away_from(name)});
  EXPECT_NE(free.out.find("\"state\":\"free\""), std::string::npos) << free.out;
}

TEST_F(cli_cluster_test, status_counts_waiters_subscribed_on_another_node) {
  const auto masters = rig_->masters();
  const std::string name = name_on(masters[0], "cli:waiters");
  client holder{cfg_at(url_away_from(name))};
  auto l = holder.lock(name);
  l.lock();
  // A waiter's client subscribes on the node it was pointed at, not on the lock's master.
  client waiter{cfg_at("redis://127.0.0.1:" + std::to_string(masters[2]))};
  auto sub =
      waiter.subscribe(describe(lock_kind::reentrant, name).channel(), [](std::string_view, std::string_view) {});
  auto json = run_cli({"status", name, "--json", "--redis", "redis://127.0.0.1:" + std::to_string(masters[1])});
  EXPECT_EQ(json.status, 0) << json.err;
  EXPECT_NE(json.out.find("\"waiters\":1"), std::string::npos) << json.out;
  l.unlock();
}

// `semaphore NAME status` counts a waiter's sharded subscription (SSUBSCRIBE, on the slot's master)
// and a classic one made on another node: before, it asked the slot's master's classic count only.
TEST_F(cli_cluster_test, semaphore_status_counts_waiters_on_every_node) {
  const auto masters = rig_->masters();
  const std::string name = name_on(masters[0], "cli:sem-waiters");
  client c{cfg_at(url_away_from(name))};
  auto sem = c.semaphore(name);
  ASSERT_TRUE(sem.try_set_permits(0));
  auto waiting = std::async(std::launch::async, [&] { return sem.try_acquire(1, 20s); });
  client other{cfg_at("redis://127.0.0.1:" + std::to_string(masters[2]))};
  auto sub = other.subscribe(describe(lock_kind::semaphore, name).channel(), [](std::string_view, std::string_view) {});
  const std::vector<std::string> args{"semaphore", name, "status", "--json", "--redis", url_away_from(name)};
  result json;
  for (int i = 0; i < 100; ++i) {  // until the waiter's subscription is made
    json = run_cli(args);
    if (json.out.find("\"waiters\":2") != std::string::npos) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(json.status, 0) << json.err;
  EXPECT_NE(json.out.find("\"waiters\":2"), std::string::npos) << json.out;
  sem.release(1);
  EXPECT_TRUE(waiting.get());
  sem.release(1);
  rig_->client(masters[0])({"DEL", name});
}

// A read-write lock's waiting writer is on its client's card, a key of its own slot: status scans
// every master for it, not the one a keyless SCAN would reach.
TEST_F(cli_cluster_test, status_finds_a_waiting_writer_whose_card_is_on_another_master) {
  const auto masters = rig_->masters();
  const std::string name = name_on(masters[0], "cli:rw");
  client reader{cfg_at(url_away_from(name))};
  auto r = reader.read_lock(name);
  ASSERT_TRUE(r.try_lock());
  // A writer whose card lives neither with the lock nor where `SCAN 0` would be routed.
  std::unique_ptr<client> wc;
  for (int i = 0; i < 20 && wc == nullptr; ++i) {
    auto candidate = std::make_unique<client>(cfg_at(url_away_from(name)));
    auto home = rig_->master_of(client_card_key(candidate->id()));
    if (home != masters[0] && home != rig_->master_of("0")) wc = std::move(candidate);
  }
  ASSERT_NE(wc, nullptr);
  auto w = wc->write_lock(name);
  auto writer = std::async(std::launch::async, [&] {
    bool got = w.try_lock(20000ms);
    if (got) w.unlock();
    return got;
  });
  const auto card = client_card_key(wc->id());
  for (int i = 0; i < 200 && rig_->client(rig_->master_of(card))({"HEXISTS", card, client_card_wait_field(name)})
                                     .integer == 0;
       ++i)
    std::this_thread::sleep_for(20ms);
  auto json = run_cli({"status", name, "--json", "--redis", url_away_from(name)});
  EXPECT_EQ(json.status, 0) << json.err;
  EXPECT_NE(json.out.find("\"waiting_writers\":[{\"client_id\":\"" + wc->id() + "\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"waiting_writers_complete\":true"), std::string::npos) << json.out;
  r.unlock();
  EXPECT_TRUE(writer.get());
}

TEST_F(cli_cluster_test, unlock_force_deletes_the_lock_on_its_master) {
  const auto masters = rig_->masters();
  const std::string name = name_on(masters[0], "cli:unlock");
  const std::string mutex_name = name_on(masters[2], "cli:unlock-mutex");
  client c{cfg_at(url_away_from(name))};
  auto l = c.lock(name);
  l.lock();
  auto m = c.mutex(mutex_name);
  m.lock();
  ASSERT_TRUE(exists_on(masters[0], name));
  ASSERT_TRUE(exists_on(masters[2], mutex_name));
  auto r = run_cli({"unlock", "--force", name, mutex_name, "--redis", url_away_from(name)});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("unlocked \"" + name + "\" (reentrant)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unlocked \"" + mutex_name + "\" (mutex)"), std::string::npos) << r.out;
  EXPECT_FALSE(exists_on(masters[0], name));
  EXPECT_FALSE(exists_on(masters[2], mutex_name));
  auto again = run_cli({"unlock", "--force", name, "--redis", url_away_from(name)});
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("was not locked"), std::string::npos) << again.out;
}

TEST_F(cli_cluster_test, doctor_checks_every_master_and_the_cluster) {
  const auto masters = rig_->masters();
  auto r = run_cli({"doctor", "locks:*", "--redis", "redis://127.0.0.1:" + std::to_string(masters[1])});
  // The rig's defaults: full coverage required (a WARN), replicas everywhere, nothing that FAILs.
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("OK   cluster             3 masters, 3 replicas, 16384 of 16384 slots"), std::string::npos)
      << r.out;
  for (auto m : masters) {
    for (const char* check : {"OK   connectivity        ", "OK   eviction            ", "OK   acl.lock            ",
                              "OK   topology            "})
      EXPECT_NE(r.out.find(check + node(m) + ": "), std::string::npos) << check << node(m) << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("WARN cluster.coverage    cluster-require-full-coverage yes on"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("one failed master stops every lock"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OK   cluster.replicas    every master has a replica"), std::string::npos) << r.out;
  auto info = rig_->client(masters[0])({"INFO", "server"}).str;
  if (info.find("redis_version:6.") == std::string::npos) {
    EXPECT_NE(r.out.find("OK   cluster.pubsub      sharded pub/sub available"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cluster.sharded_pubsub=auto both pick sharded pub/sub"), std::string::npos) << r.out;
  }
  EXPECT_EQ(r.out.find("\nFAIL "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 FAIL"), std::string::npos) << r.out;

  auto json = run_cli({"doctor", "--json", "--redis", "redis://127.0.0.1:" + std::to_string(masters[0])});
  EXPECT_EQ(json.status, 0) << json.out << json.err;
  for (auto m : masters)
    EXPECT_NE(json.out.find("{\"check\":\"eviction\",\"node\":\"" + node(m) + "\",\"status\":\"OK\""),
              std::string::npos)
        << json.out;
  EXPECT_NE(json.out.find("{\"check\":\"cluster.coverage\",\"status\":\"WARN\""), std::string::npos) << json.out;
}

TEST_F(cli_cluster_test, cluster_no_talks_to_one_node_and_doctor_says_so) {
  const auto masters = rig_->masters();
  auto r = run_cli({"doctor", "--redis", "redis://127.0.0.1:" + std::to_string(masters[0]) + "?cluster=no"});
  EXPECT_NE(r.out.find("WARN topology"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("drop ?cluster=no"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("cluster.coverage"), std::string::npos) << r.out;
}

// top scans every master, not the one it was pointed at: a lock on each is found, with its node.
TEST_F(cli_cluster_test, top_finds_the_locks_on_every_master) {
  const auto masters = rig_->masters();
  client c{cfg_at("redis://127.0.0.1:" + std::to_string(masters[0]))};
  std::vector<std::string> names;
  std::vector<reentrant_lock> held;
  for (auto m : masters) {
    names.push_back(name_on(m, "cli:top"));
    held.push_back(c.lock(names.back()));
    held.back().lock();
  }
  auto json = run_cli({"top", "cli:top:*", "--json", "--redis", "redis://127.0.0.1:" + std::to_string(masters[0])});
  EXPECT_EQ(json.status, 0) << json.err;
  for (std::size_t i = 0; i < masters.size(); ++i)
    EXPECT_NE(json.out.find("{\"lock\":\"" + names[i] + "\",\"kind\":\"reentrant\",\"node\":\"" + node(masters[i]) +
                            "\""),
              std::string::npos)
        << json.out;
  auto once = run_cli({"top", "cli:top:*", "--once", "--redis", "redis://127.0.0.1:" + std::to_string(masters[1])});
  EXPECT_EQ(once.status, 0) << once.err;
  EXPECT_NE(once.out.find("NODE"), std::string::npos) << once.out;
  for (auto& l : held) l.unlock();
}

#ifdef REDLEASE_CLI_EXPORTER
// `redlease exporter` pointed at one master scans every master: each one's locks under its node with
// --by-node, and a waiter subscribed on another node than the lock's counted.
TEST_F(cli_cluster_test, exporter_scans_every_master) {
  const auto masters = rig_->masters();
  client c{cfg_at("redis://127.0.0.1:" + std::to_string(masters[0]))};
  std::vector<detail::lock_handle> held;
  for (auto m : masters) {
    held.emplace_back(c.lock(name_on(m, "exp:lock")));
    held.back().lock();
  }
  client waiter{cfg_at("redis://127.0.0.1:" + std::to_string(masters[2]))};
  auto sub = waiter.subscribe(describe(lock_kind::reentrant, name_on(masters[0], "exp:lock")).channel(),
                              [](std::string_view, std::string_view) {});
  cli_process p(REDLEASE_CLI_PATH,
                {"exporter", "exp:*", "--by-node", "--listen", "127.0.0.1:0", "--interval", "1s", "--redis",
                 "redis://127.0.0.1:" + std::to_string(masters[1])},
                {}, dir_.path("exporter.out"), dir_.path("exporter.err"));
  const std::string marker = "listening on http://127.0.0.1:";
  for (int i = 0; i < 200 && p.out().find(marker) == std::string::npos && p.running(); ++i)
    std::this_thread::sleep_for(50ms);
  const auto out = p.out();
  ASSERT_NE(out.find(marker), std::string::npos) << out << p.err();
  const int port = std::atoi(out.c_str() + out.find(marker) + marker.size());
  std::string body;
  for (int i = 0; i < 100 && sample(body = scrape(port), R"(redlease_redis_lock_waiters{kind="reentrant"})") != 1; ++i)
    std::this_thread::sleep_for(100ms);
  EXPECT_EQ(sample(body, R"(redlease_redis_lock_waiters{kind="reentrant"})"), 1) << body;
  EXPECT_EQ(sample(body, R"(redlease_redis_locks_held{kind="reentrant"})"), 3) << body;
  for (auto m : masters)
    EXPECT_EQ(sample(body, R"(redlease_redis_locks{kind="reentrant",node=")" + node(m) + "\"}"), 1) << body;
  EXPECT_EQ(body.find("exp:"), std::string::npos) << body;
  ASSERT_EQ(::kill(p.pid(), SIGTERM), 0);
  EXPECT_EQ(p.wait(10s), 0) << p.err();
  for (auto& l : held) l.unlock();
}
#endif

}  // namespace
}  // namespace redlease::test
