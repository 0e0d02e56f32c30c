// SPDX-License-Identifier: MIT
// What the checks of `redlease doctor` share: its options, the report (one line per check, OK /
// WARN / FAIL with a fix), the context the checks fill in and read, the advice for a refusal, and
// the checks each file provides (cli_doctor.cpp: connectivity to topology and the command itself;
// doctor_permissions.cpp: the ACL checks; doctor_server.cpp: eviction to clock; doctor_cluster.cpp:
// a cluster's own settings).
#pragma once

#include <array>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cluster_nodes.hpp"
#include "commands.hpp"
#include "info_parser.hpp"
#include "redlease/redlease.hpp"

namespace redlease::cli::checkup {

struct doctor_options {
  std::string url = default_url();
  std::string pattern = "*";
  std::string acl_user;  // check this ACL user's permissions with ACL DRYRUN (default: the connected one)
  bool json = false;
  bool probe = false;
};

enum class level { ok, warn, fail };

inline const char* level_name(level l) { return l == level::ok ? "OK" : l == level::warn ? "WARN" : "FAIL"; }

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
  /// The node the next findings are about (a cluster's master), or "" for the deployment as a
  /// whole: a line's detail then starts with it, and a JSON object has it as `node`.
  void set_node(std::string node) { node_ = std::move(node); }

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
      if (!node_.empty()) {
        line += "\",\"node\":\"";
        json_escape_to(line, node_);
      }
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
      line += printable_text(node_.empty() ? f.detail : node_ + ": " + f.detail);
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
  std::string node_;
};

struct context {
  doctor_options opts;
  config cfg;
  std::string user;         // connected as: ACL WHOAMI, else the URL's user, else "default"
  std::string checked;      // whose permissions ACL DRYRUN checks: --acl-user, else `user`
  std::string sample;       // a name matched by the pattern (the reentrant lock's probe)
  std::string mutex_sample; // another (the mutex's live probe), unless the pattern has no '*'
  bool ping_refused = false;
  bool keyspace = false;    // mutex waiters also subscribe to the keyspace channel (advice adds it)
  bool cluster = false;     // the URL names a cluster, whose masters are checked one by one
  client* keyed = nullptr;  // on a cluster: the client that routes by key (the live probe's locks)
  std::optional<std::array<int, 3>> version;
  std::optional<info_fields> info;  // INFO (its default sections), when permitted
  std::string info_error;           // why not
};

bool contains(std::string_view hay, std::string_view needle);
/// A lock name matched by the glob `pattern` (`*` → `filler`).
std::string sample_of(std::string_view pattern, std::string_view filler = "redlease-doctor");
/// The ACL SETUSER line that grants `user` every kind's keys and channels for `pattern`.
std::string acl_setuser_line(const std::string& user, const std::string& pattern, int database, bool keyspace = false);
/// "grant user WHO WHAT; in redis-cli: ACL SETUSER ...".
std::string acl_advice(const context& cx, const std::string& who, std::string_view what);
/// What to do about a refusal, by its code or the server's text (empty when nothing specific).
std::string advice_for(const context& cx, std::error_code ec, std::string_view text, const std::string& user = {});
/// The server's text of an error reply, or the library's message.
std::string error_text(const reply& r, const std::error_code& ec);
std::string fmt_us(long long us);
std::string fmt_bytes(long long b);
/// What a release does without the channel permission (publish), and a waiter (subscribe).
extern const std::string without_publish;
extern const std::string without_subscribe;
/// "<works>, but <effect>; <effect>": what the refused wake-up (or fencing, or kind) steps cost.
std::string wakeup_effects(const std::vector<std::string>& effects, const std::string& works = "locks work");
/// Adds `effect` to `effects` once.
void add_effect(std::vector<std::string>& effects, const std::string& effect);
/// The advice of a check that INFO was refused to.
extern const std::string info_advice;

/// `CONFIG GET name` on `c`'s server; empty with the reason in `why` when refused or unknown.
std::optional<std::string> config_get(client& c, std::string_view name, std::string& why);

void check_permissions(client& c, context& cx, report& r);
void check_eviction(client& c, context& cx, report& r);
void check_memory(client& c, context& cx, report& r);
void check_persistence(client& c, context& cx, report& r);
void check_commands(client& c, report& r);
void check_clock(client& c, report& r);
/// The cluster checks (doctor_cluster.cpp), on `masters` (as `layout.masters`; nullptr for a master
/// that cannot be reached): full coverage, replicas, sharded pub/sub.
void check_cluster_settings(const cluster_layout& layout, const std::vector<client*>& masters, report& r);

}  // namespace redlease::cli::checkup
