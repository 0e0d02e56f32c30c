// SPDX-License-Identifier: MIT
// `redlease semaphore NAME set N [--ttl D] | add N | drain | acquire [N] [--wait D] | release [N] |
// status [--json]`: Redisson's RSemaphore (redlease::semaphore) from the shell.
#include <climits>
#include <iostream>
#include <string>

#include "count_command.hpp"
#include "status_format.hpp"

namespace redlease::cli {
namespace {

constexpr count_action semaphore_actions[] = {
    {.name = "set", .number = true, .number_required = true, .ttl = true},
    {.name = "add", .number = true, .number_required = true},
    {.name = "drain"},
    {.name = "acquire", .number = true, .wait = true},
    {.name = "release", .number = true},
    {.name = "status", .json = true},
};
// The permits out of a permit-expirable semaphore (Redisson's RPermitExpirableSemaphore): a zset
// beside the count, which `run --semaphore` uses. Empty when the name has none.
std::string permits_zset(client& c, const std::string& name) {
  for (const auto& k : describe(lock_kind::permit_semaphore, name).keys)
    if (k.type == "zset" && lock_command(c, name, {"TYPE", k.key}).str == "zset") return k.key;
  return {};
}

// With permits out, the count is read as that kind reads it: expired permits are given back first.
long long available(client& c, const std::string& name) {
  return permits_zset(c, name).empty() ? c.semaphore(name).available_permits()
                                       : c.permit_semaphore(name).available_permits();
}

// The permits out, their ids and leases (the first 100, nearest expiry first).
count_details permits_out(client& c, const std::string& name) {
  if (permits_zset(c, name).empty()) return {};
  auto s = c.permit_semaphore(name);
  const long long out = s.acquired_permits();
  const auto list = s.permits(100);
  count_details d;
  d.json = ",\"acquired\":" + std::to_string(out) + ",\"permits_out\":[";
  d.rows.push_back({"PERMIT", "LEASE"});
  for (std::size_t i = 0; i < list.size(); ++i) {
    d.json += (i ? ",{\"id\":" : "{\"id\":") + json_string(list[i].id) + ",\"lease_ms\":" +
              std::to_string(list[i].lease_ms) + "}";
    d.rows.push_back({printable(list[i].id, true), list[i].lease_ms < 0 ? "no lease" : format_ttl(list[i].lease_ms)});
  }
  d.json += "]";
  if (out > static_cast<long long>(list.size())) d.rows.push_back({"... (" + std::to_string(out) + " in all)", ""});
  return d;
}

constexpr count_command semaphore_command{
    lock_kind::semaphore, "semaphore", "semaphore", "permits",
    available, permits_out, semaphore_actions,
    "A semaphore (Redisson's RSemaphore): set, add, drain, acquire, release permits; status",
    "NAME ACTION [N], ACTION one of\n"
    "  set N [--ttl D]         set N permits if the semaphore does not exist yet (exit 75 if it does)\n"
    "  add N                   add N permits (N may be negative: add -2); prints the new count\n"
    "  drain                   take every available permit; prints how many there were\n"
    "  acquire [N] [--wait D]  take N permits (default 1), waiting for them (default: forever)\n"
    "  release [N]             give N permits (default 1) back, waking the waiters they suffice for\n"
    "  status [--json]         the available permits, the key's TTL and the waiters\n"
    "Permits belong to nobody: a process that dies holding permits does not give them back (set a\n"
    "--ttl to bound that).\n"
    "Exit status: 0 done; 75 `set`: the semaphore exists already (not changed), `acquire`: not\n"
    "acquired within --wait;"};

int semaphore_main(client& c, const count_options& o) {
  auto s = c.semaphore(o.name);
  if (o.action == "set") {
    const long long n = count_operand(o, 0, 0, "N");
    return report_set(c, semaphore_command, o.name, n, s.try_set_permits(n, count_ttl(o)));
  }
  if (o.action == "add") {
    std::cout << s.add_permits(count_operand(o, 0, LLONG_MIN, "N")) << "\n";
  } else if (o.action == "drain") {
    std::cout << s.drain_permits() << "\n";
  } else if (o.action == "acquire") {
    const long long n = count_operand(o, 1, 1, "N");
    return wait_action(
        semaphore_command, o, [&] { s.acquire(n); }, [&](std::chrono::milliseconds d) { return s.try_acquire(n, d); },
        std::to_string(n) + (n == 1 ? " permit" : " permits") + " of " + quoted(o.name) + " not acquired");
  } else {
    s.release(count_operand(o, 1, 1, "N"));
  }
  return exit_code::ok;
}

}  // namespace

void setup_semaphore(CLI::App& app, action_t& action) { add_count_command(app, action, semaphore_command, semaphore_main); }

}  // namespace redlease::cli
