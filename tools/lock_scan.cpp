// SPDX-License-Identifier: MIT
// One pass over the locks in Redis (lock_scan.hpp). Per master: SCAN a batch of names, then PTTL and
// HSCAN of each (GET of the strings), pipelined on the node's connection: two commands a lock, since
// Redis' own time per command is what a pass costs the server. The fair locks' queues and the permit
// semaphores' zsets are found by the SCAN itself (with a pattern, by one more SCAN of each, filtered
// by type), so only their locks are asked about them. Last, the waiters: the servers' pub/sub counts
// of the lock channels, asked once per node for the channels that have subscribers at all (PUBSUB
// CHANNELS), not once per lock.
#include "lock_scan.hpp"

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "cluster_nodes.hpp"
#include "commands.hpp"
#include "info_parser.hpp"

namespace redlease::cli {
namespace {

using command_args = std::vector<std::string>;

// Sends every command at once on `c` (its connection pipelines them) and waits for all the
// replies. A reply about one key stays in its slot, the pass going on without that key: an error of
// the key's type (WRONGTYPE), of its slot (MOVED while a slot moves), a busy server (TRYAGAIN).
// Anything else (the connection, a timeout, an ACL refusal, a renamed command) fails the pass:
// thrown, with the server's words when it said some.
bool about_one_key(const std::error_code& ec) {
  return ec == errc::wrong_type || ec == errc::server_error || ec == errc::server_busy;
}

std::vector<reply> pipeline(client& c, std::vector<command_args> cmds) {
  struct state {
    std::mutex m;
    std::condition_variable cv;
    std::size_t left;
    std::error_code failure;
    std::string words;
    std::vector<reply> out;
  };
  auto s = std::make_shared<state>();
  s->left = cmds.size();
  s->out.resize(cmds.size());
  if (cmds.empty()) return {};
  const std::string first = cmds.front().front();
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    c.async_command(std::move(cmds[i]), [s, i](std::error_code ec, reply r) {
      std::lock_guard g(s->m);
      if (ec && !about_one_key(ec) && !s->failure) {
        s->failure = ec;
        if (r.is_error()) s->words = r.str;
      }
      s->out[i] = std::move(r);
      if (--s->left == 0) s->cv.notify_one();
    });
  }
  std::unique_lock g(s->m);
  s->cv.wait(g, [&] { return s->left == 0; });
  if (s->failure) throw error(s->failure, s->words.empty() ? first : first + ": " + s->words);
  return std::move(s->out);
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

// A name derived from a lock's name by the library's own rule, learnt once from describe(): `derive`
// on a name of each form (without and with a hash tag of its own) with a marker for the name, so
// that deriving it for each of 100,000 locks is a concatenation, not a description.
struct name_rule {
  std::string plain_before, plain_after, tagged_before, tagged_after;
  template <class Derive>
  explicit name_rule(Derive derive) {
    const std::string plain = "\x01", tagged = "{\x01}";
    const std::string a = derive(plain), b = derive(tagged);
    const auto i = a.find(plain), j = b.find(tagged);
    plain_before = a.substr(0, i);
    plain_after = a.substr(i + plain.size());
    tagged_before = b.substr(0, j);
    tagged_after = b.substr(j + tagged.size());
  }
  std::string operator()(std::string_view name) const {
    const bool tagged = name.find('{') != std::string_view::npos;
    std::string out = tagged ? tagged_before : plain_before;
    out += name;
    out += tagged ? tagged_after : plain_after;
    return out;
  }
  // The lock names `key` can be derived from (a name with a tag of its own gives the same key as
  // the name inside it: Redisson's rule; both are candidates).
  std::vector<std::string> names_of(std::string_view key) const {
    std::vector<std::string> out;
    auto strip = [&](const std::string& before, const std::string& after) {
      if (key.size() >= before.size() + after.size() && key.substr(0, before.size()) == before &&
          key.substr(key.size() - after.size()) == after)
        out.emplace_back(key.substr(before.size(), key.size() - before.size() - after.size()));
    };
    strip(plain_before, plain_after);
    strip(tagged_before, tagged_after);
    return out;
  }
  // The SCAN pattern of every key of this rule.
  std::string glob() const { return tagged_before + "*" + tagged_after; }
};

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

struct node_ref {
  client* c;
  std::string name;  // host:port on a cluster, else empty
};

// What one node's pass collects before the locks are complete: the queues and permit zsets seen
// (their locks' names), and where each lock of the node is in the output.
struct node_pass {
  std::unordered_set<std::string> queues, zsets;
  std::size_t first = 0;  // the node's first lock in the output
};

}  // namespace

struct lock_scanner::impl {
  config cfg;
  std::unique_ptr<client> routed;
  std::optional<cluster_layout> layout;
  std::vector<std::unique_ptr<client>> masters, replicas;
  std::vector<std::string> aux = auxiliary_globs();
  name_rule queue_rule{[](const std::string& n) { return describe(lock_kind::fair, n).queue_key; }};
  name_rule zset_rule{[](const std::string& n) { return describe(lock_kind::permit_semaphore, n).keys.at(1).key; }};
  // The channels waiters listen on, per kind (the semaphore's serves the permit semaphore too).
  name_rule lock_channel{[](const std::string& n) { return describe(lock_kind::reentrant, n).channel(); }};
  name_rule rw_channel{[](const std::string& n) { return describe(lock_kind::read, n).channel(); }};
  name_rule mutex_channel{[](const std::string& n) { return describe(lock_kind::mutex, n).channel(); }};
  name_rule semaphore_channel{[](const std::string& n) { return describe(lock_kind::semaphore, n).channel(); }};
  name_rule latch_channel{[](const std::string& n) { return describe(lock_kind::latch, n).channel(); }};

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

  // Every key of `n` matching `match` (of `type` when not empty), a SCAN step at a time.
  template <class Step>
  void scan_keys(const node_ref& n, const std::string& match, const std::string& type, const scan_options& o,
                 scan_cost& cost, Step step) {
    const std::string count = std::to_string(o.count == 0 ? 1000 : o.count);
    std::string cursor = "0";
    do {
      ++cost.commands;
      command_args cmd{"SCAN", cursor, "MATCH", match, "COUNT", count};
      if (!type.empty()) cmd.insert(cmd.end(), {"TYPE", type});
      std::error_code ec;
      auto reply = n.c->command(cmd, ec);
      if (ec) throw error(ec, reply.is_error() ? "SCAN: " + reply.str : std::string("SCAN"));
      if (!reply.is_array() || reply.elements.size() != 2) break;
      cursor = reply.elements[0].str;
      std::vector<std::string> keys;
      keys.reserve(reply.elements[1].elements.size());
      for (auto& k : reply.elements[1].elements) keys.push_back(std::move(k.str));
      step(std::move(keys));
    } while (cursor != "0");
  }

  void scan_node(const node_ref& n, const scan_options& o, scan_cost& cost, std::vector<found_lock>& out);
  void scan_batch(const node_ref& n, std::vector<std::string> keys, const scan_options& o, scan_cost& cost,
                  node_pass& pass, std::vector<found_lock>& out);
  void complete(const node_ref& n, const scan_options& o, scan_cost& cost, node_pass& pass,
                std::vector<found_lock>& out);
  std::unordered_map<std::string, long long> subscribers(scan_cost& cost);
};

void lock_scanner::impl::scan_node(const node_ref& n, const scan_options& o, scan_cost& cost,
                                   std::vector<found_lock>& out) {
  node_pass pass;
  pass.first = out.size();
  scan_keys(n, o.match, {}, o, cost, [&](std::vector<std::string> keys) {
    cost.keys += keys.size();
    scan_batch(n, std::move(keys), o, cost, pass, out);
  });
  // The queues and zsets of locks whose names the pattern matches do not match it themselves
  // (`redisson_lock_queue:{NAME}`): unless it matched everything, one more SCAN of each, filtered
  // by type on the server.
  if (o.match != "*") {
    for (auto* rule : {&queue_rule, &zset_rule}) {
      auto& into = rule == &queue_rule ? pass.queues : pass.zsets;
      scan_keys(n, rule->glob(), rule == &queue_rule ? "list" : "zset", o, cost, [&](std::vector<std::string> keys) {
        cost.keys += keys.size();
        for (const auto& k : keys)
          for (auto& name : rule->names_of(k)) into.insert(std::move(name));
      });
    }
  }
  complete(n, o, cost, pass, out);
}

// A batch of names: PTTL and HSCAN of each (a lock is most often a hash; HSCAN gives all the fields
// of a small one, a hash of crashed readers is counted later), GET of those that are strings.
void lock_scanner::impl::scan_batch(const node_ref& n, std::vector<std::string> keys, const scan_options& o,
                                    scan_cost& cost, node_pass& pass, std::vector<found_lock>& out) {
  std::erase_if(keys, [&](const std::string& k) {
    if (!auxiliary(k)) return false;
    for (auto& name : queue_rule.names_of(k)) pass.queues.insert(std::move(name));
    for (auto& name : zset_rule.names_of(k)) pass.zsets.insert(std::move(name));
    return true;
  });
  if (keys.empty()) return;
  const std::string cap = std::to_string(std::max<std::size_t>(o.list_cap, 10));
  std::vector<command_args> first;
  first.reserve(keys.size() * 2);
  for (const auto& k : keys) {
    first.push_back({"PTTL", k});
    first.push_back({"HSCAN", k, "0", "COUNT", cap});
  }
  cost.commands += first.size();
  auto r1 = pipeline(*n.c, std::move(first));
  std::vector<std::size_t> strings;
  std::vector<command_args> second;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& ttl = r1[2 * i];
    const auto& a = r1[2 * i + 1];
    if (!ttl.is_integer() || ttl.integer == -2) continue;  // gone meanwhile
    if (a.is_error()) {
      if (a.str.rfind("WRONGTYPE", 0) == 0) {
        strings.push_back(i);
        second.push_back({"GET", keys[i]});
      }
      continue;
    }
    if (!a.is_array() || a.elements.size() != 2 || !a.elements[1].is_array()) continue;
    found_lock l;
    l.ttl_ms = ttl.integer;
    const auto& kv = a.elements[1].elements;
    bool lock_like = !kv.empty();
    for (std::size_t f = 0; f + 1 < kv.size(); f += 2) {
      const auto& field = kv[f].str;
      const auto& value = kv[f + 1].str;
      if (!is_lock_hash_entry(field, value)) {
        lock_like = false;  // an application's hash
        break;
      }
      if (field == "mode") {
        l.mode = value;
        continue;
      }
      ++l.holder_count;
      l.hold_count += parse_integer(value).value_or(0);
      if (l.holders.size() < o.list_cap) l.holders.push_back(field);
    }
    if (!lock_like) continue;
    // A cursor that is not 0: more fields than one step returned (readers that crashed); counted
    // in complete().
    if (a.elements[0].str != "0") l.holder_count = -1;
    l.name = keys[i];
    l.node = n.name;
    l.kind = l.mode.empty() ? "reentrant" : "read-write";
    out.push_back(std::move(l));
  }
  if (second.empty()) return;
  cost.commands += second.size();
  auto r2 = pipeline(*n.c, std::move(second));
  for (std::size_t j = 0; j < strings.size(); ++j) {
    const auto& v = r2[j];
    if (!v.is_string()) continue;  // another type (a list, a set...), or gone
    found_lock l;
    l.name = keys[strings[j]];
    l.node = n.name;
    l.ttl_ms = r1[2 * strings[j]].integer;
    if (auto count = parse_integer(v.str)) {
      l.permits = *count;
      l.kind = "semaphore or latch";  // a permit semaphore's zset, or the waiters, tell
    } else {
      // A value that is no count is a mutex's token when it expires (every lock has a TTL); a
      // string without one is an application's, not shown.
      if (l.ttl_ms == -1) continue;
      l.kind = "mutex";
      l.holders.push_back(v.str);
      l.holder_count = l.hold_count = 1;
    }
    out.push_back(std::move(l));
  }
}

// What the node's locks need once its SCAN is done: a fair lock's queue, a permit semaphore's
// permits out, the fields of a hash too big for one HSCAN step.
void lock_scanner::impl::complete(const node_ref& n, const scan_options& o, scan_cost& cost, node_pass& pass,
                                  std::vector<found_lock>& out) {
  struct todo {
    std::size_t lock;
    int what;  // 0 queue (LRANGE, LLEN), 1 zset (ZCARD), 2 big hash (HLEN, HGET mode)
    std::size_t at;
  };
  std::vector<todo> work;
  std::vector<command_args> cmds;
  for (std::size_t i = pass.first; i < out.size(); ++i) {
    auto& l = out[i];
    if (l.kind == "reentrant" && pass.queues.count(l.name)) {
      work.push_back({i, 0, cmds.size()});
      const auto q = queue_rule(l.name);
      cmds.push_back({"LRANGE", q, "0", std::to_string(o.list_cap == 0 ? 0 : o.list_cap - 1)});
      cmds.push_back({"LLEN", q});
    } else if (l.kind == "semaphore or latch" && pass.zsets.count(l.name)) {
      work.push_back({i, 1, cmds.size()});
      cmds.push_back({"ZCARD", zset_rule(l.name)});
    }
    if (l.holder_count < 0) {
      work.push_back({i, 2, cmds.size()});
      cmds.push_back({"HLEN", l.name});
      cmds.push_back({"HGET", l.name, "mode"});
    }
  }
  if (cmds.empty()) return;
  cost.commands += cmds.size();
  auto r = pipeline(*n.c, std::move(cmds));
  for (const auto& w : work) {
    auto& l = out[w.lock];
    if (w.what == 0) {
      if (o.list_cap > 0 && r[w.at].is_array())
        for (const auto& e : r[w.at].elements) l.queue.push_back(e.str);
      l.queue_length = r[w.at + 1].is_integer() ? r[w.at + 1].integer : 0;
      if (l.queue_length > 0) l.kind = "fair";
    } else if (w.what == 1) {
      if (r[w.at].is_integer() && r[w.at].integer > 0) {
        l.kind = "permit-semaphore";
        l.permits_out = r[w.at].integer;
      }
    } else {
      if (r[w.at + 1].is_string()) {
        l.mode = r[w.at + 1].str;
        l.kind = "read-write";
      }
      l.holder_count = r[w.at].is_integer() ? r[w.at].integer - (l.mode.empty() ? 0 : 1) : 0;
    }
  }
}

// Subscribers per channel, over every node: a classic subscription counts on the node it was made
// on (any node of a cluster, replicas too), a sharded one (SSUBSCRIBE) on its slot's master.
std::unordered_map<std::string, long long> lock_scanner::impl::subscribers(scan_cost& cost) {
  std::unordered_map<std::string, long long> out;
  const std::vector<std::string> globs{lock_channel.glob(), rw_channel.glob(), mutex_channel.glob(),
                                       semaphore_channel.glob(), latch_channel.glob()};
  auto ask = [&](client& c, bool sharded) {
    std::vector<command_args> lists;
    for (const auto& p : globs) lists.push_back({"PUBSUB", sharded ? "SHARDCHANNELS" : "CHANNELS", p});
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
  for (const auto& n : p_->nodes()) {
    ++c.masters;
    p_->scan_node(n, o, c, out);
  }
  if (!out.empty()) {
    auto subs = p_->subscribers(c);
    auto count_of = [&](const name_rule& channel, const std::string& name) {
      if (subs.empty()) return 0LL;
      auto it = subs.find(channel(name));
      return it == subs.end() ? 0LL : it->second;
    };
    for (auto& l : out) {
      if (l.kind == "reentrant" || l.kind == "fair") l.waiters = count_of(p_->lock_channel, l.name) + l.queue_length;
      else if (l.kind == "read-write") l.waiters = count_of(p_->rw_channel, l.name);
      else if (l.kind == "mutex") l.waiters = count_of(p_->mutex_channel, l.name);
      else if (l.kind == "permit-semaphore") l.waiters = count_of(p_->semaphore_channel, l.name);
      else {
        const auto sem = count_of(p_->semaphore_channel, l.name), latch = count_of(p_->latch_channel, l.name);
        if (sem > 0 && latch == 0) l.kind = "semaphore";
        else if (latch > 0 && sem == 0) l.kind = "latch";
        l.waiters = sem + latch;
      }
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
