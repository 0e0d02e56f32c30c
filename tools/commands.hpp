// SPDX-License-Identifier: MIT
// The subcommands of the redlease CLI. Each setup_* adds its subcommand to the app and, when that
// subcommand is chosen, stores in `action` what main() runs; the action returns the exit status.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redlease/config.hpp"
#include "redlease/reply.hpp"

namespace redlease {
class client;
}

namespace redlease::cli {

/// Exit statuses (sysexits-style where one fits; documented in --help and the README).
namespace exit_code {
inline constexpr int ok = 0;
inline constexpr int usage = 64;          // EX_USAGE
inline constexpr int data_error = 65;     // EX_DATAERR: the key holds something that is not such a lock
inline constexpr int unavailable = 69;    // EX_UNAVAILABLE: Redis unreachable, authentication or TLS failed
inline constexpr int software = 70;       // EX_SOFTWARE: an unexpected error
inline constexpr int not_acquired = 75;   // EX_TEMPFAIL: lock not acquired within --wait (or a wait
                                          // that gave up: errc::attempts_exhausted)
inline constexpr int lock_lost = 76;      // lock lost while the child ran
inline constexpr int config_problem = 78; // EX_CONFIG: the server's settings refuse what redlease needs (ACL
                                          // permission, renamed or disabled command); `doctor` found a FAIL
inline constexpr int release_failed = 79; // the command succeeded but the lock could not be released: it
                                          // stays held until its lease ends, and the next run waits
inline constexpr int cannot_exec = 126;   // command found but not executable
inline constexpr int not_found = 127;     // command not found
}  // namespace exit_code

using action_t = std::function<int()>;

/// The exit status for an error: usage (64), data (65, a key that is not such a lock), unavailable
/// (69: unreachable, authentication, a port that is not Redis, every TLS failure, or a server that
/// refuses for now: maxclients, OOM, NOREPLICAS, LOADING, BUSY), not acquired (75: a wait that gave
/// up, `errc::attempts_exhausted`, like a --wait that ran out), configuration (78: ACL permission,
/// renamed command), else software (70).
int exit_code_for(const std::error_code& c);

/// `text`, a library message, in the CLI's terms: the `config::tls` fields it names become the flags
/// that set them (`config::tls.ca_file` is `--cacert`, `verify_name` `--sni`, `cert_file` and
/// `key_file` `--cert` and `--key`).
std::string cli_words(std::string text);
/// Throws a redlease::error for a command about the lock `name` that failed with `ec` and the
/// server's `words`: `lock "NAME": <words>: <what ec means>`, naming the lock, not the call.
[[noreturn]] void throw_for_lock(std::error_code ec, std::string_view name, const std::string& words);
/// `c.command(args)` for the lock `name`; a failure is thrown by throw_for_lock().
reply lock_command(client& c, std::string_view name, std::initializer_list<std::string_view> args);
/// As above.
reply lock_command(client& c, std::string_view name, const std::vector<std::string>& args);
/// The default URL: $REDLEASE_URL, else redis://127.0.0.1:6379.
std::string default_url();
/// The config for `url`; $REDLEASE_PASSWORD, when set, supplies the password (so it never shows in
/// `ps`), and the TLS flags of add_tls_flags() (or $REDLEASE_CACERT, $REDLEASE_CERT, $REDLEASE_KEY)
/// the TLS files. Throws redlease::error on a bad URL. With `warn`, the --insecure warning goes to
/// it (a JSON event) instead of a plain line on stderr, and the library's own reports are left to
/// the caller's `on_error`.
config make_config(const std::string& url, const std::function<void(const std::string&)>& warn = {});
/// Adds --cacert, --cert, --key, --sni, --tls and --insecure to a subcommand that connects. One
/// subcommand runs per process, so the values live in one place that make_config() reads.
void add_tls_flags(CLI::App* cmd);
/// The flags of a subcommand that connects: `--redis` (into `url`, described by `description`), then
/// the TLS flags (add_tls_flags). Returns the `--redis` option.
CLI::Option* add_connection_flags(CLI::App* cmd, std::string& url,
                                  const std::string& description = "Redis URL (default: $REDLEASE_URL or "
                                                                   "redis://127.0.0.1:6379)");
/// Adds the subcommand `name` with its help `description` and `footer` (its exit statuses), whose
/// options fill an `Options` shared with its action: when the subcommand is chosen, `action` runs
/// `run(options)`. Returns the subcommand and the options, for the caller to add the flags.
template <class Options, class Run>
std::pair<CLI::App*, std::shared_ptr<Options>> add_command(CLI::App& app, action_t& action, const std::string& name,
                                                           const std::string& description, const std::string& footer,
                                                           Run run) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(name, description);
  cmd->footer(footer);
  cmd->callback([&action, o, run] { action = [o, run] { return run(*o); }; });
  return {cmd, o};
}
/// The TLS flags given on this command line, to pass on to a child `redlease` process.
std::vector<std::string> tls_flag_args();
/// Parses "250ms", "5s", "2m", "1h" (also "1.5s"); a bare "0" is zero. Empty on a malformed or
/// negative value.
std::optional<std::chrono::milliseconds> parse_duration(const std::string& text);
/// Appends `s` as the body of a JSON string: quotes, backslashes and control characters escaped,
/// valid UTF-8 kept, other bytes as \u00XX, so every line printed is valid JSON.
void json_escape_to(std::string& out, std::string_view s);
/// A lock name for messages and tables: printable ASCII as is, anything else (and `\`, `"`, and
/// with `escape_space` the space) as \xNN.
std::string printable(std::string_view s, bool escape_space = false);
/// A CLI11 validator for durations: "invalid duration '5x' (use e.g. ...)", "invalid duration '-5s':
/// negative durations are not allowed".
CLI::Validator duration_validator();
/// A CLI11 validator for lock names: the empty name is refused (a usage error, 64) by every
/// subcommand that takes names, as the library refuses it.
CLI::Validator lock_name_validator();

/// Parses the command line into `app`, whose callbacks store in `action` what to run, and runs it;
/// returns the exit status. A parse error: CLI11's message and 64 (0 for --help and --version). No
/// action chosen: the help and 64. CLI11's messages start with `<program>: ` too. An exception from
/// the action: `<program>: <what>` on stderr (cli_words) and exit_code_for() of a redlease::error, 70
/// for any other.
int parse_and_run(CLI::App& app, int argc, char** argv, action_t& action, std::string_view program);

void setup_run(CLI::App& app, action_t& action);
void setup_status(CLI::App& app, action_t& action);
void setup_unlock(CLI::App& app, action_t& action);
void setup_demo(CLI::App& app, action_t& action);
void setup_doctor(CLI::App& app, action_t& action);
/// `redlease semaphore NAME ACTION` (cli_semaphore.cpp).
void setup_semaphore(CLI::App& app, action_t& action);
/// `redlease latch NAME ACTION` (cli_latch.cpp).
void setup_latch(CLI::App& app, action_t& action);
/// `redlease top [PATTERN]` (cli_top.cpp).
void setup_top(CLI::App& app, action_t& action);
/// `redlease exporter [PATTERN] --listen ADDR` (cli_exporter_setup.cpp; the exporter itself,
/// cli_exporter.cpp, only with Prometheus support).
void setup_exporter(CLI::App& app, action_t& action);

}  // namespace redlease::cli
