// SPDX-License-Identifier: MIT
// `redlease doctor`: the helpers its checks share (sample names, the ACL advice, formatting).
#include <algorithm>
#include <cstdio>

#include "doctor_checks.hpp"

namespace redlease::cli::checkup {

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

// A lock name matched by the glob `pattern`: `*` → "redlease-doctor", `?` → "x", `[...]` → its
// first character, `\c` → c.
std::string sample_of(std::string_view pattern, std::string_view filler) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '*') {
      out += filler;
    } else if (c == '?') {
      out += 'x';
    } else if (c == '\\' && i + 1 < pattern.size()) {
      out += pattern[++i];
    } else if (c == '[') {
      std::size_t close = pattern.find(']', i + 2);
      if (close == std::string_view::npos) {
        out += c;
        continue;
      }
      std::string_view set = pattern.substr(i + 1, close - i - 1);
      if (!set.empty() && set.front() == '^') out += (set.find('x', 1) == std::string_view::npos ? 'x' : 'y');
      else out += set.front();
      i = close;
    } else {
      out += c;
    }
  }
  if (out.empty()) out = filler;
  return out;
}

// What a prefix-restricted user needs for the names matched by `pattern` (docs/deployment.md, "ACL:
// a user limited to a key prefix"): every kind's key and channel patterns (acl_patterns_for: the
// names, latches, token keys, the fair queue and deadlines, the read timeout keys; the channels with
// the fair waiters' own). Commands: TIME too, which the acquire scripts call to start a name's first
// fencing token (it is in no category the others grant). `keyspace`: also the keyspace channel
// mutex waiters listen on when the server sends keyspace events. The user's password and `on` are
// left as they are: the line adds to an existing user.
std::string acl_setuser_line(const std::string& user, const std::string& pattern, int database, bool keyspace) {
  const auto acl = acl_patterns_for(pattern);
  std::string line = "ACL SETUSER " + user;
  for (const auto& k : acl.keys) line += " ~" + k;
  for (const auto& ch : acl.channels) line += " &" + ch;
  line += " +@read +@write +@scripting +@pubsub +ping +time +client|setname";
  if (database != 0) line += " +select";
  if (keyspace) line += " &" + describe(lock_kind::mutex, pattern).keyspace_channel(database);
  return line;
}

std::string acl_advice(const context& cx, const std::string& who, std::string_view what) {
  return "grant user " + who + " " + std::string(what) + "; in redis-cli: " +
         acl_setuser_line(who, cx.opts.pattern, cx.cfg.database, cx.keyspace);
}

// What to do about a refusal: by the library's typed cause `ec` when it has one, else by the server's
// text `text` (ACL DRYRUN answers with text, not an error). `user`: whose permissions (default: the
// connected user's).
std::string advice_for(const context& cx, std::error_code ec, std::string_view text, const std::string& user) {
  const std::string& who = user.empty() ? cx.user : user;
  auto is = [&](errc e, std::string_view words) { return ec == e || (!words.empty() && contains(text, words)); };
  if (is(errc::no_permission, "NOPERM") || contains(text, "no permissions"))
    return acl_advice(cx, who, "the lock's keys and channels");
  if (is(errc::unknown_command, "unknown command") || contains(text, "not found") ||
      contains(text, "Unknown Redis command"))
    return "a command the locks need is renamed or disabled (rename-command in redis.conf): give it back its name";
  if (is(errc::no_replicas, "NOREPLICAS"))
    return "fewer replicas than min-replicas-to-write are connected: connect them, or lower min-replicas-to-write";
  if (is(errc::server_readonly, "READONLY"))
    return "this server is a replica: point --redis (and your services) at the master";
  if (is(errc::server_oom, "OOM"))
    return "the server is at maxmemory: raise maxmemory (CONFIG SET maxmemory ...) or free memory; releases still "
           "work, acquisitions are refused until then";
  if (is(errc::server_loading, "LOADING")) return "the server is loading its dataset: wait until it is done";
  if (contains(text, "MASTERDOWN")) return "the replica lost its master (replica-serve-stale-data no): fix replication";
  if (is(errc::server_busy, "BUSY")) return "a script runs too long (SCRIPT KILL, or wait for it)";
  if (is(errc::server_full, "max number of clients"))
    return "the server is at maxclients: find who holds the connections (CLIENT LIST), or raise it (CONFIG SET "
           "maxclients N; check the file descriptor limit)";
  return {};
}

// The server's text of an error reply, or the library's message.
std::string error_text(const reply& r, const std::error_code& ec) {
  if (r.is_error() && !r.str.empty()) return r.str;
  return ec.message();
}

std::string fmt_us(long long us) {
  if (us < 10'000) return std::to_string(us) + " us";
  if (us < 10'000'000) return std::to_string((us + 500) / 1000) + " ms";
  return std::to_string((us + 500'000) / 1'000'000) + " s";
}

std::string fmt_bytes(long long b) {
  char buf[64];
  if (b >= (1LL << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1LL << 30));
  else if (b >= (1LL << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1LL << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%lld B", b);
  return buf;
}

// What the library does without the channel permissions (src/lua/*.lua, src/lock/lock_service.cpp).
const std::string without_publish =
    "a release skips its unlock message (its PUBLISH runs through pcall), so it wakes no waiter";
const std::string without_subscribe =
    "waiters, refused SUBSCRIBE, poll with backoff (10 ms doubling to 500 ms) instead of being woken at once";

// "<works>, but <effect>; <effect>": what the refused wake-up (or fencing, or kind) steps cost.
std::string wakeup_effects(const std::vector<std::string>& effects, const std::string& works) {
  std::string out = works + ", but ";
  for (std::size_t i = 0; i < effects.size(); ++i) out += (i ? "; " : "") + effects[i];
  return out;
}

void add_effect(std::vector<std::string>& effects, const std::string& effect) {
  if (!effect.empty() && std::find(effects.begin(), effects.end(), effect) == effects.end()) effects.push_back(effect);
}

const std::string info_advice = "grant +info to this user, or run the doctor as an administrator, to check this";

}  // namespace redlease::cli::checkup
