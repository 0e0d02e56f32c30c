// SPDX-License-Identifier: MIT
// `redlease semaphore NAME set N [--ttl D] | add N | drain | acquire [N] [--wait D] | release [N] |
// status [--json]`: Redisson's RSemaphore (redlease::semaphore) from the shell.
#include <climits>
#include <iostream>
#include <string>

#include "count_command.hpp"

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
constexpr count_command semaphore_command{
    lock_kind::semaphore, "semaphore", "semaphore", "permits",
    [](client& c, const std::string& name) { return c.semaphore(name).available_permits(); }, semaphore_actions,
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
