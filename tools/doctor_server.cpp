// SPDX-License-Identifier: MIT
// `redlease doctor`'s checks of the server's settings: eviction, memory (with a trial grant near
// maxmemory), persistence and replicas, renamed or disabled commands, the clock.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "doctor_checks.hpp"

namespace redlease::cli::checkup {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// ---- 3. eviction and memory -------------------------------------------------------------------

std::optional<std::string> config_get(client& c, std::string_view name, std::string& why) {
  std::error_code ec;
  auto rep = c.command({"CONFIG", "GET", name}, ec);
  if (ec) {
    why = error_text(rep, ec);
    return std::nullopt;
  }
  if (!rep.is_array() || rep.elements.size() < 2) {
    why = "no such setting";
    return std::nullopt;
  }
  return rep.elements[1].str;
}

void check_eviction(client& c, context& cx, report& r) {
  std::string why;
  auto policy = config_get(c, "maxmemory-policy", why);
  std::string source = "";
  if (!policy && cx.info) {
    if (auto p = cx.info->get("maxmemory_policy")) {
      policy = std::string(*p);
      source = " (from INFO; CONFIG GET refused)";
    }
  }
  if (!policy) {
    r.warn("eviction", "cannot read maxmemory-policy: " + why,
           "grant +config|get, or run the doctor as an administrator; the safe setting is noeviction");
    return;
  }
  std::string p = *policy;
  if (p == "noeviction") {
    r.ok("eviction", "maxmemory-policy noeviction" + source + ": held locks are never evicted");
  } else if (p.rfind("allkeys-", 0) == 0) {
    r.warn("eviction",
           "maxmemory-policy " + p + source + ": at maxmemory any key can be evicted, a held lock too (then two "
           "holders)",
           "CONFIG SET maxmemory-policy noeviction (and in redis.conf), or keep locks on a Redis of their own");
  } else if (p.rfind("volatile-", 0) == 0) {
    r.warn("eviction",
           "maxmemory-policy " + p + source + ": at maxmemory keys with a TTL are evicted, and every held lock has one",
           "CONFIG SET maxmemory-policy noeviction (and in redis.conf), or keep locks on a Redis of their own");
  } else {
    r.warn("eviction", "maxmemory-policy " + p + source + ": unknown policy", "noeviction is the safe setting");
  }
}

// A grant on the sample name (5 s lease, no wait), released at once: what the memory figures
// predict at the limit, tried. Empty when granted (or held by someone else: not refused), else the
// refusal's code and words.
struct trial_grant {
  std::error_code code;
  std::string words;
};

static trial_grant try_a_grant(client& c, const context& cx) {
  trial_grant t;
  auto l = (cx.keyed != nullptr ? *cx.keyed : c).lock(cx.sample);
  bool held = l.try_lock(0ms, 5s, t.code);
  if (t.code) {
    t.words = last_error_text().empty() ? t.code.message() : last_error_text();
    return t;
  }
  if (held) {
    std::error_code ignored;
    l.unlock(ignored);
  }
  return t;
}

void check_memory(client& c, context& cx, report& r) {
  if (!cx.info) {
    r.warn("memory", "cannot read INFO memory: " + cx.info_error, info_advice);
    return;
  }
  auto used = cx.info->integer("used_memory");
  auto max = cx.info->integer("maxmemory");
  if (!used) {
    r.warn("memory", "INFO has no used_memory", "");
    return;
  }
  if (!max || *max <= 0) {
    r.ok("memory", "used " + fmt_bytes(*used) + ", no maxmemory limit");
    return;
  }
  double share = static_cast<double>(*used) / static_cast<double>(*max);
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.0f%%", share * 100);
  std::string detail = "used " + fmt_bytes(*used) + " of maxmemory " + fmt_bytes(*max) + " (" + pct + ")";
  // At the limit (noeviction) the server refuses writes that need memory: acquisitions, not releases
  // (the last release deletes without writing first; on Redis 7 the release script is allow-oom).
  bool v7 = cx.version && (*cx.version)[0] >= 7;
  if (share > 0.9) {
    // The figures alone do not decide: an eviction policy may make room, a server past the limit
    // with noeviction refuses every grant. The doctor's verdict is what a grant gets.
    trial_grant t = try_a_grant(c, cx);
    if (t.code == errc::server_oom) {
      r.fail("memory",
             detail + ": a grant of " + cx.sample + " is refused: " + t.words +
                 " (every acquisition is, until memory is freed)",
             "the server is out of memory with nothing to evict: raise maxmemory (CONFIG SET maxmemory <bytes>, and "
             "in redis.conf) or free memory; an eviction policy would make room too, but it can evict held locks "
             "(see the eviction line); releases still work");
      return;
    }
    if (t.code) detail += " (a trial grant of " + cx.sample + " could not tell: " + t.words + ")";
    r.warn("memory", detail + ": near the limit",
           std::string("raise maxmemory or free memory: at the limit (noeviction) new acquisitions are refused with "
                       "OOM (retried within their wait, then errc::server_oom); releases still work") +
               (v7 ? "" : ", except one that only decrements a re-entered hold (Redis 6 has no allow-oom scripts: "
                          "that lock stays held until its lease ends)"));
  } else {
    r.ok("memory", detail);
  }
}

// ---- 4. persistence and replicas --------------------------------------------------------------

void check_persistence(client& c, context& cx, report& r) {
  const std::string delayed =
      "a restart loses every lock, and another client may take one its holder still thinks it has: keep a "
      "restarted server out of service for at least the longest lease (RedLock's delayed restart), or enable "
      "AOF with appendfsync always (CONFIG SET appendonly yes; CONFIG SET appendfsync always)";
  if (!cx.info) {
    r.warn("persistence", "cannot read INFO persistence: " + cx.info_error, info_advice);
  } else {
    auto aof = cx.info->integer("aof_enabled").value_or(0);
    auto replicas = cx.info->integer("connected_slaves").value_or(0);
    std::string why;
    auto fsync = aof ? config_get(c, "appendfsync", why) : std::nullopt;
    if (!aof && replicas == 0) {
      r.warn("persistence", "no AOF and no replica", delayed);
    } else if (!aof) {
      r.ok("persistence", "no AOF; " + std::to_string(replicas) +
                              " replica(s) may keep locks across a restart of this server (replication is "
                              "asynchronous: a failover can still lose the last lock writes)");
    } else if (fsync && *fsync != "always") {
      r.ok("persistence",
           "AOF on, appendfsync " + *fsync +
               ": a power loss can drop the last second of lock writes (appendfsync always closes that gap)");
    } else {
      r.ok("persistence", std::string("AOF on") + (fsync ? ", appendfsync " + *fsync : ""));
    }
  }
  // min-replicas-to-write: below it, every write (every lock) is refused with NOREPLICAS.
  std::string why;
  auto min = config_get(c, "min-replicas-to-write", why);
  if (!min) {
    r.warn("min-replicas", "cannot read min-replicas-to-write: " + why,
           "grant +config|get, or run the doctor as an administrator");
    return;
  }
  long long want = parse_integer(*min).value_or(0);
  if (want <= 0) {
    r.ok("min-replicas", "min-replicas-to-write 0 (not set)");
    return;
  }
  long long have = -1;
  std::string counted = "connected";
  if (cx.info) {
    if (auto good = cx.info->integer("min_slaves_good_slaves")) {
      have = *good;
      counted = "connected with a lag within min-replicas-max-lag";
    } else if (auto conn = cx.info->integer("connected_slaves")) {
      have = *conn;
    }
  }
  if (have < 0) {
    r.warn("min-replicas", "min-replicas-to-write " + std::to_string(want) + "; cannot count the replicas: " +
                               cx.info_error,
           "if fewer are connected, every lock fails with NOREPLICAS");
  } else if (have < want) {
    r.fail("min-replicas",
           "min-replicas-to-write " + std::to_string(want) + ", but " + std::to_string(have) + " replica(s) " +
               counted + ": every write, so every lock and unlock, is refused with NOREPLICAS",
           "bring the replicas back, or CONFIG SET min-replicas-to-write " + std::to_string(have));
  } else {
    r.ok("min-replicas", "min-replicas-to-write " + std::to_string(want) + ", " + std::to_string(have) +
                             " replica(s) " + counted +
                             "; should they drop below it, every lock fails with NOREPLICAS");
  }
}

// ---- 5. renamed or disabled commands ----------------------------------------------------------

// A command a script calls by its name (`redis.call('name'` or `redis.pcall('name'`), upper case.
// PUBLISH/SPUBLISH are called through a variable, the client's choice, and are among the client's
// own commands below.
struct script_command {
  std::string name;
  std::vector<std::string> users;  // who calls it: "the fair lock", ...
};

// The script commands the scripts can do without: they check the call's error and take a slower
// path (src/lua/fair_cancel.lua, rw_read_release.lua, force_unlock.lua, include/make_fencing_token.lua).
// Every other one is needed.
const std::vector<std::pair<std::string, std::string>> can_do_without = {
    {"LPOS", "a fair waiter that gives up reads the whole queue to find itself (slower with long queues)"},
    {"ZMSCORE", "a fair waiter that gives up reads the deadlines behind it one call each (slower with long queues)"},
    {"DECR", "a grant refused for a fencing token key at 2^53 or more leaves that key one larger"},
    {"HRANDFIELD", "a read release checks the readers in turn, not one picked at random first (slower with many "
                   "readers)"},
    {"UNLINK", "a forced unlock deletes the lock with DEL (a lock of many fields blocks the server while it is "
               "freed)"},
};

// Who a script serves, by its name (src/lua/).
static std::string user_of(std::string_view script) {
  auto starts = [&](std::string_view p) { return script.substr(0, p.size()) == p; };
  if (starts("fair_")) return "the fair lock";
  if (starts("rw_")) return "the read-write lock";
  if (starts("stock_")) return "segmented stock";
  if (starts("redlock_")) return "RedLock";
  if (starts("semaphore_")) return "the semaphore";
  if (starts("latch_")) return "the count-down latch";
  if (starts("permits_")) return "the permit-expirable semaphore";
  if (script.find("fenced") != std::string_view::npos) return "fencing tokens";
  return "the reentrant lock and mutex";
}

static std::vector<script_command> script_commands() {
  std::vector<script_command> out;
  for (const auto& script : embedded_scripts()) {
    const auto* sc = &script;
    std::string_view b = sc->body;
    for (std::string_view call : {"redis.call(", "redis.pcall("}) {
      for (auto p = b.find(call); p != std::string_view::npos; p = b.find(call, p + 1)) {
        auto q = p + call.size();
        if (q >= b.size() || (b[q] != '\'' && b[q] != '"')) continue;  // a variable: PUBLISH/SPUBLISH
        auto e = b.find(b[q], q + 1);
        if (e == std::string_view::npos) continue;
        std::string name(b.substr(q + 1, e - q - 1));
        for (auto& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        auto it = std::find_if(out.begin(), out.end(), [&](const script_command& x) { return x.name == name; });
        if (it == out.end()) it = out.insert(out.end(), script_command{name, {}});
        // The token's commands come into the fair and read-write scripts by an include and serve
        // fenced acquisitions only.
        std::string user = name == "INCR" || name == "TIME" ? "fencing tokens" : user_of(sc->name);
        if (std::find(it->users.begin(), it->users.end(), user) == it->users.end()) it->users.push_back(user);
      }
    }
  }
  return out;
}

void check_commands(client& c, report& r) {
  // The commands the client sends itself, then every command its scripts call (read from the
  // embedded scripts, so that the list cannot fall behind them). SCRIPT is not used by the library.
  std::vector<std::string> needed = {"EVAL", "EVALSHA", "PUBLISH", "SUBSCRIBE", "PING", "SCRIPT"};
  const auto from_scripts = script_commands();
  for (const auto& sc : from_scripts)
    if (std::find(needed.begin(), needed.end(), sc.name) == needed.end()) needed.push_back(sc.name);
  std::vector<std::string> missing;
  std::string how = "COMMAND INFO";
  std::vector<std::string> cmd{"COMMAND", "INFO"};
  cmd.insert(cmd.end(), needed.begin(), needed.end());
  std::error_code ec;
  auto rep = c.command(cmd, ec);
  if (!ec && rep.is_array() && rep.elements.size() == needed.size()) {
    for (std::size_t i = 0; i < needed.size(); ++i)
      if (rep.elements[i].is_nil()) missing.push_back(needed[i]);
  } else {
    // COMMAND INFO refused: each command alone, without arguments, gets "wrong number of arguments"
    // if it exists and "unknown command" if not, before any permission check, and runs nothing
    // (TIME and PING, which take none, only answer).
    how = "calls without arguments (COMMAND INFO refused: " + error_text(rep, ec) + ")";
    for (const auto& name : needed) {
      std::error_code e2;
      auto x = c.command({name}, e2);
      if (x.is_error() && contains(x.str, "unknown command")) missing.push_back(name);
      else if (e2 && !x.is_error()) {
        r.warn("commands", "cannot check: " + name + ": " + e2.message(), "");
        return;
      }
    }
  }
  if (missing.empty()) {
    r.ok("commands", std::to_string(needed.size()) + " commands the locks and their scripts use are known, per " + how);
    return;
  }
  // What each missing command costs. The reentrant lock and the mutex cannot do without the
  // client's EVAL/EVALSHA/PING or their scripts' commands: FAIL. Another kind's command breaks that
  // kind only, PUBLISH and SUBSCRIBE only wake-ups, one the scripts can do without only speed: WARN.
  std::string list;
  std::vector<std::string> effects, wakeup;
  bool fatal = false;
  auto join_users = [](const std::vector<std::string>& users) {
    std::string out;
    for (std::size_t i = 0; i < users.size(); ++i) out += (i ? (i + 1 == users.size() ? " and " : ", ") : "") + users[i];
    return out;
  };
  for (const auto& m : missing) {
    list += (list.empty() ? "" : ", ") + m;
    auto sc = std::find_if(from_scripts.begin(), from_scripts.end(), [&](const script_command& x) { return x.name == m; });
    if (m == "PUBLISH" || m == "SUBSCRIBE") {
      add_effect(wakeup, m == "PUBLISH" ? without_publish : without_subscribe);
    } else if (m == "SCRIPT") {
      add_effect(effects, "SCRIPT: the locks do not use it, scripts and tools that load scripts do");
    } else if (sc == from_scripts.end()) {
      fatal = true;  // EVAL, EVALSHA, PING: the client sends them
    } else if (auto w = std::find_if(can_do_without.begin(), can_do_without.end(),
                                     [&](const auto& x) { return x.first == m; });
               w != can_do_without.end()) {
      add_effect(effects, m + ": " + w->second);
    } else {
      bool core = std::find(sc->users.begin(), sc->users.end(), "the reentrant lock and mutex") != sc->users.end();
      fatal = fatal || core;
      add_effect(effects, m + ": " + join_users(sc->users) + " cannot work (their scripts fail with server_error)");
    }
  }
  if (!wakeup.empty()) effects.push_back(wakeup_effects(wakeup));
  std::string detail = "unknown (renamed or disabled) per " + how + ": " + list;
  for (const auto& e : effects) detail += "; " + e;
  const std::string fix = "remove the rename-command lines for them from redis.conf (and restart)";
  if (fatal) r.fail("commands", detail + "; the client or its scripts call them by these names", fix);
  else r.warn("commands", detail, fix);
}

// ---- 6. clock ---------------------------------------------------------------------------------

void check_clock(client& c, report& r) {
  std::error_code ec;
  auto before = std::chrono::system_clock::now();
  auto rep = c.command({"TIME"}, ec);
  auto after = std::chrono::system_clock::now();
  const std::string note = "locks never use wall-clock time: leases are TTLs the server counts";
  if (ec || !rep.is_array() || rep.elements.size() != 2) {
    r.warn("clock", "cannot read TIME: " + error_text(rep, ec) + "; " + note, "");
    return;
  }
  auto s = parse_integer(rep.elements[0].str), us = parse_integer(rep.elements[1].str);
  if (!s || !us) {
    r.warn("clock", "TIME gave no number; " + note, "");
    return;
  }
  auto local_us =
      std::chrono::duration_cast<std::chrono::microseconds>((before + (after - before) / 2).time_since_epoch()).count();
  long long skew = *s * 1'000'000 + *us - local_us;
  long long mag = skew < 0 ? -skew : skew;
  std::string detail =
      "server clock " + fmt_us(mag) + (skew >= 0 ? " ahead of" : " behind") + " this machine's; " + note;
  if (mag > 1'000'000)
    r.warn("clock", detail,
           "run NTP (chrony, systemd-timesyncd) on both: logs and TIME-based tools disagree otherwise");
  else
    r.ok("clock", detail);
}

}  // namespace redlease::cli::checkup
