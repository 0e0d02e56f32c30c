// SPDX-License-Identifier: MIT
#include "cluster_rig.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "info_field.hpp"

namespace redlease::test {
namespace {

using namespace std::chrono_literals;

// How long one poll request may take: a slow node must not stall a deadline by much.
constexpr std::chrono::milliseconds poll_timeout = 1000ms;
// The pause between two polls of a condition.
constexpr std::chrono::milliseconds poll_interval = 10ms;
constexpr int slot_count = 16384;

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()); }

// Throws unless the reply is +OK.
void expect_ok(const raw_reply& r, const std::string& what) {
  if (!r.is_ok()) throw std::runtime_error("cluster_rig: " + what + " answered " + r.to_string());
}

// One slot range of CLUSTER SLOTS: [start, end, [ip, port, id], [replica...]...].
struct slot_range {
  int start = 0;
  int end = -1;
  std::uint16_t master = 0;
  std::vector<std::uint16_t> replicas;
};

std::vector<slot_range> parse_slots(const raw_reply& r) {
  std::vector<slot_range> out;
  for (const raw_reply& e : r.elements) {
    if (e.elements.size() < 3) continue;
    slot_range s;
    s.start = static_cast<int>(e.elements[0].integer);
    s.end = static_cast<int>(e.elements[1].integer);
    if (e.elements[2].elements.size() >= 2) s.master = static_cast<std::uint16_t>(e.elements[2].elements[1].integer);
    for (std::size_t i = 3; i < e.elements.size(); ++i) {
      if (e.elements[i].elements.size() >= 2) {
        s.replicas.push_back(static_cast<std::uint16_t>(e.elements[i].elements[1].integer));
      }
    }
    std::sort(s.replicas.begin(), s.replicas.end());
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const slot_range& a, const slot_range& b) { return a.start < b.start; });
  return out;
}

// "start-end:master[/replica,...] ..." in slot order; `covered` counts the slots.
std::string signature(const std::vector<slot_range>& ranges, bool with_replicas, int& covered) {
  std::string out;
  covered = 0;
  for (const slot_range& s : ranges) {
    covered += s.end - s.start + 1;
    if (!out.empty()) out += ' ';
    out += std::to_string(s.start);
    out += '-';
    out += std::to_string(s.end);
    out += ':';
    out += std::to_string(s.master);
    if (!with_replicas) continue;
    for (std::size_t i = 0; i < s.replicas.size(); ++i) {
      out += i == 0 ? '/' : ',';
      out += std::to_string(s.replicas[i]);
    }
  }
  return out;
}

// The first node endpoint of CLUSTER SLOTS other than `host` (as "endpoint:port"), or "" if each
// names `host`.
std::string endpoint_not_named(const raw_reply& r, const std::string& host) {
  for (const raw_reply& e : r.elements) {
    for (std::size_t i = 2; i < e.elements.size(); ++i) {
      const raw_reply& n = e.elements[i];
      if (n.elements.size() >= 2 && n.elements[0].str != host) {
        return n.elements[0].str + ":" + std::to_string(n.elements[1].integer);
      }
    }
  }
  return {};
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::vector<std::string> split_words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

bool cluster_rig::available() { return redis_server::available(); }

cluster_rig::cluster_rig(cluster_rig_options opts) : opts_(std::move(opts)) {
  if (opts_.masters < 1 || opts_.replicas_per_master < 0) {
    throw std::invalid_argument("cluster_rig: at least one master and no negative replica count");
  }
  const clock::time_point deadline = clock::now() + opts_.start_timeout;
  server_options node_opts;
  node_opts.unix_socket = false;
  node_opts.cluster = true;
  // No delay before a diskless full sync (7.0 waits 5 s for more replicas by default). A master
  // PINGs its replicas every second (default 10 s): that moves their replication offsets off 0
  // before the cluster is even ok, so CLUSTER SLOTS lists them sooner (the §4.2 gotcha).
  node_opts.extra_args = {"--cluster-node-timeout", ms(opts_.node_timeout), "--enable-debug-command", "local",
                          "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1"};
  if (!opts_.tls.cert_file.empty()) {
    node_opts.tls.cert_file = opts_.tls.cert_file;
    node_opts.tls.key_file = opts_.tls.key_file;
    node_opts.tls.ca_file = opts_.tls.ca_file;
    node_opts.extra_args.insert(node_opts.extra_args.end(),
                                {"--tls-cluster", opts_.tls.cluster ? "yes" : "no", "--tls-replication",
                                 opts_.tls.replication ? "yes" : "no"});
  }
  if (!opts_.announce_hostname.empty()) {
    node_opts.extra_args.insert(node_opts.extra_args.end(),
                                {"--cluster-announce-hostname", opts_.announce_hostname,
                                 "--cluster-preferred-endpoint-type", "hostname"});
  }
  node_opts.extra_args.insert(node_opts.extra_args.end(), opts_.extra_args.begin(), opts_.extra_args.end());
  const int masters = opts_.masters;
  const int total = masters * (1 + opts_.replicas_per_master);
  for (int i = 0; i < total; ++i) nodes_.push_back(std::make_unique<redis_server>(node_opts));

  auto fail = [&](const std::string& what) {
    throw std::runtime_error("cluster_rig: not ready after " + ms(opts_.start_timeout) + " ms: " + what +
                             log_tails());
  };
  try {
    std::vector<raw_client> clients;
    for (const auto& n : nodes_) {
      clients.push_back(n->client());
      raw_reply id = clients.back()({"CLUSTER", "MYID"});
      if (!id.is_string() || id.str.size() != 40) fail("CLUSTER MYID answered " + id.to_string());
      ids_.push_back(id.str);
    }
    // Slots split as redis-cli --cluster create splits them (0-5460, 5461-10922, 10923-16383).
    const double per_master = static_cast<double>(slot_count) / masters;
    double cursor = 0;
    for (int i = 0; i < masters; ++i) {
      const long first = std::lround(cursor);
      long last = std::lround(cursor + per_master - 1);
      if (i == masters - 1 || last > slot_count - 1) last = slot_count - 1;
      cursor += per_master;
      expect_ok(clients[static_cast<std::size_t>(i)](
                    {"CLUSTER", "ADDSLOTSRANGE", std::to_string(first), std::to_string(last)}),
                "CLUSTER ADDSLOTSRANGE");
    }
    // Distinct epochs up front, as redis-cli does: no epoch collisions to resolve after MEET.
    for (std::size_t i = 0; i < clients.size(); ++i) {
      expect_ok(clients[i]({"CLUSTER", "SET-CONFIG-EPOCH", std::to_string(i + 1)}), "CLUSTER SET-CONFIG-EPOCH");
    }
    // The first node meets everyone, and each replica its master too: then a replica need not
    // wait for gossip (~1 s) to know its master.
    auto meet = [&](std::size_t from, std::size_t to) {
      expect_ok(clients[from].command({"CLUSTER", "MEET", "127.0.0.1", std::to_string(nodes_[to]->port()),
                                       std::to_string(nodes_[to]->bus_port())}),
                "CLUSTER MEET");
    };
    for (std::size_t i = 1; i < nodes_.size(); ++i) meet(0, i);
    for (std::size_t i = static_cast<std::size_t>(masters); i < nodes_.size(); ++i) {
      if (i % static_cast<std::size_t>(masters) != 0) meet(i, i % static_cast<std::size_t>(masters));
    }
    // A replica can REPLICATE only once it knows its master (the handshake is over): retry.
    std::vector<bool> attached(nodes_.size(), false);
    for (std::size_t i = 0; i < static_cast<std::size_t>(masters); ++i) attached[i] = true;
    for (;;) {
      std::string missing;
      for (std::size_t i = static_cast<std::size_t>(masters); i < nodes_.size(); ++i) {
        if (attached[i]) continue;
        const std::string& master_id = ids_[i % static_cast<std::size_t>(masters)];
        raw_reply r = clients[i]({"CLUSTER", "REPLICATE", master_id});
        attached[i] = r.is_ok();
        if (!r.is_ok()) missing = std::to_string(nodes_[i]->port()) + ": CLUSTER REPLICATE answered " + r.to_string();
      }
      if (missing.empty()) break;
      if (clock::now() >= deadline) fail(missing);
      std::this_thread::sleep_for(poll_interval);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    wait_ready(std::max(left, 1ms));
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.find("not ready after") != std::string::npos) throw;
    fail(what);
  }
}

cluster_rig::~cluster_rig() { nodes_.clear(); }

std::vector<std::uint16_t> cluster_rig::ports() const {
  std::vector<std::uint16_t> out;
  for (const auto& n : nodes_) out.push_back(n->port());
  return out;
}

std::string cluster_rig::seed_urls() const {
  std::string out;
  for (const auto& n : nodes_) {
    if (!out.empty()) out += ',';
    out += n->url();
  }
  return out;
}

std::size_t cluster_rig::index(std::uint16_t port) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->port() == port) return i;
  }
  throw std::out_of_range("cluster_rig: no node on port " + std::to_string(port));
}

redis_server& cluster_rig::node(std::uint16_t port) { return *nodes_[index(port)]; }
const redis_server& cluster_rig::node(std::uint16_t port) const { return *nodes_[index(port)]; }
const std::string& cluster_rig::id(std::uint16_t port) const { return ids_.at(index(port)); }

std::uint16_t cluster_rig::port_of_id(std::string_view id) const {
  for (std::size_t i = 0; i < ids_.size(); ++i) {
    if (ids_[i] == id) return nodes_[i]->port();
  }
  throw std::out_of_range("cluster_rig: no node with ID " + std::string(id));
}

bool cluster_rig::live(std::uint16_t port) const {
  const redis_server& n = node(port);
  return n.running() && !n.paused();
}

std::uint16_t cluster_rig::tls_port(std::uint16_t port) const { return node(port).tls_port(); }

std::string cluster_rig::tls_url(std::uint16_t port, std::string_view host) const {
  const std::uint16_t p = tls_port(port);
  if (p == 0) return {};
  return "rediss://" + std::string(host) + ":" + std::to_string(p);
}

raw_client cluster_rig::client(std::uint16_t port) const { return node(port).client(); }

raw_client cluster_rig::any_live_client() const {
  // Prefer a node that reports the cluster ok: a node that just came back has a stale view.
  std::string why;
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& n : nodes_) {
      if (!n->running() || n->paused()) continue;
      try {
        raw_client c = n->client();
        c.set_timeout(poll_timeout);
        if (pass == 0 && info_field(c({"CLUSTER", "INFO"}).str, "cluster_state") != "ok") continue;
        return c;
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
  }
  throw std::runtime_error("cluster_rig: no live node answers " + why);
}

raw_reply cluster_rig::slots() const {
  raw_reply r = any_live_client()({"CLUSTER", "SLOTS"});
  if (!r.is_array()) throw std::runtime_error("cluster_rig: CLUSTER SLOTS answered " + r.to_string());
  return r;
}

std::vector<cluster_node> cluster_rig::nodes() const {
  raw_reply r = any_live_client()({"CLUSTER", "NODES"});
  if (!r.is_string()) throw std::runtime_error("cluster_rig: CLUSTER NODES answered " + r.to_string());
  std::vector<cluster_node> out(nodes_.size());
  for (const std::string& line : split_lines(r.str)) {
    const std::vector<std::string> w = split_words(line);
    if (w.size() < 8) continue;
    std::size_t i = 0;
    try {
      i = index(port_of_id(w[0]));
    } catch (const std::out_of_range&) {
      continue;
    }
    cluster_node& n = out[i];
    n.port = nodes_[i]->port();
    n.url = nodes_[i]->url();
    n.id = w[0];
    n.flags = w[2];
    n.master = ("," + w[2] + ",").find(",master,") != std::string::npos;
    if (w[3] != "-") {
      try {
        n.master_port = port_of_id(w[3]);
      } catch (const std::out_of_range&) {
      }
    }
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const cluster_node& n) { return n.port == 0; }), out.end());
  return out;
}

std::vector<std::uint16_t> cluster_rig::masters() const {
  std::vector<std::uint16_t> out;
  for (const slot_range& s : parse_slots(slots())) {
    if (std::find(out.begin(), out.end(), s.master) == out.end()) out.push_back(s.master);
  }
  return out;
}

std::string cluster_rig::role(std::uint16_t port) const {
  raw_client c = client(port);
  c.set_timeout(poll_timeout);
  raw_reply r = c({"ROLE"});
  if (!r.is_array() || r.elements.empty()) throw std::runtime_error("cluster_rig: ROLE answered " + r.to_string());
  return r.elements.front().str;
}

int cluster_rig::slot_of(std::string_view key) const {
  raw_reply r = any_live_client()({"CLUSTER", "KEYSLOT", key});
  if (!r.is_integer()) throw std::runtime_error("cluster_rig: CLUSTER KEYSLOT answered " + r.to_string());
  return static_cast<int>(r.integer);
}

std::uint16_t cluster_rig::master_of_slot(int slot) const {
  for (const slot_range& s : parse_slots(slots())) {
    if (s.start <= slot && slot <= s.end) return s.master;
  }
  throw std::runtime_error("cluster_rig: no owner of slot " + std::to_string(slot) + " in CLUSTER SLOTS");
}

std::uint16_t cluster_rig::master_of(std::string_view key) const { return master_of_slot(slot_of(key)); }

std::uint16_t cluster_rig::replica_of(std::uint16_t master_port) const {
  for (const slot_range& s : parse_slots(slots())) {
    if (s.master == master_port && !s.replicas.empty()) return s.replicas.front();
  }
  for (const cluster_node& n : nodes()) {
    if (!n.master && n.master_port == master_port) return n.port;
  }
  throw std::runtime_error("cluster_rig: " + std::to_string(master_port) + " has no replica");
}

std::uint16_t cluster_rig::other_master(int slot) const {
  const std::uint16_t owner = master_of_slot(slot);
  for (std::uint16_t m : masters()) {
    if (m != owner) return m;
  }
  throw std::runtime_error("cluster_rig: no master other than " + std::to_string(owner));
}

void cluster_rig::pause(std::uint16_t port) { node(port).pause(); }
void cluster_rig::resume(std::uint16_t port) { node(port).resume(); }
void cluster_rig::kill(std::uint16_t port) { node(port).kill(); }

void cluster_rig::restart(std::uint16_t port) {
  redis_server& n = node(port);
  n.stop();  // SIGCONT first if paused; no-op if not running
  n.start();
}

std::uint16_t cluster_rig::failover(std::uint16_t replica_port, failover_mode mode,
                                    std::chrono::milliseconds timeout) {
  const clock::time_point deadline = clock::now() + timeout;
  std::uint16_t old_master = 0;
  for (const cluster_node& n : nodes()) {
    if (n.port == replica_port) old_master = n.master_port;
  }
  std::vector<std::string> cmd = {"CLUSTER", "FAILOVER"};
  if (mode == failover_mode::force) cmd.emplace_back("FORCE");
  if (mode == failover_mode::takeover) cmd.emplace_back("TAKEOVER");
  raw_client c = client(replica_port);
  c.set_timeout(poll_timeout);
  // A graceful failover waits for the replica to reach its master's offset, and lapses after 5 s
  // (CLUSTER_MF_TIMEOUT) if it cannot: an old master demoted a moment ago is still syncing with its
  // new master (failing back at once timed out twice under load). Wait for its link first, and ask
  // again when one attempt lapsed.
  if (mode == failover_mode::graceful) {
    for (;;) {
      const raw_reply info = c({"INFO", "replication"});
      if (info.str.find("master_link_status:up") != std::string::npos) break;
      if (clock::now() >= deadline) break;  // asked anyway: the error below names what happened
      std::this_thread::sleep_for(50ms);
    }
  }
  for (;;) {
    for (;;) {
      raw_reply r = c.command(cmd);
      if (r.is_ok()) break;
      if (clock::now() >= deadline) {
        throw std::runtime_error("cluster_rig: CLUSTER FAILOVER on " + std::to_string(replica_port) + " answered " +
                                 r.to_string() + log_tails());
      }
      std::this_thread::sleep_for(50ms);
    }
    const clock::time_point round = mode == failover_mode::graceful ? std::min(deadline, clock::now() + 6s) : deadline;
    try {
      wait_promoted(replica_port, round);
      return old_master;
    } catch (const std::runtime_error&) {
      if (round >= deadline) throw;
    }
  }
}

void cluster_rig::wait_promoted(std::uint16_t port, clock::time_point deadline) const {
  for (;;) {
    std::string missing;
    try {
      if (const std::string r = role(port); r != "master") {
        missing = std::to_string(port) + " has ROLE " + r;
      } else if (bool agreed = false; (missing = views(false, agreed)), agreed) {
        const std::vector<std::uint16_t> m = masters();
        if (std::find(m.begin(), m.end(), port) != m.end()) return;
        missing = std::to_string(port) + " owns no slots";
      }
    } catch (const std::exception& e) {
      missing = e.what();
    }
    if (clock::now() >= deadline) {
      throw std::runtime_error("cluster_rig: " + std::to_string(port) + " not promoted in time: " + missing +
                               log_tails());
    }
    std::this_thread::sleep_for(poll_interval);
  }
}

// What every live node says: `cluster_state`, `CLUSTER SLOTS` (the masters only, or with the
// replicas) and, with the replicas, a replica's `master_link_status`. `agreed` is true when every
// live node is ok, they all see the same `CLUSTER SLOTS` covering all 16384 slots and, with the
// replicas, every live replica is up and every live node is listed; then the text is that view,
// else what is not so.
std::string cluster_rig::views(bool with_replicas, bool& agreed) const {
  agreed = false;
  std::string first;
  std::uint16_t first_port = 0;
  std::set<std::uint16_t> listed;
  for (const auto& n : nodes_) {
    if (!n->running() || n->paused()) continue;
    const std::string who = "node " + std::to_string(n->port()) + ": ";
    try {
      raw_client c = n->client();
      c.set_timeout(poll_timeout);
      const std::string state = info_field(c({"CLUSTER", "INFO"}).str, "cluster_state");
      if (state != "ok") return who + "cluster_state:" + state;
      if (with_replicas) {
        const std::string replication = c({"INFO", "replication"}).str;
        const std::string link = info_field(replication, "master_link_status");
        if (info_field(replication, "role") == "slave" && link != "up") {
          return who + "replica with master_link_status:" + link;
        }
      }
      const raw_reply slots_reply = c({"CLUSTER", "SLOTS"});
      if (!opts_.announce_hostname.empty()) {
        if (const std::string e = endpoint_not_named(slots_reply, opts_.announce_hostname); !e.empty()) {
          return who + "CLUSTER SLOTS names a node " + e;
        }
      }
      const std::vector<slot_range> ranges = parse_slots(slots_reply);
      int covered = 0;
      const std::string sig = signature(ranges, with_replicas, covered);
      if (covered != slot_count) return who + "CLUSTER SLOTS covers " + std::to_string(covered) + " slots";
      if (first_port == 0) {
        first = sig;
        first_port = n->port();
        for (const slot_range& r : ranges) {
          listed.insert(r.master);
          listed.insert(r.replicas.begin(), r.replicas.end());
        }
      } else if (sig != first) {
        return who + "sees " + sig + " but node " + std::to_string(first_port) + " sees " + first;
      }
    } catch (const std::exception& e) {
      return who + e.what();
    }
  }
  if (first_port == 0) return "no live node";
  for (const auto& n : nodes_) {
    if (with_replicas && n->running() && !n->paused() && listed.count(n->port()) == 0) {
      return "node " + std::to_string(n->port()) + " is not in CLUSTER SLOTS " + first;
    }
  }
  agreed = true;
  return first;
}

std::string cluster_rig::not_ready() const {
  bool agreed = false;
  std::string text = views(true, agreed);
  return agreed ? std::string() : text;
}

void cluster_rig::warm_up() const {
  // One key per master, found with CLUSTER KEYSLOT (a few hundred candidates in one pipeline).
  raw_client c = any_live_client();
  const std::vector<slot_range> ranges = parse_slots(c({"CLUSTER", "SLOTS"}));
  std::vector<std::vector<std::string>> cmds;
  for (int i = 0; i < 256; ++i) cmds.push_back({"CLUSTER", "KEYSLOT", "cluster-rig-warm-up-" + std::to_string(i)});
  const std::vector<raw_reply> slots = c.pipeline(cmds);
  std::set<std::uint16_t> done;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    for (const slot_range& s : ranges) {
      if (done.count(s.master) != 0 || slots[i].integer < s.start || slots[i].integer > s.end) continue;
      done.insert(s.master);
      try {
        if (!live(s.master)) continue;
        raw_client m = client(s.master);
        m.set_timeout(poll_timeout);
        m({"SET", cmds[i][2], "1"});
      } catch (const std::exception&) {
      }
    }
  }
}

void cluster_rig::wait_ready(std::chrono::milliseconds timeout) {
  const clock::time_point deadline = clock::now() + timeout;
  clock::time_point next_warm_up = clock::now();
  for (std::string missing = not_ready(); !missing.empty(); missing = not_ready()) {
    if (clock::now() >= deadline) {
      throw std::runtime_error("cluster_rig: not ready after " + ms(timeout) + " ms: " + missing + log_tails());
    }
    if (missing.find("is not in CLUSTER SLOTS") != std::string::npos && clock::now() >= next_warm_up) {
      try {
        warm_up();
      } catch (const std::exception&) {
      }
      next_warm_up = clock::now() + 100ms;
    }
    std::this_thread::sleep_for(poll_interval);
  }
}

void cluster_rig::migrate_begin(int slot, std::uint16_t from, std::uint16_t to) {
  const std::string s = std::to_string(slot);
  expect_ok(client(to)({"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)}), "CLUSTER SETSLOT IMPORTING");
  expect_ok(client(from)({"CLUSTER", "SETSLOT", s, "MIGRATING", id(to)}), "CLUSTER SETSLOT MIGRATING");
}

void cluster_rig::migrate_keys(std::uint16_t from, std::uint16_t to, const std::vector<std::string>& keys) {
  if (keys.empty()) return;
  const bool over_tls = !opts_.tls.cert_file.empty() && opts_.tls.cluster;
  const std::uint16_t port = over_tls ? tls_port(to) : to;
  std::vector<std::string> cmd = {"MIGRATE", "127.0.0.1", std::to_string(port), "", "0", "5000", "KEYS"};
  cmd.insert(cmd.end(), keys.begin(), keys.end());
  raw_reply r = client(from).command(cmd);
  if (!r.is_ok() && !(r.is_status() && r.str == "NOKEY")) {
    throw std::runtime_error("cluster_rig: MIGRATE answered " + r.to_string());
  }
}

std::size_t cluster_rig::migrate_all_keys(int slot, std::uint16_t from, std::uint16_t to) {
  raw_client c = client(from);
  std::size_t moved = 0;
  for (;;) {
    raw_reply r = c({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
    if (!r.is_array()) throw std::runtime_error("cluster_rig: CLUSTER GETKEYSINSLOT answered " + r.to_string());
    if (r.elements.empty()) return moved;
    std::vector<std::string> keys;
    for (const raw_reply& k : r.elements) keys.push_back(k.str);
    migrate_keys(from, to, keys);
    moved += keys.size();
  }
}

void cluster_rig::migrate_end(int slot, std::uint16_t from, std::uint16_t to, std::chrono::milliseconds timeout) {
  const clock::time_point deadline = clock::now() + timeout;
  const std::string s = std::to_string(slot);
  std::vector<std::uint16_t> order = {to, from};
  for (std::uint16_t m : masters()) {
    if (m != to && m != from && live(m)) order.push_back(m);
  }
  for (std::uint16_t p : order) {
    expect_ok(client(p)({"CLUSTER", "SETSLOT", s, "NODE", id(to)}), "CLUSTER SETSLOT NODE on " + std::to_string(p));
  }
  for (;;) {
    std::string missing;
    for (const auto& n : nodes_) {
      if (!n->running() || n->paused()) continue;
      try {
        raw_client c = n->client();
        c.set_timeout(poll_timeout);
        std::uint16_t owner = 0;
        for (const slot_range& r : parse_slots(c({"CLUSTER", "SLOTS"}))) {
          if (r.start <= slot && slot <= r.end) owner = r.master;
        }
        if (owner != to) missing = "node " + std::to_string(n->port()) + " says " + std::to_string(owner);
      } catch (const std::exception& e) {
        missing = e.what();
      }
      if (!missing.empty()) break;
    }
    if (missing.empty()) return;
    if (clock::now() >= deadline) {
      throw std::runtime_error("cluster_rig: slot " + s + " not owned by " + std::to_string(to) +
                               " everywhere in time: " + missing + log_tails());
    }
    std::this_thread::sleep_for(poll_interval);
  }
}

void cluster_rig::migrate_slot(int slot, std::uint16_t from, std::uint16_t to) {
  migrate_begin(slot, from, to);
  migrate_all_keys(slot, from, to);
  migrate_end(slot, from, to);
}

std::string cluster_rig::log_tails() const {
  std::string out;
  for (const auto& n : nodes_) {
    out += "\n--- node " + std::to_string(n->port()) + " redis.log (tail) ---\n" + n->redis_log_tail(1500);
  }
  return out;
}

}  // namespace redlease::test
