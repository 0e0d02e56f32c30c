// SPDX-License-Identifier: MIT
// `redlease latch NAME set COUNT [--ttl D] | down | wait [--wait D] | status [--json]`: Redisson's
// RCountDownLatch (redlease::count_down_latch) from the shell.
#include <iostream>
#include <string>

#include "count_command.hpp"

namespace redlease::cli {
namespace {

constexpr count_action latch_actions[] = {
    {.name = "set", .number = true, .number_required = true, .ttl = true},
    {.name = "down"},
    {.name = "wait", .wait = true},
    {.name = "status", .json = true},
};
constexpr count_command latch_command{
    lock_kind::latch, "latch", "count-down latch", "count",
    [](client& c, const std::string& name) { return c.count_down_latch(name).count(); }, nullptr, latch_actions,
    "A count-down latch (Redisson's RCountDownLatch): set, count down, wait for zero; status",
    "NAME ACTION [COUNT], ACTION one of\n"
    "  set COUNT [--ttl D]  set the count if none is set (exit 75 if one is)\n"
    "  down                 count down by one; at zero the latch is deleted and every waiter released\n"
    "  wait [--wait D]      wait until the count is zero, or the latch is deleted or expires (default:\n"
    "                       forever)\n"
    "  status [--json]      the count, the key's TTL and the waiters\n"
    "A latch that does not exist reads 0: `wait` passes at once, `down` leaves it at 0.\n"
    "Exit status: 0 done (`wait`: the count is zero); 75 `set`: a count is set already (not\n"
    "changed), `wait`: the count did not reach zero within --wait;"};

int latch_main(client& c, const count_options& o) {
  auto l = c.count_down_latch(o.name);
  if (o.action == "set") {
    const long long n = count_operand(o, 0, 1, "COUNT");
    const auto ttl = count_ttl(o);
    return report_set(c, latch_command, o.name, n, ttl ? l.try_set_count(n, *ttl) : l.try_set_count(n));
  }
  if (o.action == "down") {
    l.count_down();
    return exit_code::ok;
  }
  return wait_action(
      latch_command, o, [&] { l.await(); }, [&](std::chrono::milliseconds d) { return l.await_for(d); },
      quoted(o.name) + " did not reach zero");
}

}  // namespace

void setup_latch(CLI::App& app, action_t& action) { add_count_command(app, action, latch_command, latch_main); }

}  // namespace redlease::cli
