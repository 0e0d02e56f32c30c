// SPDX-License-Identifier: MIT
// The command line and output that `redlease semaphore` and `redlease latch` share (count_command.hpp).
#include "count_command.hpp"

#include <algorithm>
#include <cctype>
#include <iostream>
#include <memory>

#include "cluster_view.hpp"
#include "info_parser.hpp"
#include "status_format.hpp"

namespace redlease::cli {
namespace {

[[noreturn]] void usage(const count_options& o, const count_command& cmd, const std::string& words) {
  throw error(errc::invalid_argument, std::string(cmd.name) + " " + o.action + ": " + words, error::whole_message);
}

const count_action& find_action(const count_options& o, const count_command& cmd) {
  auto it = std::find_if(cmd.actions.begin(), cmd.actions.end(), [&](const count_action& a) { return a.name == o.action; });
  if (it == cmd.actions.end()) usage(o, cmd, "unknown action");  // IsMember refused it already
  return *it;
}

// Each option only where its action uses it: a --ttl given to `add` would otherwise be ignored silently.
void check_action(const count_options& o, const count_command& cmd) {
  const count_action& a = find_action(o, cmd);
  if (!a.number && !o.operand.empty()) usage(o, cmd, "takes no number (got '" + printable(o.operand.front()) + "')");
  if (a.number_required && o.operand.empty()) usage(o, cmd, "a number is required");
  if (!a.ttl && !o.ttl.empty()) usage(o, cmd, "--ttl is for `set` only");
  if (!a.wait && !o.wait.empty()) usage(o, cmd, "--wait is for `" + std::string(cmd.name == "latch" ? "wait" : "acquire") + "` only");
  if (!a.json && o.json) usage(o, cmd, "--json is for `status` only");
}

// The `status` action: the number, the key's TTL and the subscribers of its channel
// (`describe(cmd.kind, name)`; on a cluster, counted on every node, as `redlease status` counts
// them), as a table, or one JSON object with `json`.
int print_count_status(client& c, const count_command& cmd, const std::string& name, bool json) {
  const long long value = cmd.read(c, name);
  const std::string channel = describe(cmd.kind, name).channel();
  auto t = lock_command(c, name, {"PTTL", name});
  const long long ttl = t.is_integer() ? t.integer : -2;
  auto cv = read_cluster_view(c);
  const cluster_master* home = cv ? cv->layout.master_of(slot_of(c, name)) : nullptr;
  const long long waiters = count_subscribers(c, name, {channel}, cv.get(), home).front();
  const count_details more = cmd.details != nullptr ? cmd.details(c, name) : count_details{};
  if (json) {
    std::cout << "{\"" << cmd.name << "\":" << json_string(name) << ",\"exists\":" << (ttl == -2 ? "false" : "true")
              << ",\"" << cmd.value_name << "\":" << value << ",\"ttl_ms\":" << ttl << ",\"waiters\":" << waiters
              << ",\"channel\":" << json_string(channel) << more.json << "}\n";
    return exit_code::ok;
  }
  auto upper = [](std::string_view w) {
    std::string out(w);
    for (char& ch : out) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return out;
  };
  print_rows({{upper(cmd.name), upper(cmd.value_name), "TTL", "WAITERS"},
              {printable(name, true), ttl == -2 ? "0 (no key)" : std::to_string(value), format_ttl(ttl),
               std::to_string(waiters)}});
  if (!more.rows.empty()) {
    std::cout << "\n";
    print_rows(more.rows);
  }
  return exit_code::ok;
}

}  // namespace

void add_count_command(CLI::App& app, action_t& action, const count_command& cmd,
                       std::function<int(client&, const count_options&)> run) {
  const std::string footer =
      std::string(cmd.footer) + "\n65 the key holds something that is not a " + std::string(cmd.thing) +
      " (another type, or a string that\nis not a whole number); 64 usage (an empty name, an unknown action, an option the action\n"
      "does not take); 69 Redis unavailable (unreachable, authentication, TLS, no Sentinel, not Redis);\n"
      "78 an ACL permission the user lacks or a renamed command; 70 an unexpected error.";
  auto [sub, o] = add_command<count_options>(app, action, std::string(cmd.name), std::string(cmd.description), footer,
                                             [cmd, run = std::move(run)](const count_options& opts) {
                                               check_action(opts, cmd);
                                               client c{make_config(opts.url)};
                                               c.ping();
                                               int status = exit_code::ok;
                                               on_count_key(c, cmd, opts.name, [&] {
                                                 status = opts.action == "status"
                                                              ? print_count_status(c, cmd, opts.name, opts.json)
                                                              : run(c, opts);
                                               });
                                               return status;
                                             });
  std::vector<std::string> names;
  for (const auto& a : cmd.actions) names.emplace_back(a.name);
  sub->add_option("name", o->name, "The " + std::string(cmd.thing) + "'s name (its key)")
      ->required()
      ->check(lock_name_validator());
  sub->add_option("action", o->action, "What to do (see below)")->required()->check(CLI::IsMember(names));
  sub->add_option("number", o->operand, "The action's number")->expected(0, 1);
  add_connection_flags(sub, o->url);
  sub->add_option("--ttl", o->ttl, "set: the key expires after this long (default: never)")->check(duration_validator());
  sub->add_option("--wait", o->wait, "How long to wait (default: forever; 0: check once)")->check(duration_validator());
  sub->add_flag("--json", o->json, "status: one JSON object");
}

std::string quoted(const std::string& name) { return "\"" + printable(name) + "\""; }

long long count_operand(const count_options& o, long long fallback, long long min, std::string_view what) {
  if (o.operand.empty()) return fallback;
  const std::string& text = o.operand.front();
  const auto parsed = parse_integer(text);
  if (!parsed)
    throw error(errc::invalid_argument, std::string(what) + " must be a whole number (got '" + printable(text) + "')",
                error::whole_message);
  const long long n = *parsed;
  if (n < min)
    throw error(errc::invalid_argument, std::string(what) + " must be at least " + std::to_string(min) + " (got " +
                                            std::to_string(n) + ")",
                error::whole_message);
  return n;
}

std::optional<std::chrono::milliseconds> count_ttl(const count_options& o) {
  if (o.ttl.empty()) return std::nullopt;
  auto d = parse_duration(o.ttl);
  if (!d || d->count() <= 0)
    throw error(errc::invalid_argument, "--ttl must be longer than 0 (leave it out for no expiry)", error::whole_message);
  return d;
}

void on_count_key(client& c, const count_command& cmd, const std::string& name, const std::function<void()>& call) {
  const std::string thing(cmd.thing);
  try {
    call();
  } catch (const redlease::error& e) {
    const std::string key = "\"" + printable(name) + "\"";
    if (e.code() == errc::wrong_type) {
      std::error_code ec;
      auto type = c.command({"TYPE", name}, ec);
      throw error(errc::wrong_type, key + " is not a " + thing + ": the key holds a " + (ec ? "value of another type" : type.str),
                  error::whole_message);
    }
    // GET of a string that is no number (bad_reply), or INCRBY/DECR/the scripts refusing one.
    const std::string words = std::string(e.what()) + " " + last_error_text();
    if (e.code() == errc::bad_reply || (e.code() == errc::server_error && words.find("not an integer") != std::string::npos))
      throw error(errc::wrong_type, key + " is not a " + thing + ": the key holds a string that is not a whole number",
                  error::whole_message);
    throw;
  }
}

int report_set(client& c, const count_command& cmd, const std::string& name, long long n, bool set) {
  if (set) {
    std::cout << cmd.name << " " << quoted(name) << " set (" << cmd.value_name << " " << n << ")\n";
    return exit_code::ok;
  }
  const long long have = cmd.read(c, name);
  std::cerr << "redlease " << cmd.name << ": " << quoted(name) << " exists already (" << cmd.value_name << " " << have
            << "); not changed\n";
  return exit_code::not_acquired;
}

int wait_action(const count_command& cmd, const count_options& o, const std::function<void()>& forever,
                const std::function<bool(std::chrono::milliseconds)>& within, const std::string& not_done) {
  if (o.wait.empty()) {
    forever();
  } else if (!within(*parse_duration(o.wait))) {
    std::cerr << "redlease " << cmd.name << ": " << not_done << " within " << o.wait << "\n";
    return exit_code::not_acquired;
  }
  return exit_code::ok;
}

}  // namespace redlease::cli
