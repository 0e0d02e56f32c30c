// SPDX-License-Identifier: MIT
// One pass over the locks in Redis (lock_scan.hpp). Per master: SCAN a batch of names, then TYPE and
// PTTL of each, then what its type needs (the hash's first fields, a fair lock's queue, a string's
// value, a permit semaphore's zset), each round pipelined on the node's connection; last, the
// servers' pub/sub counts of the lock channels, asked once per node for the channels that have
// subscribers at all (PUBSUB CHANNELS), not once per lock.
#include "lock_scan.hpp"

#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "cluster_nodes.hpp"
#include "commands.hpp"

namespace redlease::cli {
namespace {

using command_args = std::vector<std::string>;

// Sends every command at once on `c` (its connection pipelines them) and waits for all the
// replies. A reply that is an error stays in its slot (a key that changed type, a slot that moved:
// that lock is skipped); a failure without a reply (the connection) is thrown.
std::vector<reply> pipeline(client& c, std::vector<command_args> cmds) {
  struct state {
    std::mutex m;
    std::condition_variable cv;
    std::size_t left;
    std::error_code failure;
    std::vector<reply> out;
  };
  auto s = std::make_shared<state>();
  s->left = cmds.size();
  s->out.resize(cmds.size());
  if (cmds.empty()) return {};
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    c.async_command(std::move(cmds[i]), [s, i](std::error_code ec, reply r) {
      std::lock_guard g(s->m);
      if (ec && !r.is_error() && !s->failure) s->failure = ec;
      s->out[i] = std::move(r);
      if (--s->left == 0) s->cv.notify_one();
    });
  }
  std::unique_lock g(s->m);
  s->cv.wait(g, [&] { return s->left == 0; });
  if (s->failure) throw error(s->failure, "scan");
  return std::move(s->out);
}

std::optional<long long> whole_number(std::string_view v) {
  long long n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc{} || p != v.data() + v.size()) return std::nullopt;
  return n;
}

// A glob of '*' only (the patterns come from describe(), not from the user).
bool star_match(std::string_view pat, std::string_view s) {
  std::size_t p = 0, i = 0, star = std::string_view::npos, mark = 0;
  while (i < s.size()) {
    if (p < pat.size() && pat[p] != '*' && pat[p] == s[i]) {
      ++p, ++i;
    } else if (p < pat.size() && pat[p] == '*') {
      star = p++, mark = i;
    } else if (star != std::string_view::npos) {
      p = star + 1, i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

// The keys a lock keeps beside its name (a fair lock's queue, token keys, release latches, a permit
// semaphore's zset, a reader's timeouts), as globs, from the library's description of every kind:
// a key SCAN returns that matches one is folded into its lock, not shown as a lock of its own. A
// name with a hash tag of its own gets no braces added (`prefix:NAME`), hence the prefix-only globs;
// a suffix alone (`NAME:timeout`) is too common to take a key for an auxiliary one, so only the
// braced form counts.
std::vector<std::string> auxiliary_globs() {
  std::vector<std::string> out;
  const std::string mark = "\x01";
  auto add = [&](std::string derived, const std::string& name) {
    if (derived.empty()) return;
    auto at = derived.find(name);
    if (at == std::string::npos) return;
    derived = derived.substr(0, at) + "*" + derived.substr(at + name.size());
    if (derived == "*") return;
    if (name != mark && derived.front() == '*') return;  // NAME:suffix: too common
    for (auto& g : out)
      if (g == derived) return;
    out.push_back(std::move(derived));
  };
  for (auto k : {lock_kind::reentrant, lock_kind::mutex, lock_kind::fair, lock_kind::read, lock_kind::write,
                 lock_kind::semaphore, lock_kind::latch, lock_kind::permit_semaphore}) {
    for (const std::string& name : {mark, "{" + mark + "}"}) {
      auto l = describe(k, name);
      for (std::size_t i = 1; i < l.keys.size(); ++i) add(l.keys[i].key, name);
      add(l.latch_key_pattern, name);
      add(l.read_timeout_key_pattern, name);
    }
  }
  return out;
}

// The patterns (for PUBSUB CHANNELS) of the channels each kind's waiters listen on: those of a name
// with a hash tag of its own, which also match the braced ones (`redisson_lock__channel:*`).
std::vector<std::string> channel_patterns() {
  std::vector<std::string> out;
  const std::string name = "{\x01}";
  for (auto k : {lock_kind::reentrant, lock_kind::mutex, lock_kind::read, lock_kind::semaphore, lock_kind::latch}) {
    const std::string ch = describe(k, name).channel();
    const auto at = ch.find(name);
    out.push_back(ch.substr(0, at) + "*" + ch.substr(at + name.size()));
  }
  return out;
}

struct node_ref {
  client* c;
  std::string name;  // host:port on a cluster, else empty
};

}  // namespace

struct lock_scanner::impl {
  config cfg;
  std::unique_ptr<client> routed;
  std::optional<cluster_layout> layout;
  std::vector<std::unique_ptr<client>> masters, replicas;
  std::vector<std::string> aux = auxiliary_globs();
  std::vector<std::string> channel_globs = channel_patterns();

  explicit impl(const config& c) : cfg(c), routed(std::make_unique<client>(c)) {
    routed->ping();
    layout = read_cluster(*routed);
    if (layout) {
      for (const auto& m : layout->masters) {
        masters.push_back(node_client(cfg, m.address));
        for (const auto& r : m.replicas) replicas.push_back(node_client(cfg, r));
      }
    }
  }

  std::vector<node_ref> nodes() {
    std::vector<node_ref> out;
    if (!layout) {
      out.push_back({routed.get(), {}});
      return out;
    }
    for (std::size_t i = 0; i < masters.size(); ++i) out.push_back({masters[i].get(), layout->masters[i].address.name()});
    return out;
  }

  bool auxiliary(std::string_view key) const {
    for (const auto& g : aux)
      if (star_match(g, key)) return true;
    return false;
  }

  void scan_batch(const node_ref& n, std::vector<std::string> keys, const scan_options& o, scan_cost& cost,
                  std::vector<found_lock>& out);
  std::unordered_map<std::string, long long> subscribers(scan_cost& cost);
};

void lock_scanner::impl::scan_batch(const node_ref& n, std::vector<std::string> keys, const scan_options& o,
                                    scan_cost& cost, std::vector<found_lock>& out) {
  std::erase_if(keys, [&](const std::string& k) { return auxiliary(k); });
  if (keys.empty()) return;
  std::vector<command_args> first;
  first.reserve(keys.size() * 2);
  for (const auto& k : keys) {
    first.push_back({"TYPE", k});
    first.push_back({"PTTL", k});
  }
  cost.commands += first.size();
  auto r1 = pipeline(*n.c, std::move(first));

  // Second round: what each type needs. A hash: its first fields (all of a small one) and the
  // fair lock's queue beside it; a string: its value and the permit semaphore's zset.
  struct pending {
    std::size_t key;
    std::string type;
    std::size_t at;  // first reply of its second round
  };
  std::vector<pending> todo;
  std::vector<command_args> second;
  const std::string cap = std::to_string(std::max<std::size_t>(o.list_cap, 10));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& type = r1[2 * i].str;
    if (type != "hash" && type != "string") continue;
    todo.push_back({i, type, second.size()});
    if (type == "hash") {
      second.push_back({"HSCAN", keys[i], "0", "COUNT", cap});
      second.push_back({"LRANGE", describe(lock_kind::fair, keys[i]).queue_key, "0", std::to_string(o.list_cap)});
    } else {
      second.push_back({"GET", keys[i]});
      second.push_back({"ZCARD", describe(lock_kind::permit_semaphore, keys[i]).keys.at(1).key});
    }
  }
  cost.commands += second.size();
  auto r2 = pipeline(*n.c, std::move(second));

  // Third round, for the few that need it: a hash too big for one HSCAN step (readers that crashed,
  // a field count), a queue longer than what LRANGE returned.
  struct big {
    std::size_t lock;  // index in out
    bool hash, queue;
    std::size_t at;
  };
  std::vector<big> more;
  std::vector<command_args> third;
  for (const auto& t : todo) {
    const auto& name = keys[t.key];
    found_lock l;
    l.name = name;
    l.node = n.name;
    l.ttl_ms = r1[2 * t.key + 1].is_integer() ? r1[2 * t.key + 1].integer : -2;
    const auto& a = r2[t.at];
    const auto& b = r2[t.at + 1];
    if (t.type == "hash") {
      if (!a.is_array() || a.elements.size() != 2 || !a.elements[1].is_array()) continue;
      const auto& kv = a.elements[1].elements;
      bool lock_like = true;
      for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
        const auto& f = kv[i].str;
        const auto& v = kv[i + 1].str;
        if (!is_lock_hash_entry(f, v)) {
          lock_like = false;
          break;
        }
        if (f == "mode") {
          l.mode = v;
          continue;
        }
        ++l.holder_count;
        l.hold_count += whole_number(v).value_or(0);
        if (l.holders.size() < o.list_cap) l.holders.push_back(f);
      }
      if (!lock_like) continue;  // an application's hash
      const bool complete = a.elements[0].str == "0";
      if (b.is_array()) {
        for (const auto& e : b.elements)
          if (l.queue.size() < o.list_cap) l.queue.push_back(e.str);
        l.queue_length = static_cast<long long>(b.elements.size());
      }
      l.kind = !l.mode.empty() ? "read-write" : l.queue_length > 0 ? "fair" : "reentrant";
      const bool long_queue = l.queue_length > static_cast<long long>(o.list_cap);
      if (!complete || long_queue) {
        more.push_back({out.size(), !complete, long_queue, third.size()});
        if (!complete) {
          third.push_back({"HLEN", name});
          third.push_back({"HGET", name, "mode"});
        }
        if (long_queue) third.push_back({"LLEN", describe(lock_kind::fair, name).queue_key});
      }
      if (l.queue.size() > o.list_cap) l.queue.resize(o.list_cap);
    } else {
      if (!a.is_string()) continue;
      if (auto count = whole_number(a.str)) {
        l.permits = *count;
        if (b.is_integer() && b.integer > 0) {
          l.kind = "permit-semaphore";
          l.permits_out = b.integer;
        } else {
          l.kind = "semaphore or latch";  // the waiters tell, below
        }
      } else {
        // A value that is no count is a mutex's token when it expires (every lock has a TTL); a
        // string without one is an application's, not shown.
        if (l.ttl_ms == -1) continue;
        l.kind = "mutex";
        l.holders.push_back(a.str);
        l.holder_count = l.hold_count = 1;
      }
    }
    out.push_back(std::move(l));
  }
  if (third.empty()) return;
  cost.commands += third.size();
  auto r3 = pipeline(*n.c, std::move(third));
  for (const auto& m : more) {
    auto& l = out[m.lock];
    std::size_t at = m.at;
    if (m.hash) {
      const auto& mode = r3[at + 1];
      if (mode.is_string()) l.mode = mode.str, l.kind = "read-write";
      if (r3[at].is_integer()) l.holder_count = r3[at].integer - (l.mode.empty() ? 0 : 1);
      at += 2;
    }
    if (m.queue && r3[at].is_integer()) l.queue_length = r3[at].integer;
  }
}

// Subscribers per channel, over every node: a classic subscription counts on the node it was made
// on (any node of a cluster, replicas too), a sharded one (SSUBSCRIBE) on its slot's master.
std::unordered_map<std::string, long long> lock_scanner::impl::subscribers(scan_cost& cost) {
  std::unordered_map<std::string, long long> out;
  auto ask = [&](client& c, bool sharded) {
    std::vector<command_args> lists;
    for (const auto& p : channel_globs) lists.push_back({"PUBSUB", sharded ? "SHARDCHANNELS" : "CHANNELS", p});
    cost.commands += lists.size();
    std::vector<reply> r;
    try {
      r = pipeline(c, std::move(lists));
    } catch (const error&) {
      if (sharded) return;  // Redis 6: no sharded pub/sub
      throw;
    }
    command_args numsub{"PUBSUB", sharded ? "SHARDNUMSUB" : "NUMSUB"};
    std::set<std::string_view> seen;  // a channel two patterns match is counted once
    for (const auto& l : r)
      for (const auto& ch : l.elements)
        if (seen.insert(ch.str).second) numsub.push_back(ch.str);
    if (numsub.size() == 2) return;
    ++cost.commands;
    auto counts = pipeline(c, {numsub});
    const auto& e = counts.front().elements;
    for (std::size_t i = 0; i + 1 < e.size(); i += 2) out[e[i].str] += e[i + 1].integer;
  };
  if (!layout) {
    ask(*routed, false);
    return out;
  }
  for (auto& m : masters) {
    ask(*m, false);
    ask(*m, true);
  }
  for (auto& r : replicas) {
    try {
      ask(*r, false);
    } catch (const error&) {
      // A replica that is down has no waiter that could be woken.
    }
  }
  return out;
}

lock_scanner::lock_scanner(const config& cfg) : p_(std::make_unique<impl>(cfg)) {}
lock_scanner::~lock_scanner() = default;

bool lock_scanner::cluster() const noexcept { return p_->layout.has_value(); }
client& lock_scanner::routed() { return *p_->routed; }

std::vector<found_lock> lock_scanner::scan(const scan_options& o, scan_cost* cost) {
  const auto start = std::chrono::steady_clock::now();
  scan_cost c;
  std::vector<found_lock> out;
  const std::string count = std::to_string(o.count == 0 ? 1000 : o.count);
  for (const auto& n : p_->nodes()) {
    ++c.masters;
    std::string cursor = "0";
    do {
      ++c.commands;
      auto r = pipeline(*n.c, {{"SCAN", cursor, "MATCH", o.match, "COUNT", count}});
      const auto& step = r.front();
      if (step.is_error()) throw error(errc::server_error, "SCAN: " + step.str);
      if (!step.is_array() || step.elements.size() != 2) break;
      cursor = step.elements[0].str;
      std::vector<std::string> keys;
      keys.reserve(step.elements[1].elements.size());
      for (auto& k : step.elements[1].elements) keys.push_back(std::move(k.str));
      c.keys += keys.size();
      p_->scan_batch(n, std::move(keys), o, c, out);
    } while (cursor != "0");
  }
  auto subs = p_->subscribers(c);
  auto count_of = [&](lock_kind k, const std::string& name) {
    auto it = subs.find(describe(k, name).channel());
    return it == subs.end() ? 0LL : it->second;
  };
  for (auto& l : out) {
    if (l.kind == "reentrant" || l.kind == "fair") l.waiters = count_of(lock_kind::reentrant, l.name) + l.queue_length;
    else if (l.kind == "read-write") l.waiters = count_of(lock_kind::read, l.name);
    else if (l.kind == "mutex") l.waiters = count_of(lock_kind::mutex, l.name);
    else if (l.kind == "permit-semaphore") l.waiters = count_of(lock_kind::permit_semaphore, l.name);
    else {
      const auto sem = count_of(lock_kind::semaphore, l.name), latch = count_of(lock_kind::latch, l.name);
      if (sem > 0 && latch == 0) l.kind = "semaphore";
      else if (latch > 0 && sem == 0) l.kind = "latch";
      l.waiters = sem + latch;
    }
  }
  c.took = std::chrono::steady_clock::now() - start;
  if (cost != nullptr) *cost = c;
  return out;
}

bool lock_scanner::force_unlock(const found_lock& l) {
  client& c = p_->routed ? *p_->routed : *p_->masters.front();
  if (l.kind == "read-write") return c.write_lock(l.name).force_unlock();
  if (l.kind == "fair") return c.fair_lock(l.name).force_unlock();
  if (l.kind == "reentrant") return c.lock(l.name).force_unlock();
  if (l.kind == "mutex") return c.mutex(l.name).force_unlock();
  if (l.kind == "latch") return c.count_down_latch(l.name).delete_latch();
  // A semaphore's permits: deleting the key is what Redisson's delete() does (no waiter is woken:
  // they wait for permits that someone sets again).
  std::vector<std::string> del{"DEL", l.name};
  if (l.kind == "permit-semaphore") del.push_back(describe(lock_kind::permit_semaphore, l.name).keys.at(1).key);
  return lock_command(c, l.name, del).integer > 0;
}

}  // namespace redlease::cli
