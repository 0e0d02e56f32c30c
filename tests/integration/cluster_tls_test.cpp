// SPDX-License-Identifier: MIT
// A TLS Redis Cluster that announces its nodes by hostname (issue 39): 3 masters + 3 replicas
// (tests/support/cluster_rig.hpp) with `tls-cluster yes`, `tls-replication yes`,
// `cluster-announce-hostname localhost` and a server certificate that names only localhost (SAN
// DNS:localhost), one rig for the binary. A client seeded by name takes locks on every master (the
// per-node connections verify the announced name, not 127.0.0.1); seeded by 127.0.0.1 it fails with
// errc::tls_name_mismatch and touches no plaintext port; it follows a MOVED by hostname after a
// resharding; against a cluster with `tls-cluster no` (which announces plaintext ports to TLS
// clients) it fails with a typed error in bounded time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cluster_rig.hpp"
#include "info_field.hpp"
#include "lock_test_support.hpp"
#include "redis_fixture.hpp"
#include "redlease/client.hpp"
#include "test_certs.hpp"

namespace redlease::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* hostname = "localhost";

// The options of a TLS rig whose certificate names only `hostname`.
cluster_rig_options tls_rig_options(const test_certs& certs, bool tls_cluster, int replicas) {
  cluster_rig_options o;
  o.replicas_per_master = replicas;
  o.tls.cert_file = certs.localhost_only().cert;
  o.tls.key_file = certs.localhost_only().key;
  o.tls.ca_file = certs.ca();
  o.tls.cluster = tls_cluster;
  o.tls.replication = tls_cluster;
  o.announce_hostname = hostname;
  return o;
}

// "endpoint:port" of every node CLUSTER SLOTS lists (masters and replicas), sorted; works on the
// library's `reply` and the rig's `raw_reply` alike.
template <class Reply>
std::set<std::string> endpoints(const Reply& slots) {
  std::set<std::string> out;
  for (const auto& range : slots.elements) {
    for (std::size_t i = 2; i < range.elements.size(); ++i) {
      const auto& n = range.elements[i];
      if (n.elements.size() >= 2) out.insert(n.elements[0].str + ":" + std::to_string(n.elements[1].integer));
    }
  }
  return out;
}

std::string joined(const std::set<std::string>& s) {
  std::string out;
  for (const auto& e : s) out += (out.empty() ? "" : " ") + e;
  return out;
}

// "localhost:PORT" of each of these ports.
std::set<std::string> named(const std::vector<std::uint16_t>& ports) {
  std::set<std::string> out;
  for (auto p : ports) out.insert(std::string(hostname) + ":" + std::to_string(p));
  return out;
}

// `CLUSTER SLOTS` asked over TLS of the node on `port`, by a client that does not route
// (`?cluster=no`).
reply slots_over_tls(const cluster_rig& rig, std::uint16_t port) {
  config c = config::from_url(rig.tls_url(port) + "?cluster=no");
  c.tls.ca_file = rig.ca_file();
  c.connect_timeout = 1000ms;
  client cl{c};
  return cl.command({"CLUSTER", "SLOTS"});
}

// What CLUSTER SLOTS of the rig's first master says to a plaintext and to a TLS client (printed
// under `label`), and the ports of every node.
struct announcement {
  std::set<std::string> to_plaintext;
  std::set<std::string> to_tls;
  std::vector<std::uint16_t> plaintext_ports;
  std::vector<std::uint16_t> tls_ports;
};

announcement announced(const cluster_rig& rig, const std::string& label) {
  announcement a;
  a.plaintext_ports = rig.ports();
  for (auto p : a.plaintext_ports) a.tls_ports.push_back(rig.tls_port(p));
  const auto seed = rig.masters().front();
  a.to_plaintext = endpoints(rig.client(seed)({"CLUSTER", "SLOTS"}));
  const reply r = slots_over_tls(rig, seed);
  EXPECT_TRUE(r.is_array()) << r.str;
  a.to_tls = endpoints(r);
  std::cout << "[ " << label << " ] CLUSTER SLOTS to a plaintext client: " << joined(a.to_plaintext) << "\n"
            << "[ " << label << " ] CLUSTER SLOTS to a TLS client:       " << joined(a.to_tls) << "\n";
  return a;
}

// `total_connections_received` (plaintext and TLS together) of the node `c` is connected to.
long long connections_received(raw_client& c) {
  return std::stoll(info_field(c({"INFO", "stats"}).str, "total_connections_received"));
}

// How many of the node's clients (CLIENT LIST over `c`) are connected to its port `port`.
int clients_on(raw_client& c, std::uint16_t port) {
  std::istringstream lines(c({"CLIENT", "LIST"}).str);
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" laddr=127.0.0.1:" + std::to_string(port) + " ") != std::string::npos) ++n;
  }
  return n;
}

class cluster_tls_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cluster_rig::available() || !test_certs::available()) return;
    try {
      certs_ = std::make_unique<test_certs>();
      rig_ = std::make_unique<cluster_rig>(tls_rig_options(*certs_, true, 1));
    } catch (const std::exception& e) {
      start_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    rig_.reset();
    certs_.reset();
  }
  void SetUp() override {
    REDLEASE_REQUIRE(cluster_rig::available() && test_certs::available(), "redis-server or openssl not found");
    ASSERT_NE(rig_, nullptr) << start_error_;
  }
  void TearDown() override {
    if (rig_ != nullptr) rig_->wait_ready(std::chrono::seconds(20));
  }

  // A client seeded with `url`, trusting the test CA, its background errors in `log_`.
  config cfg(const std::string& url) {
    config c = config::from_url(url);
    c.tls.ca_file = certs_->ca();
    c.connect_timeout = 1000ms;
    c.request_timeout = 2000ms;
    c.reconnect_min_delay = 10ms;
    c.reconnect_max_delay = 100ms;
    c.on_error = log_.hook();
    return c;
  }
  // A name whose slot the master on `port` serves.
  static std::string name_on(const cluster_rig& rig, std::uint16_t port, const std::string& stem) {
    for (int i = 0;; ++i) {
      auto n = stem + ":" + std::to_string(i);
      if (rig.master_of(n) == port) return n;
    }
  }

  inline static std::unique_ptr<test_certs> certs_;
  inline static std::unique_ptr<cluster_rig> rig_;
  inline static std::string start_error_;
  error_log log_;
};

// The facts the rig's header states: with tls-cluster yes, CLUSTER SLOTS names every node
// "localhost" with its TLS port to a TLS client and its plaintext port to a plaintext client, and a
// MOVED over TLS names the TLS port.
TEST_F(cluster_tls_test, cluster_slots_names_tls_ports_to_tls_clients_and_plaintext_ports_to_others) {
  const announcement a = announced(*rig_, "tls-cluster yes");
  EXPECT_EQ(a.to_plaintext, named(a.plaintext_ports));
  EXPECT_EQ(a.to_tls, named(a.tls_ports));

  // A MOVED over TLS names the owner by hostname and TLS port.
  const auto name = name_on(*rig_, rig_->other_master(rig_->slot_of("x")), "moved");
  config c = config::from_url(rig_->tls_url(rig_->master_of("x")) + "?cluster=no");
  c.tls.ca_file = certs_->ca();
  client cl{c};
  std::error_code ec;
  const reply moved = cl.command({"SET", name, "1"}, ec);
  const std::string text = moved.is_error() ? moved.str : last_error_text();
  std::cout << "[ tls-cluster yes ] MOVED over TLS: " << text << "\n";
  EXPECT_NE(text.find("MOVED"), std::string::npos) << text;
  EXPECT_NE(text.find(std::string(hostname) + ":" + std::to_string(rig_->tls_port(rig_->master_of(name)))),
            std::string::npos)
      << text;
}

TEST_F(cluster_tls_test, a_client_seeded_by_name_locks_on_every_master_over_tls) {
  const auto masters = rig_->masters();
  ASSERT_EQ(masters.size(), 3u);
  client c(cfg(rig_->tls_url(masters[1])));
  std::vector<lock> held;
  for (int i = 0; i < 30; ++i) {
    auto l = c.lock("cluster-tls:" + std::to_string(i));
    std::error_code ec;
    ASSERT_TRUE(l.try_lock(ec)) << i << ": " << ec.message() << ": " << last_error_text();
    held.push_back(l);
  }
  // Each master serves the client on its TLS port (the certificate names only localhost: each
  // per-node connection verified the announced name) and none on its plaintext port but ours.
  for (auto m : masters) {
    auto raw = rig_->client(m);
    EXPECT_GE(clients_on(raw, rig_->tls_port(m)), 1) << "master " << m;
    EXPECT_EQ(clients_on(raw, m), 1) << "master " << m << ": only the CLIENT LIST connection itself";
  }
  std::set<std::uint16_t> used;
  for (int i = 0; i < 30; ++i) {
    const auto name = "cluster-tls:" + std::to_string(i);
    const auto owner = rig_->master_of(name);
    used.insert(owner);
    EXPECT_EQ(rig_->client(owner)({"EXISTS", name}).integer, 1) << name << " on " << owner;
  }
  EXPECT_EQ(used.size(), 3u) << "30 names span the three masters";
  for (auto& l : held) {
    std::error_code ec;
    l.unlock(ec);
    EXPECT_FALSE(ec) << ec.message() << ": " << last_error_text();
  }
  for (int i = 0; i < 30; ++i) {
    const auto name = "cluster-tls:" + std::to_string(i);
    EXPECT_EQ(rig_->client(rig_->master_of(name))({"EXISTS", name}).integer, 0) << name;
  }
  std::lock_guard<std::mutex> g(log_.mu);
  EXPECT_TRUE(log_.lines.empty()) << log_.lines.front();
}

TEST_F(cluster_tls_test, a_client_seeded_by_ip_fails_name_verification_and_never_falls_back) {
  const auto seed = rig_->masters().front();
  const std::string name = "cluster-tls:by-ip";
  const auto owner = rig_->master_of(name);
  const auto ports = rig_->ports();
  std::vector<raw_client> raws;
  std::vector<long long> before;
  for (auto p : ports) {
    raws.push_back(rig_->client(p));
    before.push_back(connections_received(raws.back()));
  }

  client c(cfg(rig_->tls_url(seed, "127.0.0.1")));
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto l = c.lock(name);
    std::error_code ec;
    const auto t0 = steady::now();
    EXPECT_FALSE(l.try_lock(ec));
    const auto took = ms_since(t0);
    const std::string text = last_error_text();
    std::cout << "[ tls ] seeded by 127.0.0.1: " << ec.message() << " after " << took << " ms: " << text << "\n";
    EXPECT_EQ(ec, errc::tls_name_mismatch) << ec.message() << ": " << text;
    EXPECT_NE(text.find("127.0.0.1:" + std::to_string(rig_->tls_port(seed))), std::string::npos) << text;
    EXPECT_LT(took, 3000);
  }
  std::error_code ec;
  c.ping(ec);
  EXPECT_EQ(ec, errc::tls_name_mismatch) << ec.message();

  // No connection completed anywhere (a TLS handshake that fails is not counted in
  // total_connections_received, measured; a plaintext connection to any port would be), and none
  // on the seed's plaintext port but ours: the client never learnt a plaintext port, nor tried one.
  for (std::size_t i = 0; i < ports.size(); ++i) {
    EXPECT_EQ(connections_received(raws[i]) - before[i], 0) << "node " << ports[i];
    if (ports[i] == seed) {
      EXPECT_EQ(clients_on(raws[i], seed), 1) << "only our raw client on the plaintext port";
    }
  }
  EXPECT_EQ(raws[static_cast<std::size_t>(std::find(ports.begin(), ports.end(), owner) - ports.begin())](
                {"EXISTS", name})
                .integer,
            0);
}

// A resharding under TLS (the rig's MIGRATE dials the TLS port with tls-cluster yes): the client
// follows MOVED, which names the new owner by hostname and TLS port, to release its hold there.
TEST_F(cluster_tls_test, moved_by_hostname_after_a_resharding) {
  const auto masters = rig_->masters();
  client c(cfg(rig_->tls_url(masters[2])));
  const auto name = name_on(*rig_, masters[0], "cluster-tls:moved");
  const int slot = rig_->slot_of(name);
  auto l = c.lock(name);
  std::error_code ec;
  ASSERT_TRUE(l.try_lock(0ms, 10000ms, ec)) << ec.message() << ": " << last_error_text();
  rig_->migrate_slot(slot, masters[0], masters[1]);
  EXPECT_EQ(rig_->client(masters[1])({"EXISTS", name}).integer, 1);
  l.unlock(ec);
  EXPECT_FALSE(ec) << ec.message() << ": " << last_error_text();
  EXPECT_EQ(rig_->client(masters[1])({"EXISTS", name}).integer, 0);
  rig_->migrate_slot(slot, masters[1], masters[0]);
}

// With `tls-cluster no` a node's announced port is its plaintext port, and CLUSTER SLOTS says it to
// TLS clients too: a client seeded on a TLS port then dials TLS to plaintext ports. It must fail
// with a typed error in bounded time, and never send the request in plaintext.
TEST_F(cluster_tls_test, tls_cluster_no_announces_plaintext_ports_to_tls_clients) {
  std::unique_ptr<cluster_rig> rig;
  try {
    rig = std::make_unique<cluster_rig>(tls_rig_options(*certs_, false, 0));
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const announcement a = announced(*rig, "tls-cluster no");
  EXPECT_EQ(a.to_plaintext, named(a.plaintext_ports));
  EXPECT_EQ(a.to_tls, named(a.plaintext_ports)) << "the plaintext ports, to a TLS client";
  const auto seed = rig->masters().front();

  // Until the table arrives a request may go through the seed's own TLS connection
  // (docs/cluster.md, "Detection"), so the first attempts can succeed; once the table names
  // localhost:<plaintext port>, every attempt fails.
  client c(cfg(rig->tls_url(seed)));
  std::vector<lock> taken;
  std::vector<std::string> refused;
  for (int i = 0; i < 6 && refused.size() < 2; ++i) {
    const auto name = name_on(*rig, seed, "cluster-tls:plain-announced:" + std::to_string(i));
    auto l = c.lock(name);
    std::error_code ec;
    const auto t0 = steady::now();
    const bool got = l.try_lock(0ms, 5000ms, ec);
    const auto took = ms_since(t0);
    const std::string text = last_error_text();
    std::cout << "[ tls-cluster no ] lock " << i << ": " << (got ? "taken" : ec.message()) << " after " << took
              << " ms" << (got ? "" : ": " + text) << "\n";
    if (got) {
      EXPECT_TRUE(refused.empty()) << "taken after a refusal: the table was in";
      taken.push_back(l);
      continue;
    }
    refused.push_back(name);
    EXPECT_EQ(ec, errc::tls_not_offered_by_server) << ec.message() << ": " << text;
    EXPECT_NE(text.find("localhost:" + std::to_string(seed)), std::string::npos) << text;
    EXPECT_LT(took, 3000) << "bounded by connect_timeout, not a hang";
  }
  EXPECT_EQ(refused.size(), 2u);
  auto raw = rig->client(seed);
  for (const auto& name : refused) EXPECT_EQ(raw({"EXISTS", name}).integer, 0) << name << ": nothing ran in plaintext";
  // A hold taken through the seed before the table came cannot be released through the table.
  for (auto& l : taken) {
    std::error_code ec;
    const auto t0 = steady::now();
    l.unlock(ec);
    std::cout << "[ tls-cluster no ] unlock of a hold taken before the table: " << (ec ? ec.message() : "ok")
              << " after " << ms_since(t0) << " ms\n";
    EXPECT_EQ(ec, errc::tls_not_offered_by_server) << ec.message();
  }
  std::lock_guard<std::mutex> g(log_.mu);
  for (const auto& line : log_.lines) std::cout << "[ on_error ] " << line << "\n";
}

}  // namespace
}  // namespace redlease::test
