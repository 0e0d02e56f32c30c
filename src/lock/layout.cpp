// SPDX-License-Identifier: MIT
// describe(): each kind's keys and channels, for the tools and for users, from the names the
// protocols send (the channel and the latch come from the protocol and the engine themselves; the
// other names are the ones src/lock/protocols.cpp and src/lua/*.lua use, and tests/unit/layout_test
// checks them against the protocols' encoded calls).
#include "redlease/layout.hpp"

#include <algorithm>
#include <array>

#include "lock/naming.hpp"
#include "lock/protocol.hpp"

namespace redlease {
namespace {

constexpr std::string_view latch_prefix = "redisson_unlock_latch";

bool braced(std::string_view name) { return name.find('{') != std::string_view::npos; }

using detail::tagged;  // the one hash-tag rule (lock/naming.hpp)

// A read level's timeout key, `{name}:<field>:rwlock_timeout:<level>` (`name:...` when the name has
// a `{`), as src/lua/include/rwlock_timeout_key.lua derives it. (Appended piece by piece: g++ 12 -O3
// reports a false -Wrestrict on `"{" + name`.)
std::string timeout_key(std::string_view name, std::string_view field, std::string_view level) {
  std::string out;
  if (!braced(name)) out.push_back('{');
  out += name;
  if (!braced(name)) out.push_back('}');
  out += ':';
  out += field;
  out += ":rwlock_timeout:";
  out += level;
  return out;
}

// The token key of each kind: one sequence per name for the reentrant and fair lock, one for the
// two sides of the read-write lock.
std::string_view token_prefix(lock_kind kind) {
  switch (kind) {
    case lock_kind::mutex: return "redlease_mutex_token";
    case lock_kind::read:
    case lock_kind::write: return "redlease_rwlock_token";
    case lock_kind::latch: return {};  // no fencing: no token key
    case lock_kind::reentrant:
    case lock_kind::fair: break;
    case lock_kind::semaphore:
    case lock_kind::permit_semaphore: return {};  // no fencing tokens
  }
  return "redisson_lock_token";
}

constexpr std::string_view queue_prefix = "redisson_lock_queue";
constexpr std::string_view deadlines_prefix = "redisson_lock_timeout";

// True if the glob `pattern` ends in an unescaped `*`: patterns derived from it stay open.
bool open_pattern(std::string_view pattern) {
  const bool escaped = pattern.size() >= 2 && pattern[pattern.size() - 2] == '\\';
  return !pattern.empty() && pattern.back() == '*' && !escaped;
}

// The ACL pattern of what is derived from the names the glob `pattern` matches, as tagged() derives
// it from each name, followed by `tail`. An open pattern stays open: its final `*` also matches the
// closing brace and the tail (docs/deployment.md's `~redisson_unlock_latch:{locks:*`).
std::string derived(std::string_view prefix, std::string_view pattern, std::string_view tail) {
  std::string out(prefix);
  out += braced(pattern) ? ":" : ":{";
  out += pattern;
  if (open_pattern(pattern)) return out;
  if (!braced(pattern)) out += '}';
  out += tail;
  return out;
}

// The ACL patterns of one kind, each with its rank in the union of all kinds (acl_patterns_for):
// 0 the names, 1 the latches, 2 the token keys, 3 the other keys.
struct ranked {
  int rank;
  std::string pattern;
};

std::vector<ranked> ranked_acl_keys(lock_kind kind, std::string_view p) {
  if (p == "*") return {{0, "*"}};
  std::vector<ranked> out{{0, std::string(p)}};
  if (kind != lock_kind::mutex) out.push_back({1, derived(latch_prefix, p, ":*")});
  if (!token_prefix(kind).empty()) out.push_back({2, derived(token_prefix(kind), p, "")});
  if (kind == lock_kind::fair) {
    out.push_back({3, derived(queue_prefix, p, "")});
    out.push_back({3, derived(deadlines_prefix, p, "")});
  }
  if (kind == lock_kind::permit_semaphore) {
    // The permits' zset `{name}:timeout` (`name:timeout` with a `{`, which an open `~pattern`
    // already covers).
    // (Appended piece by piece: see timeout_key.)
    std::string z;
    if (!braced(p)) z.push_back('{');
    z.append(p);
    if (!braced(p) && !open_pattern(p)) z.append("}:timeout");
    else if (braced(p)) z.append(":timeout");
    if (!braced(p) || !open_pattern(p)) out.push_back({3, std::move(z)});
  }
  if (kind == lock_kind::read || kind == lock_kind::write) {
    // The read timeout keys `{name}:<owner>:rwlock_timeout:<n>`; with a `{` in the pattern they are
    // `name:...`, which an open `~pattern` already covers.
    const bool open = open_pattern(p);
    std::string timeouts;
    if (!braced(p)) timeouts.push_back('{');
    timeouts.append(p);
    if (!braced(p) && !open) timeouts.append("}:*");
    else if (braced(p)) timeouts.append(":*");
    if (!braced(p) || !open) out.push_back({3, std::move(timeouts)});
  }
  return out;
}

std::vector<std::string> acl_channels(lock_kind kind, std::string_view p) {
  if (kind == lock_kind::latch) {
    // Redisson's latch channel always wraps the name in braces, a `{` in it or not.
    constexpr std::string_view latch_channel = "redisson_countdownlatch__channel__";
    if (p == "*") return {std::string(latch_channel) + "*"};
    return {std::string(latch_channel) + "{" + std::string(p) + (open_pattern(p) ? "" : "}")};
  }
  const std::string ch = detail::protocol_of(kind).channel(p);
  const std::string prefix = ch.substr(0, ch.find(':'));
  if (p == "*") return {prefix + ":*"};  // also the fair lock's waiter channels
  std::vector<std::string> out{derived(prefix, p, "")};
  // The fair waiters' own channels; an open pattern's channel pattern covers them already.
  if (kind == lock_kind::fair && !open_pattern(p)) out.push_back(derived(prefix, p, ":*"));
  return out;
}

void add_once(std::vector<std::string>& into, std::string s) {
  if (std::find(into.begin(), into.end(), s) == into.end()) into.push_back(std::move(s));
}

}  // namespace

lock_layout describe(lock_kind kind, std::string_view name) {
  lock_layout l;
  l.kind = kind;
  l.name = std::string(name);
  const std::string n(name);
  switch (kind) {
    case lock_kind::mutex:
      l.keys.push_back({n, "string", "the lock: the holder's random token"});
      break;
    case lock_kind::read:
    case lock_kind::write:
      l.keys.push_back({n, "hash", "the lock: mode, reader fields and the writer field -> hold count"});
      break;
    case lock_kind::reentrant:
    case lock_kind::fair:
      l.keys.push_back({n, "hash", "the lock: owner field -> hold count"});
      break;
    case lock_kind::semaphore:
      l.keys.push_back({n, "string", "the semaphore: the available permits"});
      break;
    case lock_kind::latch:
      l.keys.push_back({n, "string", "the count-down latch: the count (missing: 0)"});
      break;
    case lock_kind::permit_semaphore:
      l.keys.push_back({n, "string", "the semaphore: the available permits"});
      l.keys.push_back({detail::suffixed(name, "timeout"), "zset",
                        "the permits out: id (16 bytes) -> expiry in epoch ms (922337203685477: no lease)"});
      break;
  }
  if (kind == lock_kind::fair) {
    l.queue_key = tagged(queue_prefix, name);
    l.deadlines_key = tagged(deadlines_prefix, name);
    l.keys.push_back({l.queue_key, "list", "the waiters' queue, head first"});
    l.keys.push_back({l.deadlines_key, "zset", "each waiter's deadline in the queue (epoch ms)"});
  }
  if (!token_prefix(kind).empty()) {
    l.token_key = tagged(token_prefix(kind), name);
    l.keys.push_back({l.token_key, "string", "the last fencing token handed out"});
  }

  const detail::lock_protocol& proto = detail::protocol_of(kind);
  if (kind == lock_kind::latch)
    l.channels.push_back({proto.channel(name), "count changes: \"0\" reached zero, \"1\" a new count or a deletion", false});
  else
    l.channels.push_back({proto.channel(name), "each release publishes here, waking the waiters", false});
  if (kind == lock_kind::fair)
    l.channels.push_back({proto.waiter_channel(name, "*"), "the hand-off to the head of the queue alone", true});

  if (kind != lock_kind::mutex) l.latch_key_pattern = detail::latch_key(name, "*");
  if (kind == lock_kind::read || kind == lock_kind::write) l.read_timeout_key_pattern = timeout_key(name, "*", "*");

  for (auto& k : ranked_acl_keys(kind, name)) add_once(l.acl_keys, std::move(k.pattern));
  for (auto& c : acl_channels(kind, name)) add_once(l.acl_channels, std::move(c));
  return l;
}

std::string lock_layout::latch_key(std::string_view request) const {
  if (kind == lock_kind::mutex) return {};
  return detail::latch_key(name, request);
}

std::string lock_layout::waiter_channel(std::string_view field) const {
  return detail::protocol_of(kind).waiter_channel(name, field);
}

std::string lock_layout::read_timeout_key(std::string_view field, unsigned long long level) const {
  if (kind != lock_kind::read && kind != lock_kind::write) return {};
  return timeout_key(name, field, std::to_string(level));
}

std::string lock_layout::keyspace_channel(int database) const {
  if (kind != lock_kind::mutex) return {};
  return "__keyspace@" + std::to_string(database) + "__:" + name;
}

bool is_lock_hash_entry(std::string_view field, std::string_view value) noexcept {
  // The rule of src/lua/include/foreign_hash.lua, which the acquisitions apply on the server.
  auto digits = [](std::string_view s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (field == "mode") return value == "read" || value == "write";
  if (field.ends_with(":write")) field.remove_suffix(6);  // a read-write lock's writer
  const auto colon = field.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || !digits(field.substr(colon + 1))) return false;
  if (!value.empty() && value.front() == '-') value.remove_prefix(1);
  return digits(value);
}

acl_patterns acl_patterns_for(std::string_view pattern) {
  // The kinds in the order their patterns appear: the fair lock's waiter channels right after the
  // reentrant lock's channel, which they extend.
  constexpr std::array kinds{lock_kind::reentrant, lock_kind::fair, lock_kind::mutex, lock_kind::read,
                             lock_kind::write, lock_kind::semaphore, lock_kind::latch, lock_kind::permit_semaphore};
  acl_patterns out;
  std::vector<std::vector<ranked>> keys;
  for (lock_kind k : kinds) keys.push_back(ranked_acl_keys(k, pattern));
  for (int rank = 0; rank <= 3; ++rank)
    for (const auto& of_kind : keys)
      for (const auto& r : of_kind)
        if (r.rank == rank) add_once(out.keys, r.pattern);
  for (lock_kind k : kinds)
    for (auto& c : acl_channels(k, pattern)) add_once(out.channels, std::move(c));
  // A key pattern another one already covers (the permits' `{job}:timeout` under the read timeouts'
  // `{job}:*`) is left out: the line an operator pastes stays as short as it can be.
  std::erase_if(out.keys, [&](const std::string& k) {
    return std::any_of(out.keys.begin(), out.keys.end(), [&](const std::string& q) {
      if (q == k || !open_pattern(q)) return false;
      const std::string_view prefix = std::string_view(q).substr(0, q.size() - 1);
      return prefix.find_first_of("*?[\\") == std::string_view::npos && k.starts_with(prefix);
    });
  });
  return out;
}

}  // namespace redlease
