// SPDX-License-Identifier: MIT
// `redlease run --redlock` and `redlease status --redlock`, driven as a user would: the built binary
// against 3 real redis-server processes, checked through its exit status, its output and the keys
// on each server (a string holding the holder's random value, with a TTL).
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli_process.hpp"
#include "lock_test_support.hpp"
#include "raw_client.hpp"
#include "sentinel_rig.hpp"
#include "test_certs.hpp"

namespace redlease::test {
namespace {

constexpr int nodes = 3;

class cli_redlock_test : public redis_fixture {
 protected:
  void SetUp() override {
    redis_fixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    extra_ = start_servers(nodes - 1);
    for (int i = 0; i < nodes; ++i) raws_.push_back(std::make_unique<raw_client>(srv(i).client()));
  }
  void TearDown() override {
    procs_.clear();
    for (auto& s : extra_) s->resume();
    if (server_) server().resume();
    raws_.clear();
    extra_.clear();
    redis_fixture::TearDown();
  }

  redis_server& srv(int i) { return i == 0 ? server() : *extra_.at(i - 1); }
  raw_client& raw(int i) { return *raws_.at(i); }
  std::string path(const std::string& file) const { return dir_.path(file); }
  bool file_exists(const std::string& file) const { return !read_whole_file(path(file)).empty(); }

  // `--redis URL` for each server, as `run` and `status` take them.
  std::vector<std::string> redis_flags() {
    std::vector<std::string> out;
    for (int i = 0; i < nodes; ++i) out.insert(out.end(), {"--redis", srv(i).url()});
    return out;
  }
  // `redlease run --redlock <the servers> NAME <extra> -- sh -c BODY`.
  std::vector<std::string> run_args(const std::string& name, const std::vector<std::string>& extra,
                                    const std::string& body) {
    std::vector<std::string> a{"run", "--redlock"};
    auto r = redis_flags();
    a.insert(a.end(), r.begin(), r.end());
    a.push_back(name);
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), {"--", "sh", "-c", body});
    return a;
  }
  cli_process& start(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    const std::string n = std::to_string(procs_.size());
    procs_.push_back(std::make_unique<cli_process>(REDLEASE_CLI_PATH, args, env, path("out." + n), path("err." + n)));
    return *procs_.back();
  }
  struct result {
    int status;
    std::string out, err;
  };
  result run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    auto& p = start(args, env);
    int st = p.wait();
    return {st, p.out(), p.err()};
  }
  // A command that says it runs (the file `ready`), then waits for the file `go` (polled by the
  // shell: the test creates it when it has looked).
  std::string wait_for_go() const {
    return "echo \"$REDLEASE_LOCK_NAME ${REDLEASE_FENCING_TOKEN-none}\" > " + path("tokens") +
           "; echo \"$REDLEASE_FENCING_TOKENS\" >> " + path("tokens") + "; mv " + path("tokens") + " " + path("ready") +
           "; while [ ! -e " +
           path("go") + " ]; do sleep 0.01; done";
  }
  void go() { write_text(path("go"), "go\n"); }
  static void write_text(const std::string& file, const std::string& text) {
    FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  // The value each node holds under `name` ("" for none).
  std::vector<std::string> values(const std::string& name) {
    std::vector<std::string> v;
    for (int i = 0; i < nodes; ++i) {
      auto r = raw(i)({"GET", name});
      v.push_back(r.is_string() ? r.str : "");
    }
    return v;
  }
  bool none_held(const std::string& name) {
    for (const auto& v : values(name))
      if (!v.empty()) return false;
    return true;
  }
  std::string three_urls() { return srv(0).url() + " " + srv(1).url() + "  " + srv(2).url(); }

  std::vector<std::unique_ptr<redis_server>> extra_;
  std::vector<std::unique_ptr<raw_client>> raws_;
  scratch_dir dir_{"redlease-cli-redlock-test"};
  std::vector<std::unique_ptr<cli_process>> procs_;
};

// The command runs while every node holds one random value with the TTL; the keys are gone once it
// exits. Its environment names the lock and has no fencing token (RedLock gives none).
TEST_F(cli_redlock_test, runs_the_command_while_a_majority_holds_one_value) {
  auto& p = start(run_args("job", {"--json"}, wait_for_go()));
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << p.err();
  // No single token; the masters' own, "node=token" in the masters' order, each the node's sequence.
  const auto ready = read_whole_file(path("ready"));
  ASSERT_EQ(ready.rfind("job none\n", 0), 0u) << ready;
  std::istringstream tokens(ready.substr(9));
  std::string pair;
  int seen = 0;
  while (tokens >> pair) {
    const auto eq = pair.find('=');
    ASSERT_NE(eq, std::string::npos) << pair;
    const int node = std::stoi(pair.substr(0, eq));
    ASSERT_GE(node, 0);
    ASSERT_LT(node, nodes);
    EXPECT_EQ(pair.substr(eq + 1), raw(node)({"GET", "redlease_redlock_token:{job}"}).str) << pair;
    ++seen;
  }
  EXPECT_GE(seen, 2) << ready;  // a majority's, at least
  const auto v = values("job");
  EXPECT_EQ(v[0].size(), 32u);
  EXPECT_EQ(v[0], v[1]);
  EXPECT_TRUE(eventually([&] { return values("job")[2] == v[0]; }, 3000ms));  // the last grant may land later
  for (int i = 0; i < nodes; ++i) {
    auto ttl = raw(i)({"PTTL", "job"}).integer;
    EXPECT_GT(ttl, 20000);  // the default: 30 s
    EXPECT_LE(ttl, 30000);
  }
  go();
  EXPECT_EQ(p.wait(), 0) << p.err();
  EXPECT_TRUE(none_held("job"));  // released, not expired
  const auto err = p.err();
  EXPECT_NE(err.find("\"event\":\"acquired\",\"lock\":\"job\",\"kind\":\"redlock\",\"holder\":\"" + v[0] + "\""),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("\"event\":\"released\""), std::string::npos) << err;
}

TEST_F(cli_redlock_test, a_second_run_with_wait_0_is_busy) {
  auto& first = start(run_args("busy", {}, wait_for_go()));
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << first.err();
  const auto held = values("busy");
  auto t0 = steady::now();
  auto second = run(run_args("busy", {"--wait", "0"}, "echo ran > " + path("second")));
  EXPECT_EQ(second.status, 75) << second.err;
  EXPECT_LT(ms_since(t0), 5000);
  EXPECT_NE(second.err.find("redlease: lock \"busy\" is held by another owner"), std::string::npos) << second.err;
  EXPECT_FALSE(file_exists("second"));
  // A wait that runs out is the same status, after the wait.
  t0 = steady::now();
  second = run(run_args("busy", {"--wait", "600ms"}, "echo ran > " + path("second")));
  EXPECT_EQ(second.status, 75) << second.err;
  EXPECT_GE(ms_since(t0), 600);
  EXPECT_NE(second.err.find("not acquired within 600ms"), std::string::npos) << second.err;
  EXPECT_EQ(values("busy"), held);  // the holder's keys untouched
  go();
  EXPECT_EQ(first.wait(), 0) << first.err();
  EXPECT_TRUE(none_held("busy"));
}

TEST_F(cli_redlock_test, usage_errors_exit_64) {
  const std::vector<std::string> two{"--redis", srv(0).url(), "--redis", srv(1).url()};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  auto r = run(with({"run", "--redlock"}, with(two, {"x", "--", "true"})));
  EXPECT_EQ(r.status, 64);
  EXPECT_NE(r.err.find("--redlock needs at least 3 masters"), std::string::npos) << r.err;
  r = run({"run", "--redlock", "x", "--", "true"}, {"REDLEASE_URL=" + srv(0).url()});
  EXPECT_EQ(r.status, 64);
  EXPECT_NE(r.err.find("$REDLEASE_URL gives 1"), std::string::npos) << r.err;
  r = run(with({"run"}, with(two, {"x", "--", "true"})));
  EXPECT_EQ(r.status, 64);
  EXPECT_NE(r.err.find("--redis is given 2 times: several servers are for --redlock"), std::string::npos) << r.err;
  r = run(run_args("x", {"--lease", "5s"}, "true"));
  EXPECT_EQ(r.status, 64);
  EXPECT_NE(r.err.find("--lease is not available with --redlock"), std::string::npos) << r.err;
  r = run(run_args("x", {"--mutex"}, "true"));
  EXPECT_EQ(r.status, 64);
  r = run(with({"status", "--redlock"}, with(two, {"x"})));
  EXPECT_EQ(r.status, 64);
  EXPECT_NE(r.err.find("--redlock needs at least 3 masters"), std::string::npos) << r.err;
  r = run(with({"status"}, with(two, {"x"})));
  EXPECT_EQ(r.status, 64);
  EXPECT_TRUE(none_held("x"));
}

TEST_F(cli_redlock_test, the_urls_may_come_from_redlease_url) {
  auto r = run({"run", "--redlock", "env", "--", "sh", "-c", "echo $REDLEASE_LOCK_NAME > " + path("ran")},
               {"REDLEASE_URL=" + three_urls()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_whole_file(path("ran")), "env\n");
  r = run({"status", "--redlock", "--json", "env"}, {"REDLEASE_URL=" + three_urls()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"state\":\"free\""), std::string::npos) << r.out;
}

// Another value on 2 of 3 nodes: the next renewal (every third of the 1 s TTL) finds the lock
// taken; the command gets SIGTERM and run exits 76. The foreign values stay, ours is released.
TEST_F(cli_redlock_test, losing_the_majority_terminates_the_command_and_exits_76) {
  const std::string body = "trap 'echo term > " + path("term") + "; kill $p; exit 0' TERM; echo > " +
                           path("ready") + "; sleep 30 & p=$!; wait $p";
  auto& p = start(run_args("lost", {"--watchdog-timeout", "1s", "--json"}, body));
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << p.err();
  const auto ours = values("lost")[0];
  ASSERT_TRUE(eventually([&] { return values("lost")[2] == ours; }, 3000ms));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(raw(i)({"SET", "lost", "foreign", "PX", "30000"}).is_ok());
  const auto t0 = steady::now();
  EXPECT_EQ(p.wait(), 76) << p.err();
  EXPECT_LT(ms_since(t0), 5000);
  EXPECT_EQ(read_whole_file(path("term")), "term\n");
  const auto err = p.err();
  EXPECT_NE(err.find("{\"event\":\"lost\",\"lock\":\"lost\",\"reason\":\"taken\"}"), std::string::npos) << err;
  EXPECT_NE(err.find("\"event\":\"terminating\""), std::string::npos) << err;
  EXPECT_TRUE(eventually([&] { return values("lost") == std::vector<std::string>{"foreign", "foreign", ""}; }, 1000ms));
}

TEST_F(cli_redlock_test, a_stopped_node_leaves_a_majority_that_grants) {
  srv(2).pause();  // SIGSTOP: connections accepted by the kernel, nothing answered
  auto& p = start(run_args("paused", {}, wait_for_go()));
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << p.err();
  const auto v0 = raw(0)({"GET", "paused"}).str;  // (the stopped node would not answer the raw client either)
  EXPECT_EQ(v0.size(), 32u);
  EXPECT_EQ(raw(1)({"GET", "paused"}).str, v0);
  go();
  EXPECT_EQ(p.wait(), 0) << p.err();
  EXPECT_EQ(raw(0)({"EXISTS", "paused"}).integer, 0);
  EXPECT_EQ(raw(1)({"EXISTS", "paused"}).integer, 0);
}

// A node that is not listening is named, and the lock is taken by the two others; two such nodes
// leave no majority: Redis unavailable, 69, naming both.
TEST_F(cli_redlock_test, unreachable_nodes_a_minority_is_named_a_majority_exits_69) {
  const std::string url2 = srv(2).url();
  srv(2).kill();
  auto r = run(run_args("gone", {"--json"}, "echo > " + path("ran")));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(file_exists("ran"));
  EXPECT_NE(r.err.find("\"event\":\"node_unreachable\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("connection refused"), std::string::npos) << r.err;
  srv(1).kill();
  r = run(run_args("gone", {}, "echo > " + path("ran2")));
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_FALSE(file_exists("ran2"));
  EXPECT_NE(r.err.find("2 of 3 masters cannot be reached (RedLock needs 2)"), std::string::npos) << r.err;
  EXPECT_EQ(raw(0)({"EXISTS", "gone"}).integer, 0);
  r = run({"status", "--redlock", "--redis", srv(0).url(), "--redis", srv(1).url(), "--redis", url2, "gone"});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_NE(r.out.find("gone: unknown: only 1 of 3 masters answered (2 needed)"), std::string::npos) << r.out;
}

// A wait that ends while a majority no longer answers is Redis unavailable (69), not "not acquired".
TEST_F(cli_redlock_test, a_wait_that_ends_with_a_majority_unreachable_exits_69) {
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(raw(i)({"SET", "w69", "foreign", "PX", "30000"}).is_ok());
  ASSERT_TRUE(raw(2)({"CONFIG", "RESETSTAT"}).is_ok());
  auto& p = start(run_args("w69", {"--wait", "1500ms"}, "echo > " + path("ran")));
  // Until an attempt reached the third master: the run is past its first PING of every master (a
  // kill before that is told by the PING check, in other words) and waiting. Its connection alone
  // (CLIENT LIST) came before the PINGs' replies: the last CI's flake.
  ASSERT_TRUE(eventually(
      [&] {
        const auto stats = raw(2)({"INFO", "commandstats"}).str;
        return stats.find("cmdstat_evalsha:") != std::string::npos || stats.find("cmdstat_eval:") != std::string::npos;
      },
      10000ms))
      << p.err();
  srv(0).kill();
  srv(1).kill();
  EXPECT_EQ(p.wait(), 69) << p.err();
  EXPECT_FALSE(file_exists("ran"));
  EXPECT_NE(p.err().find("RedLock \"w69\" not acquired: 2 of 3 masters cannot be reached (RedLock needs 2)"),
            std::string::npos)
      << p.err();
}

// A signal while waiting ends the wait (within a slice of it) without running the command, and
// leaves none of its keys.
TEST_F(cli_redlock_test, a_signal_while_waiting_ends_the_run) {
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(raw(i)({"SET", "wait", "foreign", "PX", "30000"}).is_ok());
  auto& p = start(run_args("wait", {"--json"}, "echo > " + path("ran")));
  // Connected (after its signals were blocked), so waiting: its attempts are refused by the two others.
  ASSERT_TRUE(eventually([&] { return raw(2)({"CLIENT", "LIST"}).str.find("name=redlease-cli") != std::string::npos; },
                         10000ms))
      << p.err();
  ::kill(p.pid(), SIGTERM);
  const auto t0 = steady::now();
  EXPECT_EQ(p.wait(), 128 + SIGTERM) << p.err();
  EXPECT_LT(ms_since(t0), 3000);
  EXPECT_FALSE(file_exists("ran"));
  EXPECT_NE(p.err().find("\"event\":\"interrupted\""), std::string::npos) << p.err();
  EXPECT_TRUE(eventually([&] { return values("wait")[2].empty(); }, 1000ms));
}

// Each URL is a client of its own, with the usual TLS flags: a TLS master among plain ones takes
// part with --cacert; with a CA that does not know it, the two others grant; a majority of TLS
// failures is 69, with their words.
TEST_F(cli_redlock_test, a_tls_master_among_plain_ones) {
  REDLEASE_REQUIRE(test_certs::available(), "openssl not found");
  test_certs certs;
  server_options o;
  o.tls.cert_file = certs.server().cert;
  o.tls.key_file = certs.server().key;
  o.tls.ca_file = certs.ca();
  redis_server tls(o);
  raw_client tls_raw = tls.client();  // on its plain port
  const std::vector<std::string> masters{"--redis", srv(0).url(), "--redis", srv(1).url(), "--redis", tls.tls_url()};
  auto args = [&](const std::string& ca, const std::string& body) {
    std::vector<std::string> a{"run", "--redlock", "--json", "--cacert", ca};
    a.insert(a.end(), masters.begin(), masters.end());
    a.insert(a.end(), {"tls", "--", "sh", "-c", body});
    return a;
  };
  auto& p = start(args(certs.ca(), wait_for_go()));
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << p.err();
  const auto v = raw(0)({"GET", "tls"}).str;
  EXPECT_EQ(v.size(), 32u);
  EXPECT_TRUE(eventually([&] { return tls_raw({"GET", "tls"}).str == v; }, 3000ms));
  std::vector<std::string> st{"status", "--redlock", "--cacert", certs.ca()};
  st.insert(st.end(), masters.begin(), masters.end());
  st.push_back("tls");
  auto r = run(st);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("tls: held by a majority (3 of 3 masters, value " + v + ")"), std::string::npos) << r.out;
  go();
  EXPECT_EQ(p.wait(), 0) << p.err();
  EXPECT_TRUE(tls_raw({"GET", "tls"}).is_nil());

  // (Whether the failed handshake is named depends on its coming within the grace after the two
  // others answered: only the outcome is checked.)
  r = run(args(certs.other_ca(), "echo > " + path("ran")));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(file_exists("ran"));
  // Two URLs of it (a majority) fail: 69, with the TLS failure's words for each.
  r = run({"run", "--redlock", "--cacert", certs.other_ca(), "--redis", srv(0).url(), "--redis", tls.tls_url(),
           "--redis", tls.tls_url(), "tls", "--", "sh", "-c", "echo > " + path("ran2")});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_FALSE(file_exists("ran2"));
  EXPECT_NE(r.err.find("2 of 3 masters cannot be reached"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown CA"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--cacert"), std::string::npos) << r.err;
}

// A Sentinel-managed master among plain ones: its URL is resolved as `run` resolves any.
TEST_F(cli_redlock_test, a_sentinel_managed_master_among_plain_ones) {
  sentinel_rig rig;
  const std::string sentinel_url =
      "redis-sentinel://127.0.0.1:" + std::to_string(rig.sentinel_ports()[0]) + "?master=" + rig.master_name();
  raw_client master = rig.master().client();
  auto& p = start({"run", "--redlock", "--redis", srv(0).url(), "--redis", sentinel_url, "--redis", srv(1).url(),
                   "sent", "--", "sh", "-c", wait_for_go()});
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << p.err();
  const auto v = raw(0)({"GET", "sent"}).str;
  EXPECT_EQ(v.size(), 32u);
  EXPECT_TRUE(eventually([&] { return master({"GET", "sent"}).str == v; }, 3000ms));
  go();
  EXPECT_EQ(p.wait(), 0) << p.err();
  EXPECT_TRUE(master({"GET", "sent"}).is_nil());
}

TEST_F(cli_redlock_test, status_shows_each_node_and_the_verdict) {
  auto status = [&](const std::vector<std::string>& more) {
    std::vector<std::string> a{"status", "--redlock"};
    auto r = redis_flags();
    a.insert(a.end(), r.begin(), r.end());
    a.insert(a.end(), more.begin(), more.end());
    return run(a);
  };
  auto r = status({"free"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("LOCK  NODE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("free: free: not held by a majority (no master holds it)"), std::string::npos) << r.out;

  auto& p = start(run_args("held", {}, wait_for_go()));
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << p.err();
  const auto v = values("held")[0];
  ASSERT_TRUE(eventually([&] { return values("held")[2] == v; }, 3000ms));
  r = status({"held"});
  EXPECT_EQ(r.status, 0) << r.err;
  for (int i = 0; i < nodes; ++i) {
    auto row = r.out.find("held  redis://127.0.0.1:" + std::to_string(srv(i).port()));
    ASSERT_NE(row, std::string::npos) << r.out;
    auto line = r.out.substr(row, r.out.find('\n', row) - row);
    EXPECT_NE(line.find(" held "), std::string::npos) << line;
    EXPECT_NE(line.find(v), std::string::npos) << line;
  }
  EXPECT_NE(r.out.find("held: held by a majority (3 of 3 masters, value " + v + ")"), std::string::npos) << r.out;
  r = status({"--json", "held", "free"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("{\"lock\":\"held\",\"kind\":\"redlock\",\"state\":\"held\",\"majority\":true,\"value\":\"" +
                       v + "\",\"holders\":3,\"quorum\":2,\"answered\":3,"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("{\"node\":\"" + srv(0).url() + "\",\"state\":\"held\",\"value\":\"" + v + "\",\"ttl_ms\":"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("{\"lock\":\"free\",\"kind\":\"redlock\",\"state\":\"free\",\"majority\":false,\"value\":null"),
            std::string::npos)
      << r.out;
  go();
  EXPECT_EQ(p.wait(), 0) << p.err();

  // One value on a single node is no majority; a hash is not a RedLock key (65).
  ASSERT_TRUE(raw(0)({"SET", "odd", "someone", "PX", "30000"}).is_ok());
  ASSERT_EQ(raw(1)({"HSET", "odd", "f", "1"}).integer, 1);
  r = status({"odd"});
  EXPECT_EQ(r.status, 65) << r.err;
  EXPECT_NE(r.out.find("a hash: not a RedLock key (a string)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("odd: not held by a majority: at most 1 of 3 masters hold one value (2 needed)"),
            std::string::npos)
      << r.out;
  r = status({"--json", "odd"});
  EXPECT_EQ(r.status, 65) << r.err;
  EXPECT_NE(r.out.find("\"state\":\"other\",\"type\":\"hash\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"state\":\"split\""), std::string::npos) << r.out;
}

}  // namespace
}  // namespace redlease::test
