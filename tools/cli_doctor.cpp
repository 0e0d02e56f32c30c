// SPDX-License-Identifier: MIT
// `redlease doctor [--redis URL] [--json] [--probe] [--acl-user USER] [NAME-PATTERN]`: checks a Redis
// deployment for locks the way an operator would — connectivity, latency, version, topology, the
// user's permissions for every command and script the locks send (ACL DRYRUN, or a live probe),
// eviction, memory, persistence, min-replicas-to-write, renamed commands and the clock — one line
// per check with OK / WARN / FAIL and what to do (docs/cli.md, "redlease doctor").
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "info_parser.hpp"
#include "redlease/redlease.hpp"

namespace redlease::cli {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

struct doctor_options {
  std::string url = default_url();
  std::string pattern = "*";
  std::string acl_user;  // check this ACL user's permissions with ACL DRYRUN (default: the connected one)
  bool json = false;
  bool probe = false;
};

enum class level { ok, warn, fail };

const char* level_name(level l) { return l == level::ok ? "OK" : l == level::warn ? "WARN" : "FAIL"; }

struct finding {
  std::string check;
  level status = level::ok;
  std::string detail;
  std::string advice;
};

// Prints each finding as it is made (a slow check does not hold back the others' lines).
class report {
 public:
  explicit report(bool json) : json_(json) {}

  void add(std::string check, level status, std::string detail, std::string advice = {}) {
    finding f{std::move(check), status, std::move(detail), std::move(advice)};
    ++counts_[static_cast<int>(f.status)];
    print(f);
  }
  void ok(std::string check, std::string detail, std::string advice = {}) {
    add(std::move(check), level::ok, std::move(detail), std::move(advice));
  }
  void warn(std::string check, std::string detail, std::string advice = {}) {
    add(std::move(check), level::warn, std::move(detail), std::move(advice));
  }
  void fail(std::string check, std::string detail, std::string advice = {}) {
    add(std::move(check), level::fail, std::move(detail), std::move(advice));
  }

  int fails() const { return counts_[2]; }

  void summary() {
    int total = counts_[0] + counts_[1] + counts_[2];
    std::string detail = std::to_string(total) + (total == 1 ? " check: " : " checks: ") + std::to_string(counts_[0]) +
                         " OK, " + std::to_string(counts_[1]) + " WARN, " + std::to_string(counts_[2]) + " FAIL";
    level worst = counts_[2] ? level::fail : counts_[1] ? level::warn : level::ok;
    std::string advice = counts_[2] ? "fix the FAIL lines first: locks do not work (or are not safe) until then"
                         : counts_[1] ? "locks work; the WARN lines say what can still go wrong"
                                      : "";
    if (json_) {
      std::string line = "{\"check\":\"summary\",\"status\":\"";
      line += level_name(worst);
      line += "\",\"detail\":\"";
      json_escape_to(line, detail);
      line += "\",\"advice\":\"";
      json_escape_to(line, advice);
      line += "\",\"ok\":" + std::to_string(counts_[0]) + ",\"warn\":" + std::to_string(counts_[1]) +
              ",\"fail\":" + std::to_string(counts_[2]) + "}\n";
      std::cout << line << std::flush;
    } else {
      std::cout << level_name(worst) << std::string(5 - std::strlen(level_name(worst)), ' ') << pad("summary")
                << detail << (advice.empty() ? "" : "; " + advice) << "\n"
                << std::flush;
    }
  }

 private:
  static std::string pad(const std::string& check) {
    constexpr std::size_t width = 20;
    return check + std::string(check.size() < width ? width - check.size() : 1, ' ');
  }

  void print(const finding& f) {
    std::string line;
    if (json_) {
      line = "{\"check\":\"";
      json_escape_to(line, f.check);
      line += "\",\"status\":\"";
      line += level_name(f.status);
      line += "\",\"detail\":\"";
      json_escape_to(line, f.detail);
      line += "\",\"advice\":\"";
      json_escape_to(line, f.advice);
      line += "\"}\n";
    } else {
      line = level_name(f.status);
      line += std::string(5 - line.size(), ' ');
      line += pad(f.check);
      line += printable_text(f.detail);
      if (!f.advice.empty()) line += "; fix: " + printable_text(f.advice);
      line += "\n";
    }
    std::cout << line << std::flush;
  }

  // Server texts go into a terminal: control characters (a line break in an error reply) and bytes
  // outside ASCII as \xNN; UTF-8 of our own (µ) is not used.
  static std::string printable_text(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
      if (c >= 0x20 && c < 0x7f) {
        out += static_cast<char>(c);
      } else {
        static const char hex[] = "0123456789abcdef";
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
      }
    }
    return out;
  }

  bool json_;
  int counts_[3] = {0, 0, 0};
};

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

// A lock name matched by the glob `pattern`: `*` → "redlease-doctor", `?` → "x", `[...]` → its
// first character, `\c` → c.
std::string sample_of(std::string_view pattern, std::string_view filler = "redlease-doctor") {
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
std::string acl_setuser_line(const std::string& user, const std::string& pattern, int database, bool keyspace = false) {
  const auto acl = acl_patterns_for(pattern);
  std::string line = "ACL SETUSER " + user;
  for (const auto& k : acl.keys) line += " ~" + k;
  for (const auto& ch : acl.channels) line += " &" + ch;
  line += " +@read +@write +@scripting +@pubsub +ping +time +client|setname";
  if (database != 0) line += " +select";
  if (keyspace) line += " &" + describe(lock_kind::mutex, pattern).keyspace_channel(database);
  return line;
}

struct context {
  doctor_options opts;
  config cfg;
  std::string user;         // connected as: ACL WHOAMI, else the URL's user, else "default"
  std::string checked;      // whose permissions ACL DRYRUN checks: --acl-user, else `user`
  std::string sample;       // a name matched by the pattern (the reentrant lock's probe)
  std::string mutex_sample; // another (the mutex's live probe), unless the pattern has no '*'
  bool ping_refused = false;
  bool keyspace = false;    // mutex waiters also subscribe to the keyspace channel (advice adds it)
  std::optional<std::array<int, 3>> version;
  std::optional<info_fields> info;  // INFO (its default sections), when permitted
  std::string info_error;           // why not
};

std::string acl_advice(const context& cx, const std::string& who, std::string_view what) {
  return "grant user " + who + " " + std::string(what) + "; in redis-cli: " +
         acl_setuser_line(who, cx.opts.pattern, cx.cfg.database, cx.keyspace);
}

// What to do about a refusal: by the library's typed cause `ec` when it has one, else by the server's
// text `text` (ACL DRYRUN answers with text, not an error). `user`: whose permissions (default: the
// connected user's).
std::string advice_for(const context& cx, std::error_code ec, std::string_view text, const std::string& user = {}) {
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

// ---- connection failures ----------------------------------------------------------------------

// What to change for a TLS failure, with the CLI's flags (docs/cli.md, "Connecting"); empty for a
// code that is not TLS's.
std::string tls_advice(std::error_code code) {
  if (code == errc::tls_untrusted_certificate)
    return "the server's certificate is signed by a CA this machine does not trust: pass that CA with --cacert FILE "
           "(or $REDLEASE_CACERT); --insecure skips the verification (tests only)";
  if (code == errc::tls_name_mismatch)
    return "the certificate does not name the host connected to: connect with a name it holds (the URL's host, or "
           "--sni NAME), or give the server a certificate for this host; --insecure skips the check (tests only)";
  if (code == errc::tls_certificate_expired)
    return "the server's certificate has expired or is not valid yet: renew it (tls-cert-file), or check the clocks "
           "of this machine and the server";
  if (code == errc::tls_client_certificate_required)
    return "the server wants a client certificate (tls-auth-clients yes): pass --cert FILE --key FILE, signed by a "
           "CA the server trusts (tls-ca-cert-file)";
  if (code == errc::tls_expected_by_server) return "the port speaks TLS: use rediss:// (or --tls)";
  if (code == errc::tls_not_offered_by_server)
    return "the port does not speak TLS: use redis://, or the server's tls-port";
  if (code == errc::tls_bad_files)
    return "check --cacert, --cert and --key: each must be a readable PEM file, and the key must match the "
           "certificate";
  if (code == errc::tls_not_supported) return "TLS is not supported on a unix socket: connect over TCP (rediss://)";
  if (code == errc::tls_handshake_failed)
    return "the TLS handshake failed (no common version or cipher, or an alert): compare the server's tls-protocols "
           "and tls-ciphers with this client's OpenSSL";
  return {};
}

// ---- the checks -------------------------------------------------------------------------------

// 1. Connectivity and authentication; false if the server cannot be used at all.
bool check_connectivity(client& c, context& cx, report& r) {
  std::string where = cx.cfg.redacted_url();
  std::string ping_refused;  // connected and authenticated, but PING answered with an error (NOPERM)
  std::error_code ping_code;
  std::optional<redlease::error> failure;
  try {
    c.ping();
  } catch (const redlease::error& e) {
    auto code = e.code();
    // A refusal of the PING itself comes from a server that let us in; its words are in
    // last_error_text(), as they are for a refused connection (maxclients, LOADING, a wrong password).
    if (code == errc::no_permission || code == errc::unknown_command || code == errc::server_error) {
      ping_refused = last_error_text().empty() ? std::string(e.what()) : last_error_text();
      ping_code = code;
    } else {
      failure = e;
    }
  }
  if (failure) {
    const redlease::error& e = *failure;
    const std::string words = last_error_text();
    // what() is "client::ping <url>: <the server's words>: <reason>"; the line names the URL already.
    std::string detail = e.what();
    if (auto at = detail.find(where + ": "); at != std::string::npos) detail = detail.substr(at + where.size() + 2);
    auto code = e.code();
    // (A peer that is not Redis: its bytes are no server's words.)
    std::string advice = code == errc::protocol_error ? std::string() : advice_for(cx, code, words);
    if (contains(words, "DENIED") || contains(words, "protected mode")) {
      // DENIED's text is a page long: its first sentence says it.
      if (auto end = detail.find(". "); end != std::string::npos && detail.size() > 160) detail.resize(end + 1);
      advice = "the server is in protected mode (no password, and this client is not on its loopback interface): "
               "set a password (requirepass, or an ACL user) and connect with it, or bind it to trusted "
               "interfaces only and set protected-mode no";
    }
    if (!advice.empty()) {
      // said above: the server's words name the cause
    } else if (code == errc::auth_failed) {
      advice = "check the password ($REDLEASE_PASSWORD, or the URL) and the user (redis://USER:PASSWORD@host); the "
               "user must be `on` (ACL LIST)";
    } else if (auto tls = tls_advice(code); !tls.empty()) {
      advice = std::move(tls);
    } else if (code == errc::protocol_error) {
      advice = "the port does not belong to a Redis server: check the host and port";
    } else if (code == errc::connect_failed || code == errc::connect_timeout || code == errc::connection_lost) {
      advice = "is redis-server running and listening there? (bind, port, protected-mode, firewall)";
    } else if (code == errc::select_failed) {
      advice = "the database number in the URL does not exist on this server (databases in redis.conf)";
    }
    r.fail("connectivity", where + ": " + detail, advice);
    return false;
  }
  std::error_code ec;
  auto who = c.command({"ACL", "WHOAMI"}, ec);
  std::string how;
  if (!ec && who.is_string()) {
    cx.user = who.str;
    how = "user " + cx.user;
  } else {
    cx.user = cx.cfg.username.empty() ? "default" : cx.cfg.username;
    how = "user " + cx.user + " (ACL WHOAMI refused: " + error_text(who, ec) + ")";
  }
  std::string detail = where + ", " + how + (cx.cfg.password.empty() ? ", no password" : ", authenticated");
  if (!ping_refused.empty()) {
    cx.ping_refused = true;
    r.fail("connectivity", detail + ", but PING is refused: " + ping_refused + " (the client's health checks send it)",
           advice_for(cx, ping_code, ping_refused));
  } else {
    r.ok("connectivity", detail);
  }
  return true;
}

void check_latency(client& c, report& r) {
  std::vector<long long> us;
  std::string failure;
  for (int i = 0; i < 20; ++i) {
    std::error_code ec;
    auto t0 = steady::now();
    auto rep = c.command({"PING"}, ec);
    auto t1 = steady::now();
    if (ec) {
      failure = error_text(rep, ec);
      break;
    }
    us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count());
  }
  if (us.empty()) {
    r.fail("latency", "PING failed: " + failure, "");
    return;
  }
  std::sort(us.begin(), us.end());
  long long median = us[us.size() / 2];
  std::string detail = "PING median " + fmt_us(median) + " (min " + fmt_us(us.front()) + ", max " + fmt_us(us.back()) +
                       ", " + std::to_string(us.size()) + " round trips)";
  if (!failure.empty()) detail += "; then PING failed: " + failure;
  if (median > 50'000)
    r.warn("latency", detail,
           "every acquisition, hand-off and renewal costs a round trip: leases and waits must be far longer than this");
  else
    r.ok("latency", detail);
}

void read_info(client& c, context& cx) {
  std::error_code ec;
  auto rep = c.command({"INFO"}, ec);  // the default sections: server, memory, persistence, replication, ...
  if (ec || !rep.is_string()) {
    cx.info_error = error_text(rep, ec);
    return;
  }
  cx.info = parse_info(rep.str);
  if (auto v = cx.info->get("redis_version")) cx.version = parse_version(*v);
}

const std::string info_advice = "grant +info to this user, or run the doctor as an administrator, to check this";

void check_version(context& cx, report& r) {
  if (!cx.info) {
    r.warn("version", "cannot read INFO: " + cx.info_error, info_advice);
    return;
  }
  auto text = cx.info->get("redis_version");
  if (!text || !cx.version) {
    r.warn("version", "INFO has no readable redis_version", "");
    return;
  }
  int major = (*cx.version)[0];
  std::string v = "Redis " + std::string(*text);
  if (major < 6) {
    r.fail("version", v + ": redlease needs Redis 6.0 or newer (ACL users, the scripts' commands)",
           "upgrade the server to Redis 6.2 or 7.x");
  } else if (major == 6) {
    r.ok("version", v + " (>= 6.0); 7.x would add ACL DRYRUN (the permission check without touching keys) and "
                        "the `#!lua flags=allow-oom` release (at maxmemory, Redis 6 refuses a release that only "
                        "decrements a re-entered hold)");
  } else {
    r.ok("version", v + " (>= 7: ACL DRYRUN, and the release script declares `#!lua flags=allow-oom`)");
  }
}

void check_topology(context& cx, report& r) {
  if (!cx.info) {
    r.warn("topology", "cannot read INFO replication: " + cx.info_error, info_advice);
    return;
  }
  std::string role(cx.info->get("role").value_or("?"));
  long long replicas = cx.info->integer("connected_slaves").value_or(0);
  if (role == "slave" || role == "replica") {
    std::string master = std::string(cx.info->get("master_host").value_or("?")) + ":" +
                         std::string(cx.info->get("master_port").value_or("?"));
    r.warn("topology",
           "a replica of " + master + " (link " + std::string(cx.info->get("master_link_status").value_or("?")) +
               "): locks taken here fail with READONLY, and reads lag the master",
           "locks must be taken on the master: point --redis (and your services) at " + master);
    return;
  }
  std::string detail = role + ", " + std::to_string(replicas) + (replicas == 1 ? " replica" : " replicas");
  for (long long i = 0; i < replicas && i < 8; ++i) {
    auto s = cx.info->get("slave" + std::to_string(i));
    if (!s) continue;
    auto f = info_subfields(*s);
    detail += i == 0 ? " (" : ", ";
    detail += (f.count("ip") ? f["ip"] : "?") + ":" + (f.count("port") ? f["port"] : "?") + " " +
              (f.count("state") ? f["state"] : "?") + (f.count("lag") ? " lag " + f["lag"] + " s" : "");
    if (i + 1 == replicas || i == 7) detail += ")";
  }
  if (auto mode = cx.info->get("redis_mode"); mode && *mode == "cluster")
    detail += "; cluster mode: redlease talks to one node and does not follow MOVED redirections";
  if (auto mode = cx.info->get("redis_mode"); mode && *mode == "cluster")
    r.warn("topology", detail, "use a standalone server (or a dedicated shard's master) for locks");
  else
    r.ok("topology", detail);
}

// ---- 2. permissions ---------------------------------------------------------------------------

// How much a step matters: the locks do not work without a required one; without a wake-up step
// they work, but waiters are not woken by a release's message, and without a fencing step they work
// but fenced acquisitions fail (a WARN that says what happens instead); the client copes without an
// optional one (noted on an OK line).
enum class need { required, wakeup, fencing, optional };

struct step {
  step(std::string w, std::vector<std::string> a, need l = need::required, std::string wo = {}, std::string g = {})
      : what(std::move(w)), args(std::move(a)), level(l), without(std::move(wo)), grant(std::move(g)) {}
  std::string what;               // "acquire", "release", ...
  std::vector<std::string> args;  // the command as the library sends it
  need level;
  std::string without;            // wake-up and fencing steps: what happens when it is refused
  std::string grant;              // what the advice grants when it is refused (default: by level)
};

struct step_result {
  std::string what;
  bool ok = true;
  need level = need::required;
  std::string text;
  std::string without;
  std::string grant;
};

const char* const fake_sha = "0123456789abcdef0123456789abcdef01234567";

// What the library does without the channel permissions (src/lua/*.lua, src/lock/lock_service.cpp).
const std::string without_publish =
    "a release skips its unlock message (its PUBLISH runs through pcall), so it wakes no waiter";
const std::string without_subscribe =
    "waiters, refused SUBSCRIBE, poll with backoff (10 ms doubling to 500 ms) instead of being woken at once";
const std::string without_handoff =
    "a fair release skips its hand-off message (PUBLISH through pcall): the head of the queue finds the lock "
    "free at its next call instead of at once";
// Without the token key (or TIME, which starts a name's first token): src/lua/include/make_fencing_token.lua.
const std::string without_fencing =
    "fenced acquisitions (lock_and_get_token) fail with no_permission, and `redlease run` takes the lock "
    "without a token (no REDLEASE_FENCING_TOKEN)";

const std::string request_id = "00112233445566778899aabbccddeeff";

// The layouts of src/lock/protocols.cpp (numkeys, KEYS, ARGV): channels are arguments, a fenced
// acquisition declares its token key.
std::vector<step> lock_steps(const context& cx, const client& c) {
  const std::string& n = cx.sample;
  const auto l = describe(lock_kind::reentrant, n);
  const std::string& ch = l.channel();
  std::string latch = l.latch_key(request_id);
  std::string field = c.id() + ":1";
  return {
      {"acquire", {"EVALSHA", fake_sha, "1", n, "5000", field}},
      {"release", {"EVALSHA", fake_sha, "2", n, latch, ch, "0", "30000", field, "1", "0", "30000"}},
      {"renew", {"EVALSHA", fake_sha, "1", n, "30000", "h", field}},
      {"force-unlock", {"EVALSHA", fake_sha, "1", n, ch, "0"}},
      {"fencing", {"EVALSHA", fake_sha, "2", n, l.token_key, "5000", field}, need::fencing,
       without_fencing},
      {"publish", {"PUBLISH", ch, "0"}, need::wakeup, without_publish},
      {"wait", {"SUBSCRIBE", ch}, need::wakeup, without_subscribe},
  };
}

std::vector<step> mutex_steps(const context& cx) {
  const std::string& n = cx.mutex_sample;
  const auto l = describe(lock_kind::mutex, n);
  const std::string& ch = l.channel();
  std::string token = "00112233445566778899aabbccddeeff";
  return {
      {"acquire", {"EVALSHA", fake_sha, "1", n, token, "5000"}},
      {"release", {"EVALSHA", fake_sha, "1", n, ch, token}},
      {"renew", {"EVALSHA", fake_sha, "1", n, "30000", "s", token}},
      {"force-unlock", {"EVALSHA", fake_sha, "1", n, ch, "0"}},
      {"fencing", {"EVALSHA", fake_sha, "2", n, l.token_key, token, "5000"}, need::fencing,
       without_fencing},
      {"publish", {"PUBLISH", ch, "0"}, need::wakeup, without_publish},
      {"wait", {"SUBSCRIBE", ch}, need::wakeup, without_subscribe},
  };
}

// The fair lock on the reentrant lock's sample name: its queue and deadlines are keys of every call,
// a release hands the lock over on the head waiter's own channel `<channel>:<owner field>`.
std::vector<step> fair_steps(const context& cx, const client& c) {
  const std::string& n = cx.sample;
  const auto l = describe(lock_kind::fair, n);
  const std::string& ch = l.channel();
  const std::string &queue = l.queue_key, &deadlines = l.deadlines_key;
  std::string field = c.id() + ":1";
  std::string now = "1700000000000";
  return {
      {"acquire", {"EVALSHA", fake_sha, "3", n, queue, deadlines, "5000", field, "30000", now, "1", ch, "publish"}},
      {"release",
       {"EVALSHA", fake_sha, "4", n, queue, deadlines, l.latch_key(request_id), ch, "publish", "30000", field, "1", "0",
        "30000", now}},
      {"give-up", {"EVALSHA", fake_sha, "3", n, queue, deadlines, field, "30000", ch, "publish"}},
      {"renew", {"EVALSHA", fake_sha, "1", n, "30000", "h", field}},
      {"force-unlock", {"EVALSHA", fake_sha, "3", n, queue, deadlines, ch, "0", now}},
      {"fencing",
       {"EVALSHA", fake_sha, "4", n, queue, deadlines, l.token_key, "5000", field, "30000", now,
        "1", ch, "publish"},
       need::fencing, without_fencing},
      {"hand-off", {"PUBLISH", l.waiter_channel(field), "0"}, need::wakeup, without_handoff},
      {"wait", {"SUBSCRIBE", l.waiter_channel(field)}, need::wakeup, without_subscribe},
  };
}

// The read-write lock on the reentrant lock's sample name: a read acquisition also writes its
// timeout key `{name}:<owner field>:rwlock_timeout:<n>` from inside the script (not among its KEYS,
// so only this step shows a refusal of it).
std::vector<step> rw_steps(const context& cx, const client& c) {
  const std::string& n = cx.sample;
  const auto l = describe(lock_kind::read, n);
  const std::string& ch = l.channel();
  std::string field = c.id() + ":1";
  std::string timeout_key = l.read_timeout_key(field, 1);
  return {
      {"acquire", {"EVALSHA", fake_sha, "1", n, "5000", field}},
      {"read timeout key", {"SET", timeout_key, "1", "PX", "5000"}},
      {"release", {"EVALSHA", fake_sha, "2", n, l.latch_key(request_id), ch, "publish", field, "1", "0", "30000"}},
      {"renew", {"EVALSHA", fake_sha, "1", n, "30000", "r", field}},
      {"force-unlock", {"EVALSHA", fake_sha, "1", n, ch, "1"}},
      {"fencing", {"EVALSHA", fake_sha, "2", n, l.token_key, "5000", field}, need::fencing,
       without_fencing},
      {"publish", {"PUBLISH", ch, "0"}, need::wakeup, without_publish},
      {"wait", {"SUBSCRIBE", ch}, need::wakeup, without_subscribe},
  };
}

const char* const keyspace_query_step =
    "CONFIG GET notify-keyspace-events (mutex waiters then do without keyspace events)";

std::vector<step> other_steps(const context& cx, const client& c) {
  const std::string& n = cx.sample;
  const auto l = describe(lock_kind::reentrant, n);
  std::vector<step> s = {
      {"HGET", {"HGET", n, c.id() + ":1"}},
      {"GET", {"GET", n}},
      {"EXISTS", {"EXISTS", n}},
      {"PTTL", {"PTTL", n}},
      // The fallback when EVALSHA answers NOSCRIPT (a fresh or restarted server), with the largest key
      // set (a release's: the name and the latch).
      {"EVAL (after NOSCRIPT)",
       {"EVAL", "return 0", "2", n, l.latch_key("0"), l.channel(), "0", "30000", "f", "1", "0", "30000"}},
      {"PING", {"PING"}},
      {"TIME (the first fencing token of a name)", {"TIME"}, need::fencing, without_fencing, "the TIME command"},
      {"CLIENT SETNAME (connections are then unnamed in CLIENT LIST)", {"CLIENT", "SETNAME", "redlease"},
       need::optional},
      {keyspace_query_step, {"CONFIG", "GET", "notify-keyspace-events"}, need::optional},
  };
  if (cx.cfg.database != 0) s.push_back({"SELECT", {"SELECT", std::to_string(cx.cfg.database)}});
  return s;
}

// ACL DRYRUN of each step; empty text when permitted.
std::vector<step_result> dryrun(client& c, const context& cx, const std::vector<step>& steps) {
  std::vector<step_result> out;
  for (const auto& s : steps) {
    std::vector<std::string> cmd{"ACL", "DRYRUN", cx.checked};
    cmd.insert(cmd.end(), s.args.begin(), s.args.end());
    std::error_code ec;
    auto rep = c.command(cmd, ec);
    step_result res{s.what, true, s.level, {}, s.without, s.grant};
    if (ec) {
      res.ok = false;
      res.text = error_text(rep, ec);
    } else if (!(rep.is_string() && rep.str == "OK")) {
      res.ok = false;
      res.text = rep.str;  // "This user has no permissions to access the '...' key"
    }
    out.push_back(std::move(res));
  }
  return out;
}

// Refused steps, those refused for the same reason named together: "acquire, release: <reason>".
using refusals = std::vector<std::pair<std::string, std::string>>;  // reason → steps

void add_refusal(refusals& into, const std::string& reason, const std::string& what) {
  auto it = std::find_if(into.begin(), into.end(), [&](const auto& p) { return p.first == reason; });
  if (it == into.end()) into.emplace_back(reason, what);
  else it->second += ", " + what;
}

std::string join(const refusals& v) {
  std::string out;
  for (const auto& [reason, steps] : v) out += (out.empty() ? "" : "; ") + steps + ": " + reason;
  return out;
}

// "<works>, but <effect>; <effect>": what the refused wake-up (or fencing, or kind) steps cost.
std::string wakeup_effects(const std::vector<std::string>& effects, const std::string& works = "locks work") {
  std::string out = works + ", but ";
  for (std::size_t i = 0; i < effects.size(); ++i) out += (i ? "; " : "") + effects[i];
  return out;
}

void add_effect(std::vector<std::string>& effects, const std::string& effect) {
  if (!effect.empty() && std::find(effects.begin(), effects.end(), effect) == effects.end()) effects.push_back(effect);
}

const std::string wakeup_what = "the channels waiters listen on, to wake them at once";

const std::string fencing_what = "the fencing token keys";

// One check's line from its steps' results. A refused required step is a FAIL, or with `kind` (a
// kind the deployment may not use: "the fair lock") a WARN naming it; refused wake-up and fencing
// steps are a WARN saying what the locks do without them; refused optional ones are noted.
void report_group(const context& cx, report& r, const std::string& check, const std::string& sample,
                  const std::vector<step_result>& res, const std::string& ok_detail, const std::string& kind = {}) {
  refusals required, degraded, optional;
  std::vector<std::string> effects, grants;
  std::string advice, other_advice;
  for (const auto& x : res) {
    if (x.ok) continue;
    const bool partial = x.level == need::wakeup || x.level == need::fencing;
    add_refusal(x.level == need::required ? required : partial ? degraded : optional, x.text, x.what);
    if (x.level == need::required && advice.empty()) advice = advice_for(cx, {}, x.text, cx.checked);
    if (!partial) continue;
    add_effect(effects, x.without);
    if (contains(x.text, "no permissions") || contains(x.text, "NOPERM"))
      add_effect(grants, !x.grant.empty() ? x.grant : x.level == need::wakeup ? wakeup_what : fencing_what);
    else if (other_advice.empty())
      other_advice = advice_for(cx, {}, x.text, cx.checked);  // PUBLISH renamed away: "not found"
  }
  std::string degraded_advice = other_advice;
  if (!grants.empty()) {
    std::string what;
    for (std::size_t i = 0; i < grants.size(); ++i) what += (i ? " and " : "") + grants[i];
    degraded_advice += (degraded_advice.empty() ? "" : "; ") + acl_advice(cx, cx.checked, what);
  }
  if (!required.empty()) {
    std::string detail = "refused on " + sample + ": " + join(required);
    if (!degraded.empty()) detail += "; also refused (locks work without them): " + join(degraded);
    if (!optional.empty()) detail += "; optional, refused: " + join(optional);
    if (kind.empty())
      r.fail(check, detail, advice);
    else
      r.warn(check, kind + " cannot be used by user " + cx.checked + " (the other kinds are not affected): " + detail,
             advice);
  } else if (!degraded.empty()) {
    std::string detail = "refused on " + sample + ": " + join(degraded) + "; " + wakeup_effects(effects);
    if (!optional.empty()) detail += "; optional, refused: " + join(optional);
    r.warn(check, detail, degraded_advice);
  } else if (!optional.empty()) {
    r.ok(check, ok_detail + "; optional, refused: " + join(optional));
  } else {
    r.ok(check, ok_detail);
  }
}

// notify-keyspace-events as the library reads it: mutex waiters also listen on the key's keyspace
// channel when K and (A or g and x) are on.
bool keyspace_on(std::string_view flags) {
  bool k = contains(flags, "K");
  bool all = contains(flags, "A");
  return k && (all || (contains(flags, "g") && contains(flags, "x")));
}

// True if the server sends the keyspace events mutex waiters listen for (as far as `c` can read it).
bool server_keyspace_on(client& c) {
  std::error_code ec;
  auto ks = c.command({"CONFIG", "GET", "notify-keyspace-events"}, ec);
  return !ec && ks.is_array() && ks.elements.size() == 2 && keyspace_on(ks.elements[1].str);
}

std::string keyspace_channel(const context& cx) {
  return describe(lock_kind::mutex, cx.mutex_sample).keyspace_channel(cx.cfg.database);
}

const std::string without_keyspace =
    "keyspace events are on, and mutex waiters, refused SUBSCRIBE on the keyspace channel, poll with backoff "
    "(10 ms doubling to 500 ms) instead of being woken at once";

void check_permissions_dryrun(client& c, context& cx, report& r) {
  auto lr = dryrun(c, cx, lock_steps(cx, c));
  auto mr = dryrun(c, cx, mutex_steps(cx));
  auto fr = dryrun(c, cx, fair_steps(cx, c));
  auto rr = dryrun(c, cx, rw_steps(cx, c));
  auto orr = dryrun(c, cx, other_steps(cx, c));
  // Mutex waiters also subscribe to the key's keyspace channel when the server sends keyspace events
  // and the user may read that it does (the library asks; refused, it does without).
  auto query = std::find_if(orr.begin(), orr.end(), [](const step_result& x) { return x.what == keyspace_query_step; });
  if (query != orr.end() && query->ok && server_keyspace_on(c)) {
    std::string ch = keyspace_channel(cx);
    auto kr = dryrun(c, cx, {{"wait on " + ch, {"SUBSCRIBE", ch}, need::wakeup, without_keyspace}});
    cx.keyspace = !kr.front().ok;  // the advice then grants it too
    mr.push_back(std::move(kr.front()));
  }
  report_group(cx, r, "acl.lock", cx.sample, lr,
               "reentrant lock on " + cx.sample +
                   ": acquire, release, renew, force-unlock, fencing, publish, wait permitted");
  report_group(cx, r, "acl.mutex", cx.mutex_sample, mr,
               "mutex on " + cx.mutex_sample + ": acquire, release, renew, force-unlock, fencing, publish, wait permitted");
  // The other kinds: a deployment that does not use them works without them (WARN, naming the kind).
  report_group(cx, r, "acl.fair", cx.sample, fr,
               "fair lock on " + cx.sample +
                   ": acquire, release, give-up, renew, force-unlock, fencing, hand-off, wait permitted",
               "the fair lock");
  report_group(cx, r, "acl.rwlock", cx.sample, rr,
               "read-write lock on " + cx.sample +
                   ": acquire, read timeout key, release, renew, force-unlock, fencing, publish, wait permitted",
               "the read-write lock");
  report_group(cx, r, "acl.commands", cx.sample, orr, "HGET, GET, EXISTS, PTTL, EVAL, PING, TIME permitted");
}

// The live probe: take and release each kind of lock on the sample name with a short fixed lease,
// publish on and subscribe to its channels, with the library itself. The library's errors carry
// the server's words (in what() and last_error_text()), and their typed cause picks the advice.
void check_permissions_live(client& c, context& cx, report& r) {
  const std::string lock_ch = describe(lock_kind::reentrant, cx.sample).channel();
  const std::string mutex_ch = describe(lock_kind::mutex, cx.mutex_sample).channel();
  // One step: false (and a FAIL line with the library's message) if it throws.
  auto step = [&](const std::string& check, const std::string& doing, const std::function<void()>& run) {
    try {
      run();
      return true;
    } catch (const redlease::error& e) {
      r.fail(check, doing + ": " + e.what(), advice_for(cx, e.code(), last_error_text()));
      return false;
    } catch (const std::exception& e) {
      r.fail(check, doing + ": " + e.what(), "");
      return false;
    }
  };
  auto busy = [&](const std::string& check, const std::string& name) {
    r.warn(check, name + " is held by someone else: not probed", "run again, or give another pattern");
  };
  // A release that failed leaves the probe's lock held for up to its 5 s lease: force-unlock it
  // (it needs only the name and the channel argument), and say whether that worked.
  auto clean_up = [&](detail::lock_handle& l, const std::string& name, const std::string& check) {
    std::error_code ec;
    bool gone = l.force_unlock(ec);
    if (ec)
      r.warn(check + ".cleanup", "force-unlock " + name + " failed too: " + ec.message() +
                                     (last_error_text().empty() ? "" : " (" + last_error_text() + ")") +
                                     "; it stays held until its 5 s lease ends",
             "");
    else
      r.ok(check + ".cleanup", std::string(gone ? "force-unlocked " : "nothing left of ") + name +
                                   " after the failed release");
  };
  // Takes and releases one kind of lock on `name` (`what`: "the reentrant lock"; `keys`: what its
  // release touches), with a client per kind: nothing one probe leaves behind affects the other.
  auto take_and_release = [&](const std::string& check, const std::string& name, const std::string& what,
                              const std::string& keys, const std::function<detail::lock_handle(client&)>& make) {
    client own{cx.cfg};
    detail::lock_handle l = make(own);
    bool held = false;
    if (step(check + ".acquire", "acquire " + name, [&] { held = l.try_lock(2s, 5s); })) {
      if (!held) busy(check + ".acquire", name);
      else r.ok(check + ".acquire", "took " + what + " " + name + " (5 s lease)");
    }
    if (held) {
      if (step(check + ".release", "release " + name + " (" + keys + ")", [&] { l.unlock(); }))
        r.ok(check + ".release", "released it");
      else
        clean_up(l, name, check + ".release");
    }
  };
  take_and_release("probe.lock", cx.sample, "the reentrant lock",
                   "keys " + cx.sample + ", " + describe(lock_kind::reentrant, cx.sample).latch_key("<request>"),
                   [&](client& own) { return detail::lock_handle(own.lock(cx.sample)); });
  take_and_release("probe.mutex", cx.mutex_sample, "the mutex", "key " + cx.mutex_sample,
                   [&](client& own) { return detail::lock_handle(own.mutex(cx.mutex_sample)); });
  // A refused wake-up step (no channel permission, or the command renamed away) is a WARN: the
  // library does without it. Anything else (a timeout, a lost connection) is a FAIL.
  auto refused = [](std::error_code ec) { return ec == errc::no_permission || ec == errc::unknown_command; };
  auto wakeup_advice = [&](std::error_code ec, const std::string& text) {
    return ec == errc::no_permission ? acl_advice(cx, cx.user, wakeup_what) : advice_for(cx, ec, text);
  };
  // Publishing: what the release scripts and force-unlock do (a "0" on a channel nobody uses). The
  // scripts skip a refused PUBLISH, so the releases above pass without it: it is checked here.
  {
    std::string failed;
    bool all_refused = true;
    std::error_code first;
    for (const auto& ch : {lock_ch, mutex_ch}) {
      std::error_code ec;
      auto rep = c.command({"PUBLISH", ch, "0"}, ec);
      if (!ec) continue;
      failed += (failed.empty() ? "" : "; ") + ch + ": " + error_text(rep, ec);
      all_refused = all_refused && refused(ec);
      if (!first) first = ec;
    }
    if (failed.empty())
      r.ok("probe.publish", "published on " + lock_ch + " and " + mutex_ch);
    else if (all_refused)
      r.warn("probe.publish", "cannot publish on " + failed + "; " + wakeup_effects({without_publish}),
             wakeup_advice(first, failed));
    else
      r.fail("probe.publish", "cannot publish on " + failed, advice_for(cx, first, failed));
  }
  // Waiting: the channels at once (the keyspace channel too when mutex waiters would use it). A
  // refused SUBSCRIBE fails at once, with the server's words.
  std::vector<std::pair<std::string, std::string>> channels{{lock_ch, without_subscribe},
                                                            {mutex_ch, without_subscribe}};
  if (server_keyspace_on(c)) channels.emplace_back(keyspace_channel(cx), without_keyspace);
  auto sub = [&c](std::string ch) -> std::pair<std::error_code, std::string> {
    std::error_code ec;
    auto s = c.subscribe(ch, [](std::string_view, std::string_view) {}, ec);
    return {ec, ec ? last_error_text() : std::string{}};  // this thread's words
  };
  std::vector<std::future<std::pair<std::error_code, std::string>>> pending;
  for (const auto& ch : channels) pending.push_back(std::async(std::launch::async, sub, ch.first));
  std::string failed, names;
  std::vector<std::string> effects;
  bool all_refused = true;
  std::error_code first;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    auto [ec, words] = pending[i].get();
    names += (names.empty() ? "" : (i + 1 == channels.size() ? " and " : ", ")) + channels[i].first;
    if (!ec) continue;
    failed += (failed.empty() ? "" : "; ") + channels[i].first + ": " + (words.empty() ? ec.message() : words);
    all_refused = all_refused && refused(ec);
    if (!first) first = ec;
    add_effect(effects, channels[i].second);
    if (i == 2 && ec == errc::no_permission) cx.keyspace = true;  // the advice grants it too
  }
  if (failed.empty())
    r.ok("probe.wait", "subscribed to " + names);
  else if (all_refused)
    r.warn("probe.wait", "cannot subscribe to " + failed + "; " + wakeup_effects(effects),
           wakeup_advice(first, failed));
  else
    r.fail("probe.wait", "cannot subscribe to " + failed, advice_for(cx, first, failed));

  // Fencing and the other kinds are not taken live: a token key lives 7 days, and their keys are
  // more than the sample names the probe may touch. Commands that write nothing show whether the
  // user may use those keys (EXISTS: read access) and channels (PUBLISH "0", on channels nobody
  // uses), and TIME (a name's first token) is called as is. A refusal is a WARN saying what it breaks.
  struct item {
    std::string what;
    std::vector<std::string> args;
    std::string without;
  };
  const std::string& n = cx.sample;
  const std::string field = "redlease-doctor:1";  // an owner field no client has
  const auto reentrant = describe(lock_kind::reentrant, n), fair = describe(lock_kind::fair, n),
             mutex = describe(lock_kind::mutex, cx.mutex_sample), rw = describe(lock_kind::read, n);
  const std::string rw_timeout = rw.read_timeout_key(field, 1);
  const std::string no_fair = "the fair lock cannot be used (its scripts declare the queue and the deadlines)";
  const std::string no_read = "read locks cannot be taken (the acquire script writes the timeout key)";
  struct kind_items {
    std::string check;
    bool a_kind;  // a refused key breaks a kind (the others work), not a feature of every kind
    std::vector<item> items;
  };
  const std::vector<kind_items> kinds = {
      {"probe.fencing", false,
       {{"token key " + reentrant.token_key, {"EXISTS", reentrant.token_key}, without_fencing},
        {"token key " + mutex.token_key, {"EXISTS", mutex.token_key}, without_fencing},
        {"token key " + rw.token_key, {"EXISTS", rw.token_key}, without_fencing},
        {"TIME", {"TIME"}, without_fencing}}},
      {"probe.fair", true,
       {{"queue " + fair.queue_key, {"EXISTS", fair.queue_key}, no_fair},
        {"deadlines " + fair.deadlines_key, {"EXISTS", fair.deadlines_key}, no_fair},
        {"hand-off channel " + fair.waiter_channel(field), {"PUBLISH", fair.waiter_channel(field), "0"},
         without_handoff}}},
      {"probe.rwlock", true,
       {{"read timeout key " + rw_timeout, {"EXISTS", rw_timeout}, no_read},
        {"channel " + rw.channel(), {"PUBLISH", rw.channel(), "0"},
         without_publish}}},
  };
  for (const auto& [check, a_kind, items] : kinds) {
    std::string failed, names, fix;
    std::vector<std::string> effects;
    bool kind_broken = false;
    for (const auto& it : items) {
      names += (names.empty() ? "" : ", ") + it.what;
      std::error_code ec;
      auto rep = c.command(it.args, ec);
      if (!ec) continue;
      std::string text = error_text(rep, ec);
      failed += (failed.empty() ? "" : "; ") + it.what + ": " + text;
      add_effect(effects, it.without);
      kind_broken = kind_broken || (a_kind && it.args.front() == "EXISTS");
      if (fix.empty())
        fix = ec == errc::no_permission ? acl_advice(cx, cx.user, "the keys and channels of every kind")
                                        : advice_for(cx, ec, text);
    }
    if (failed.empty())
      r.ok(check, "may use " + names);
    else
      r.warn(check, "refused: " + failed + "; " + wakeup_effects(effects, kind_broken ? "the other kinds work" : "locks work"),
             fix);
  }
}

void check_permissions(client& c, context& cx, report& r) {
  std::string reason;
  if (cx.version && (*cx.version)[0] < 7) {
    reason = "Redis " + std::to_string((*cx.version)[0]) + "." + std::to_string((*cx.version)[1]) +
             " has no ACL DRYRUN";
  } else {
    // Any answer but an error means DRYRUN works (the user may still lack PING: checked below).
    std::error_code ec;
    auto rep = c.command({"ACL", "DRYRUN", cx.checked, "PING"}, ec);
    std::string text = error_text(rep, ec);
    if (ec && contains(text, "User '") && contains(text, "not found")) {
      r.fail("acl", "ACL DRYRUN " + cx.checked + ": " + text, "name an existing user (ACL USERS) with --acl-user");
      return;
    }
    if (ec) reason = "ACL DRYRUN refused: " + text;
  }
  if (reason.empty()) {
    r.ok("acl", "user " + cx.checked + ", sample names " + cx.sample +
                    (cx.mutex_sample != cx.sample ? " and " + cx.mutex_sample : "") + " (pattern " + cx.opts.pattern +
                    "), checked with ACL DRYRUN");
    check_permissions_dryrun(c, cx, r);
    if (cx.opts.probe) check_permissions_live(c, cx, r);
  } else {
    std::string other = cx.checked != cx.user ? " (not user " + cx.checked + ": only DRYRUN checks another user)" : "";
    r.warn("acl", reason + "; probing live instead: taking and releasing " + cx.sample +
                      (cx.mutex_sample != cx.sample ? " and " + cx.mutex_sample : "") + " (pattern " + cx.opts.pattern +
                      ") as user " + cx.user + other,
           "for a check that touches no key (Redis 7), connect as a user allowed ACL DRYRUN and name the user "
           "to check: --acl-user " + cx.checked);
    check_permissions_live(c, cx, r);
  }
}

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

trial_grant try_a_grant(client& c, const context& cx) {
  trial_grant t;
  auto l = c.lock(cx.sample);
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
std::string user_of(std::string_view script) {
  auto starts = [&](std::string_view p) { return script.substr(0, p.size()) == p; };
  if (starts("fair_")) return "the fair lock";
  if (starts("rw_")) return "the read-write lock";
  if (starts("stock_")) return "segmented stock";
  if (script.find("fenced") != std::string_view::npos) return "fencing tokens";
  return "the reentrant lock and mutex";
}

std::vector<script_command> script_commands() {
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

int doctor(const doctor_options& o) {
  report r(o.json);
  context cx;
  cx.opts = o;
  cx.cfg = make_config(o.url);
  cx.cfg.request_timeout = 2000ms;  // a doctor answers promptly
  cx.cfg.on_error = [](const background_error&) {};  // the checks report what matters
  cx.sample = sample_of(o.pattern);
  cx.mutex_sample = sample_of(o.pattern, "redlease-doctor-mutex");
  client c{cx.cfg};
  if (!check_connectivity(c, cx, r)) {
    r.summary();
    return exit_code::unavailable;
  }
  cx.checked = o.acl_user.empty() ? cx.user : o.acl_user;
  if (!cx.ping_refused) check_latency(c, r);
  read_info(c, cx);
  check_version(cx, r);
  check_topology(cx, r);
  check_permissions(c, cx, r);
  check_eviction(c, cx, r);
  check_memory(c, cx, r);
  check_persistence(c, cx, r);
  check_commands(c, r);
  check_clock(c, r);
  r.summary();
  return r.fails() ? exit_code::config_problem : exit_code::ok;
}

}  // namespace

void setup_doctor(CLI::App& app, action_t& action) {
  auto [cmd, o] = add_command<doctor_options>(
      app, action, "doctor", "Check a Redis deployment for locks: one line per check, OK/WARN/FAIL",
      "Checks connectivity, version, topology, the user's permissions for every command and script the\n"
      "locks send on a sample name matched by NAME-PATTERN (ACL DRYRUN; a live lock/unlock where DRYRUN is\n"
      "refused), eviction policy, memory, persistence, min-replicas-to-write, renamed commands, clock.\n"
      "As an administrator, --acl-user USER checks another user's permissions without touching any key.\n"
      "Exit status: 0 nothing FAILs; 78 some check FAILs; 69 Redis unreachable, authentication or TLS\n"
      "failed, or the server refuses the connection (only the connectivity line is printed); 64 usage;\n"
      "70 an unexpected error.",
      doctor);
  cmd->add_option("pattern", o->pattern, "The lock names to check, as an ACL key pattern (default: *)");
  add_connection_flags(cmd, o->url);
  cmd->add_flag("--json", o->json, "One JSON object per check per line (check, status, detail, advice)");
  cmd->add_option("--acl-user", o->acl_user,
                  "Check this ACL user's permissions with ACL DRYRUN (connect as an administrator); default: the "
                  "connected user");
  cmd->add_flag("--probe", o->probe,
                "Also take and release a lock and a mutex on the sample name when ACL DRYRUN is available");
}

}  // namespace redlease::cli
