// SPDX-License-Identifier: MIT
// What `redlease semaphore` and `redlease latch` share (cli_semaphore.cpp, cli_latch.cpp): the
// command line NAME ACTION [NUMBER], the checks of which action takes which option, the mapping of a
// key that holds no count to exit 65, and the `status` action's output.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "redlease/redlease.hpp"

namespace redlease::cli {

/// The options of one `redlease semaphore` or `redlease latch` command line.
struct count_options {
  std::string url = default_url();
  std::string name;
  std::string action;
  std::vector<std::string> operand;  // the action's NUMBER, when given
  std::string ttl, wait;             // durations as given; empty: not given
  bool json = false;
};

/// One action of a counting subcommand, and what it takes.
struct count_action {
  /// Its name on the command line ("set", "add", ...).
  std::string_view name;
  /// Whether it takes a NUMBER (`number_required`: it must be given).
  bool number = false;
  bool number_required = false;
  /// Whether it takes --ttl, --wait and --json.
  bool ttl = false, wait = false, json = false;
};

/// What the `status` action shows beyond the number, its TTL and its waiters (a permit-expirable
/// semaphore's permits out): fields for its JSON object, and rows (a header first) for a second table.
struct count_details {
  std::string json;  // ",\"field\":value..." to end the object with
  std::vector<std::vector<std::string>> rows;
};

/// One counting subcommand: its name ("semaphore"), the thing it counts in messages ("semaphore",
/// "count-down latch"), its actions, its one-line help and the start of its help's footer (the
/// actions, its own exit statuses; those of every counting subcommand follow: 65, 64, 69, 78, 70).
struct count_command {
  lock_kind kind;  // its layout: the key's channel
  std::string_view name;
  std::string_view thing;
  std::string_view value_name;  // what the key's number is: "permits", "count"
  long long (*read)(client&, const std::string& name);  // the number (`status`, and `set` when it exists)
  count_details (*details)(client&, const std::string& name);  // more for `status`; nullptr: nothing
  std::span<const count_action> actions;
  std::string_view description;
  std::string_view footer;
};

/// Adds the subcommand `cmd` (NAME ACTION [NUMBER], --ttl, --wait, --json and the connection
/// flags) with its help. When it is chosen, the options are checked
/// against the action (a usage error, 64, otherwise), a client connects, and `run` gets it and the
/// options and returns the exit status (`status` is answered here); a key that holds no count makes
/// it 65 (on_count_key).
void add_count_command(CLI::App& app, action_t& action, const count_command& cmd,
                       std::function<int(client&, const count_options&)> run);

/// `"NAME"` for messages (printable).
std::string quoted(const std::string& name);

/// The action's NUMBER as a whole number, or `fallback` when it was not given; a usage error (64)
/// when it is not a whole number or is below `min`.
long long count_operand(const count_options& o, long long fallback, long long min, std::string_view what);
/// --ttl (empty when not given; a usage error for 0, which is no TTL).
std::optional<std::chrono::milliseconds> count_ttl(const count_options& o);

/// Runs `call`, a library call on the key `o.name` of `cmd`. A key that holds something that is not
/// a count (another type, or a string that is not a whole number) becomes errc::wrong_type, exit 65,
/// with a message naming the key and what it holds; other errors pass unchanged.
void on_count_key(client& c, const count_command& cmd, const std::string& name, const std::function<void()>& call);

/// The `set` action's outcome: `set` (the key had no count) prints `<name> "NAME" set (<value_name>
/// N)` and returns 0; else what the key holds (`cmd.read`; a key that holds no count is then
/// reported, 65) is said on stderr, and it returns 75.
int report_set(client& c, const count_command& cmd, const std::string& name, long long n, bool set);

/// The waiting actions (`acquire`, `wait`): `forever()` without --wait, else `within(--wait)`, and
/// when that answers false, `<not_done> within <--wait>` on stderr and 75; else 0.
int wait_action(const count_command& cmd, const count_options& o, const std::function<void()>& forever,
                const std::function<bool(std::chrono::milliseconds)>& within, const std::string& not_done);


}  // namespace redlease::cli
