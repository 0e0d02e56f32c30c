// SPDX-License-Identifier: MIT
#include "sentinel_rig.hpp"

#include <cstdlib>
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

// The value of `name` in a flat field/value array reply (SENTINEL REPLICAS entries), or "".
std::string field(const raw_reply& flat, std::string_view name) {
  for (std::size_t i = 0; i + 1 < flat.elements.size(); i += 2) {
    if (flat.elements[i].str == name) return flat.elements[i + 1].str;
  }
  return {};
}

std::uint16_t parse_port(const std::string& s) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v <= 0 || v > 65535) return 0;
  return static_cast<std::uint16_t>(v);
}

// A config-file argument in double quotes (redis' sdssplitargs syntax).
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()); }

std::string ports_text(const std::vector<std::uint16_t>& ports) {
  std::string out;
  for (std::uint16_t p : ports) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return "[" + out + "]";
}

}  // namespace

bool sentinel_rig::available() { return redis_server::available(); }

sentinel_rig::sentinel_rig(sentinel_rig_options opts) : opts_(std::move(opts)) {
  if (opts_.sentinels < 1) throw std::invalid_argument("sentinel_rig: at least one Sentinel");
  const clock::time_point deadline = clock::now() + opts_.start_timeout;

  // Data nodes. No delay before a diskless full sync (7.0 waits 5 s by default for more
  // replicas), so the first sync and the resync after a demotion are quick.
  server_options data_opts;
  data_opts.password = opts_.password;
  data_opts.unix_socket = false;
  data_opts.extra_args = {"--repl-diskless-sync-delay", "0"};
  if (!opts_.password.empty()) {
    data_opts.extra_args.insert(data_opts.extra_args.end(), {"--masterauth", opts_.password});
  }
  server_options replica_opts = data_opts;
  data_opts.extra_args.insert(data_opts.extra_args.end(), opts_.extra_args.begin(),
                              opts_.extra_args.end());
  data_.push_back(std::make_unique<redis_server>(data_opts));
  const std::uint16_t master_port = data_.front()->port();
  replica_opts.extra_args.insert(replica_opts.extra_args.end(),
                                 {"--replicaof", "127.0.0.1", std::to_string(master_port)});
  replica_opts.extra_args.insert(replica_opts.extra_args.end(), opts_.extra_args.begin(),
                                 opts_.extra_args.end());
  data_.push_back(std::make_unique<redis_server>(replica_opts));
  const std::uint16_t replica_port = data_.back()->port();

  auto link_up = [&]() -> std::string {
    try {
      raw_client c = client(replica_port);
      c.set_timeout(poll_timeout);
      const std::string status = info_field(c({"INFO", "replication"}).str, "master_link_status");
      if (status == "up") return {};
      return "replica " + std::to_string(replica_port) + " master_link_status:" + status;
    } catch (const std::exception& e) {
      return "replica " + std::to_string(replica_port) + ": " + e.what();
    }
  };
  auto fail = [&](const std::string& what) {
    throw std::runtime_error("sentinel_rig: not ready after " + ms(opts_.start_timeout) +
                             " ms: " + what + log_tails());
  };

  // The replica must be attached before the Sentinels start: a Sentinel learns the replicas from
  // the master's INFO, which it asks at once and then only every 10 s.
  for (std::string missing = link_up(); !missing.empty(); missing = link_up()) {
    if (clock::now() >= deadline) fail(missing);
    std::this_thread::sleep_for(poll_interval);
  }

  // Sentinels. Each one's config file lives in its own temporary directory (Sentinel rewrites it).
  server_options sentinel_opts;
  sentinel_opts.sentinel = true;
  sentinel_opts.unix_socket = false;
  sentinel_opts.password = opts_.sentinel_password;
  const std::string& name = opts_.master_name;
  sentinel_opts.config_lines = {
      "sentinel monitor " + name + " 127.0.0.1 " + std::to_string(master_port) + " " +
          std::to_string(opts_.quorum),
      "sentinel down-after-milliseconds " + name + " " + ms(opts_.down_after),
      "sentinel failover-timeout " + name + " " + ms(opts_.failover_timeout),
      "sentinel parallel-syncs " + name + " 1",
  };
  if (!opts_.password.empty()) {
    sentinel_opts.config_lines.push_back("sentinel auth-pass " + name + " " + quoted(opts_.password));
  }
  for (int i = 0; i < opts_.sentinels; ++i) {
    sentinels_.push_back(std::make_unique<redis_server>(sentinel_opts));
  }

  // What is still missing for the rig to be ready, or "".
  auto not_ready = [&]() -> std::string {
    for (std::size_t i = 0; i < sentinels_.size(); ++i) {
      const std::string who = "sentinel " + std::to_string(sentinels_[i]->port()) + ": ";
      try {
        raw_client c = sentinel_client(i);
        c.set_timeout(poll_timeout);
        raw_reply quorum = c({"SENTINEL", "CKQUORUM", name});
        if (quorum.str.rfind("OK", 0) != 0) return who + "CKQUORUM " + quorum.to_string();
        raw_reply others = c({"SENTINEL", "SENTINELS", name});
        if (others.elements.size() + 1 != sentinels_.size()) {
          return who + "knows " + std::to_string(others.elements.size()) + " other Sentinels";
        }
        raw_reply replicas = c({"SENTINEL", "REPLICAS", name});
        bool found = false;
        for (const raw_reply& r : replicas.elements) {
          found = found || (parse_port(field(r, "port")) == replica_port &&
                            field(r, "flags") == "slave");
        }
        if (!found) return who + "no usable replica in SENTINEL REPLICAS " + replicas.to_string();
      } catch (const std::exception& e) {
        return who + e.what();
      }
    }
    return link_up();
  };
  for (std::string missing = not_ready(); !missing.empty(); missing = not_ready()) {
    if (clock::now() >= deadline) fail(missing);
    std::this_thread::sleep_for(poll_interval);
  }
}

sentinel_rig::~sentinel_rig() {
  // redis_server's destructor never throws; the order is what matters: no Sentinel may see the
  // data nodes go away and start a failover.
  sentinels_.clear();
  data_.clear();
}

std::vector<std::uint16_t> sentinel_rig::sentinel_ports() const {
  std::vector<std::uint16_t> out;
  for (const auto& s : sentinels_) out.push_back(s->port());
  return out;
}

std::vector<std::uint16_t> sentinel_rig::data_ports() const {
  std::vector<std::uint16_t> out;
  for (const auto& s : data_) out.push_back(s->port());
  return out;
}

std::uint16_t sentinel_rig::master_port_from(std::size_t sentinel) const {
  try {
    raw_client c = sentinel_client(sentinel);
    c.set_timeout(poll_timeout);
    raw_reply r = c({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", opts_.master_name});
    if (r.is_array() && r.elements.size() == 2) return parse_port(r.elements[1].str);
  } catch (const std::exception&) {
  }
  return 0;
}

std::vector<std::uint16_t> sentinel_rig::master_ports_by_sentinel() const {
  std::vector<std::uint16_t> out;
  for (std::size_t i = 0; i < sentinels_.size(); ++i) out.push_back(master_port_from(i));
  return out;
}

std::uint16_t sentinel_rig::current_master_port() const {
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (std::uint16_t port = master_port_from(i); port != 0) return port;
  }
  throw std::runtime_error("sentinel_rig: no Sentinel reports an address for " + opts_.master_name);
}

redis_server& sentinel_rig::node(std::uint16_t port) {
  for (auto& s : data_) {
    if (s->port() == port) return *s;
  }
  throw std::out_of_range("sentinel_rig: no data node on port " + std::to_string(port));
}

redis_server& sentinel_rig::master() { return node(current_master_port()); }

redis_server& sentinel_rig::replica() {
  const std::uint16_t master_port = current_master_port();
  for (auto& s : data_) {
    if (s->port() != master_port) return *s;
  }
  throw std::runtime_error("sentinel_rig: the master " + std::to_string(master_port) +
                           " is not one of the data nodes");
}

redis_server& sentinel_rig::sentinel(std::size_t i) { return *sentinels_.at(i); }

const redis_server* sentinel_rig::find(std::uint16_t port, bool& is_sentinel) const {
  for (const auto& s : data_) {
    if (s->port() == port) {
      is_sentinel = false;
      return s.get();
    }
  }
  for (const auto& s : sentinels_) {
    if (s->port() == port) {
      is_sentinel = true;
      return s.get();
    }
  }
  return nullptr;
}

raw_client sentinel_rig::client(std::uint16_t port) const {
  bool is_sentinel = false;
  const redis_server* s = find(port, is_sentinel);
  if (s == nullptr) {
    throw std::out_of_range("sentinel_rig: no server on port " + std::to_string(port));
  }
  return s->client();
}

raw_client sentinel_rig::sentinel_client(std::size_t i) const { return sentinels_.at(i)->client(); }

raw_client sentinel_rig::master_client() const { return client(current_master_port()); }

raw_client sentinel_rig::replica_client() const {
  const std::uint16_t master_port = current_master_port();
  for (const auto& s : data_) {
    if (s->port() != master_port) return s->client();
  }
  throw std::runtime_error("sentinel_rig: the master " + std::to_string(master_port) +
                           " is not one of the data nodes");
}

std::uint16_t sentinel_rig::failover(std::chrono::milliseconds timeout) {
  const clock::time_point deadline = clock::now() + timeout;
  const std::uint16_t old_port = current_master_port();
  raw_client c = sentinel_client(0);
  for (;;) {
    raw_reply r = c({"SENTINEL", "FAILOVER", opts_.master_name});
    if (r.is_ok()) break;
    if (clock::now() >= deadline) {
      throw std::runtime_error("sentinel_rig: SENTINEL FAILOVER answered " + r.to_string() +
                               log_tails());
    }
    std::this_thread::sleep_for(50ms);
  }
  return wait_for_switch(old_port, deadline);
}

std::uint16_t sentinel_rig::wait_for_switch(std::uint16_t old_port,
                                            clock::time_point deadline) const {
  for (;;) {
    const std::vector<std::uint16_t> ports = master_ports_by_sentinel();
    bool agreed = !ports.empty() && ports.front() != 0 && ports.front() != old_port;
    for (std::uint16_t p : ports) agreed = agreed && p == ports.front();
    if (agreed) return ports.front();
    if (clock::now() >= deadline) {
      throw std::runtime_error("sentinel_rig: the Sentinels did not all switch away from " +
                               std::to_string(old_port) + " in time; they report " +
                               ports_text(ports) + log_tails());
    }
    std::this_thread::sleep_for(poll_interval);
  }
}

std::uint16_t sentinel_rig::pause_master() {
  const std::uint16_t port = current_master_port();
  node(port).pause();
  return port;
}

void sentinel_rig::resume(std::uint16_t port) { node(port).resume(); }

long long sentinel_rig::wait_replicated(std::chrono::milliseconds timeout) const {
  raw_client c = master_client();
  c.set_timeout(timeout + 5s);
  raw_reply r = c({"WAIT", "1", ms(timeout)});
  if (!r.is_integer() || r.integer < 1) {
    throw std::runtime_error("sentinel_rig: WAIT 1 " + ms(timeout) + " on the master answered " +
                             r.to_string());
  }
  return r.integer;
}

bool sentinel_rig::drop_key_on_replica(std::string_view key) {
  raw_client c = replica_client();
  auto config_set = [&c](const char* value) {
    raw_reply r = c({"CONFIG", "SET", "replica-read-only", value});
    if (!r.is_ok()) {
      throw std::runtime_error(std::string("sentinel_rig: CONFIG SET replica-read-only ") + value +
                               " answered " + r.to_string());
    }
  };
  config_set("no");
  raw_reply r = c({"DEL", key});
  config_set("yes");
  if (!r.is_integer()) {
    throw std::runtime_error("sentinel_rig: DEL on the replica answered " + r.to_string());
  }
  return r.integer > 0;
}

std::string sentinel_rig::log_tails() const {
  std::string out;
  auto add = [&out](const char* what, const redis_server& s) {
    const std::string tail = s.redis_log_tail(1500);
    out += "\n--- " + std::string(what) + " " + std::to_string(s.port()) + " redis.log (tail) ---\n" +
           tail;
  };
  for (const auto& s : sentinels_) add("sentinel", *s);
  for (const auto& s : data_) add("data node", *s);
  return out;
}

}  // namespace redlease::test
