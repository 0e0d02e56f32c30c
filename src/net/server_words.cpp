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
