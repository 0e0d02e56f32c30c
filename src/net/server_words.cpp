// SPDX-License-Identifier: MIT
// What the server's words mean: error reply texts mapped to codes, and addresses for messages.
// Free of I/O, so that the fuzz targets of the reply parsers link it alone.
#include <string_view>

#include "net/connection.hpp"
#include "redlease/error.hpp"

namespace redlease::detail {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

std::string to_string(const node_address& a) {
  bool v6 = a.host.find(':') != std::string::npos;
  return (v6 ? "[" + a.host + "]" : a.host) + ":" + std::to_string(a.port);
}

std::string_view without_script_location(std::string_view t) {
  // Redis 6: "ERR Error running script (call to f_<sha>): @user_script:18: WRONGTYPE Operation ...".
  if (starts_with(t, "ERR Error running script (call to ")) {
    constexpr std::string_view at_line = "): @user_script:";
    if (auto at = t.find(at_line); at != std::string_view::npos) {
      auto rest = t.substr(at + at_line.size());  // "18: WRONGTYPE ..."
      auto digits = rest.find_first_not_of("0123456789");
      if (digits != 0 && digits != std::string_view::npos && rest.substr(digits, 2) == ": ")
        t = rest.substr(digits + 2);
    }
  }
  // Redis 7: "<the command's words> script: <sha or function>, on @user_script:18."
  auto at = t.rfind(" script: ");
  if (at == std::string_view::npos) return t;
  auto tail = t.substr(at + 9);
  auto on = tail.find(", on @");
  if (on == std::string_view::npos || tail.empty() || tail.back() != '.') return t;
  auto where = tail.substr(on + 6, tail.size() - on - 7);  // "user_script:18"
  auto colon = where.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == where.size() || tail.substr(0, on).find(' ') != std::string_view::npos)
    return t;
  for (char ch : where.substr(colon + 1))
    if (ch < '0' || ch > '9') return t;
  return t.substr(0, at);
}

std::error_code error_from_reply_text(std::string_view t) {
  auto has = [&](std::string_view p) { return t.find(p) != std::string_view::npos; };
  if (starts_with(t, "WRONGTYPE")) return errc::wrong_type;
  if (starts_with(t, "NOAUTH") || starts_with(t, "WRONGPASS") || starts_with(t, "ERR invalid password") ||
      starts_with(t, "ERR AUTH") || starts_with(t, "ERR Client sent AUTH"))
    return errc::auth_failed;
  if (starts_with(t, "NOPERM")) return errc::no_permission;
  if (starts_with(t, "OOM")) return errc::server_oom;
  if (starts_with(t, "NOREPLICAS")) return errc::no_replicas;
  if (starts_with(t, "LOADING")) return errc::server_loading;
  if (starts_with(t, "BUSY") || starts_with(t, "MASTERDOWN") || starts_with(t, "TRYAGAIN")) return errc::server_busy;
  if (starts_with(t, "READONLY")) return errc::server_readonly;
  if (starts_with(t, "ERR unknown command") || starts_with(t, "ERR unknown subcommand")) return errc::unknown_command;
  if (starts_with(t, "ERR max number of clients reached")) return errc::server_full;
  // Inside a script, Redis 7 reports the failing command's error, or its own words for an ACL
  // refusal, followed by the script's location.
  if (has("WRONGTYPE")) return errc::wrong_type;
  if (has("OOM command not allowed")) return errc::server_oom;
  if (has("NOREPLICAS")) return errc::no_replicas;
  if (has("READONLY")) return errc::server_readonly;
  if (has("can't access at least one of the keys") || has("can't publish to the channel") ||
      has("no permissions to") || has("can't run this command"))
    return errc::no_permission;
  return errc::server_error;
}

}  // namespace redlease::detail
