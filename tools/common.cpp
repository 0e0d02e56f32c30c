// SPDX-License-Identifier: MIT
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "commands.hpp"
#include "redlease/client.hpp"
#include "redlease/error.hpp"

namespace redlease::cli {

// JSON string body: quotes, backslashes and control characters escaped; valid UTF-8 kept; any byte
// that is not part of valid UTF-8 becomes \u00XX (its Latin-1 reading), so the line is valid JSON.
void json_escape_to(std::string& out, std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  auto esc = [&](unsigned char c) {
    out += "\\u00";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default: esc(c);
      }
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      std::size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
      bool ok = n > 0 && i + n <= s.size();
      for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      if (ok && n == 3) {
        auto c1 = static_cast<unsigned char>(s[i + 1]);
        ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);  // overlong, surrogates
      } else if (ok && n == 4) {
        auto c1 = static_cast<unsigned char>(s[i + 1]);
        ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
      }
      if (ok) {
        out.append(s.substr(i, n));
        i += n;
      } else {
        esc(c);
        ++i;
      }
    }
  }
}

std::string printable(std::string_view s, bool escape_space) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"' && !(escape_space && c == ' ')) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string cli_words(std::string text) {
  // Longest first: "config::tls.cert_file and key_file" before "config::tls.cert_file".
  static const std::pair<std::string_view, std::string_view> words[] = {
      {"config::tls.cert_file and key_file", "--cert and --key"},
      {"a CA, certificate or key file of config::tls", "a file of --cacert, --cert or --key"},
      {"config::tls.ca_file", "--cacert"},
      {"config::tls.cert_file", "--cert"},
      {"config::tls.key_file", "--key"},
      {"config::tls.verify_name", "--sni"},
  };
  for (const auto& [library, cli] : words) {
    for (auto at = text.find(library); at != std::string::npos; at = text.find(library, at + cli.size()))
      text.replace(at, library.size(), cli);
  }
  // Every subcommand's first call is the library's ping: its C++ name says nothing to a user, and
  // when the reason names the address ("127.0.0.1:1: connection refused") the URL before it says it
  // twice.
  constexpr std::string_view ping = "client::ping ";
  if (text.starts_with(ping)) {
    text.erase(0, ping.size());
    const auto url_end = text.find(": ");
    const auto reason_end = url_end == std::string::npos ? std::string::npos : text.find(": ", url_end + 2);
    if (reason_end != std::string::npos) {
      const std::string_view url = std::string_view(text).substr(0, url_end);
      const std::string_view where = std::string_view(text).substr(url_end + 2, reason_end - url_end - 2);
      if (where.find(' ') == std::string_view::npos && url.find(where) != std::string_view::npos)
        text.erase(0, url_end + 2);
    }
  }
  return text;
}

void throw_for_lock(std::error_code ec, std::string_view name, const std::string& words) {
  throw error(ec, "lock \"" + printable(name) + "\"" + (words.empty() ? "" : ": " + words));
}

std::string default_url() {
  const char* env = std::getenv("REDLEASE_URL");
  return env && *env ? env : "redis://127.0.0.1:6379";
}

namespace {

struct tls_flags {
  std::string cacert, cert, key, sni;
  std::string sentinel_password;  // never passed on to child processes (tls_flag_args)
  bool tls = false;
  bool insecure = false;
};

tls_flags& given_tls_flags() {
  static tls_flags f;
  return f;
}

// The flag's value, else the environment variable's.
std::string flag_or_env(const std::string& flag, const char* env) {
  if (!flag.empty()) return flag;
  const char* v = std::getenv(env);
  return v != nullptr ? v : "";
}

}  // namespace

config make_config(const std::string& url, const std::function<void(const std::string&)>& warn) {
  auto c = config::from_url(url);
  if (const char* pw = std::getenv("REDLEASE_PASSWORD"); pw && *pw) c.password = pw;
  const tls_flags& f = given_tls_flags();
  c.sentinel.password = flag_or_env(f.sentinel_password, "REDLEASE_SENTINEL_PASSWORD");
  c.client_name = "redlease-cli";
  // A command makes a handful of blocking calls (or holds one lock while its child runs): a lane
  // would be one more connection and handshake for nothing. `bench` turns it back on.
  c.sync_lane = false;
  c.tls.enabled = c.tls.enabled || f.tls;
  c.tls.ca_file = flag_or_env(f.cacert, "REDLEASE_CACERT");
  c.tls.cert_file = flag_or_env(f.cert, "REDLEASE_CERT");
  c.tls.key_file = flag_or_env(f.key, "REDLEASE_KEY");
  // Like redis-cli's --sni, and more: the name is also the one the certificate must carry.
  c.tls.sni = f.sni;
  c.tls.verify_name = f.sni;
  c.tls.insecure = f.insecure;
  // The same files serve the Sentinels (rediss-sentinel:// turns TLS on for both).
  bool sentinel_tls = c.sentinel.tls.enabled;
  c.sentinel.tls = c.tls;
  c.sentinel.tls.enabled = sentinel_tls || (f.tls && !c.sentinel.nodes.empty());
  if (c.tls.enabled && c.tls.insecure) {
    static bool warned = false;
    const char* text = "--insecure: the server's TLS certificate is not verified";
    if (warn) {
      if (!std::exchange(warned, true)) warn(text);
      return c;  // the caller's on_error reports the rest
    }
    if (!std::exchange(warned, true)) std::cerr << "redlease: warning: " << text << "\n";
  }
  // The library's own line, in the CLI's words (--cacert, not config::tls.ca_file). With --insecure
  // the library warns through on_error too: once is enough.
  c.on_error = [insecure = c.tls.enabled && c.tls.insecure](const background_error& e) {
    if (insecure && e.source == "tls") return;
    std::string line("redlease: ");
    line.append(e.source).append(": ").append(cli_words(e.message.empty() ? e.code.message() : e.message));
    std::cerr << line.append("\n");
  };
  return c;
}

void add_tls_flags(CLI::App* cmd) {
  tls_flags& f = given_tls_flags();
  cmd->add_option("--cacert", f.cacert,
                  "TLS: PEM file of the CA that signed the server's certificate (default: $REDLEASE_CACERT, "
                  "else the system store)");
  cmd->add_option("--cert", f.cert,
                  "TLS: client certificate, PEM, for servers that require one (default: $REDLEASE_CERT)");
  cmd->add_option("--key", f.key, "TLS: the client certificate's private key, PEM (default: $REDLEASE_KEY)");
  cmd->add_option("--sni", f.sni,
                  "TLS: server name sent in the handshake and verified in the certificate instead of the host");
  cmd->add_flag("--tls", f.tls, "Use TLS with a redis:// URL too (rediss:// means TLS)");
  cmd->add_flag("--insecure", f.insecure, "TLS without verifying the server's certificate (tests only; warns)");
  cmd->add_option("--sentinel-password", f.sentinel_password,
                  "The Sentinels' own password, with a redis-sentinel:// URL (default: $REDLEASE_SENTINEL_PASSWORD; "
                  "the variable keeps it out of ps)");
}

CLI::Option* add_connection_flags(CLI::App* cmd, std::string& url, const std::string& description) {
  auto* opt = cmd->add_option("--redis", url, description);
  add_tls_flags(cmd);
  return opt;
}

std::vector<std::string> tls_flag_args() {
  const tls_flags& f = given_tls_flags();
  std::vector<std::string> out;
  auto opt = [&](const char* name, const std::string& v) {
    if (v.empty()) return;
    out.emplace_back(name);
    out.push_back(v);
  };
  opt("--cacert", f.cacert);
  opt("--cert", f.cert);
  opt("--key", f.key);
  opt("--sni", f.sni);
  if (f.tls) out.emplace_back("--tls");
  if (f.insecure) out.emplace_back("--insecure");
  return out;
}

std::optional<std::chrono::milliseconds> parse_duration(const std::string& text) {
  if (text == "0") return std::chrono::milliseconds(0);
  std::size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0 || i == text.size()) return std::nullopt;
  std::string number = text.substr(0, i), unit = text.substr(i);
  if (number.find('.') != number.rfind('.') || number == ".") return std::nullopt;
  double v = std::strtod(number.c_str(), nullptr);
  double factor;
  if (unit == "ms") factor = 1;
  else if (unit == "s") factor = 1000;
  else if (unit == "m") factor = 60'000;
  else if (unit == "h") factor = 3'600'000;
  else return std::nullopt;
  double msv = v * factor;
  if (!std::isfinite(msv) || msv < 0 || msv > 1e12) return std::nullopt;
  return std::chrono::milliseconds(static_cast<long long>(std::llround(msv)));
}

CLI::Validator duration_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (parse_duration(s)) return {};
        if (!s.empty() && s.front() == '-') return "invalid duration '" + s + "': negative durations are not allowed";
        return "invalid duration '" + s + "' (use e.g. 250ms, 5s, 2m, 1h)";
      },
      "DURATION");
}

CLI::Validator lock_name_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string { return s.empty() ? "a lock name must not be empty" : std::string{}; }, "");
}

int exit_code_for(const std::error_code& c) {
  if (c == errc::wrong_type) return exit_code::data_error;
  if (c == errc::invalid_url || c == errc::tls_not_supported || c == errc::invalid_argument) return exit_code::usage;
  if (c == errc::no_permission || c == errc::unknown_command) return exit_code::config_problem;
  // A backoff wait whose max_attempts ran out gave up waiting, as a --wait that runs out does: the
  // lock is held by someone else, nothing is broken. The CLI sets no backoff strategy today, so this
  // only keeps a future one from exiting 70.
  if (c == errc::attempts_exhausted) return exit_code::not_acquired;
  // Every TLS failure is a connection that cannot be made as configured: unavailable, like auth.
  if (c.category() == error_category() && c.value() >= static_cast<int>(errc::tls_handshake_failed) &&
      c.value() <= static_cast<int>(errc::tls_bad_files))
    return exit_code::unavailable;
  if (c == errc::connect_failed || c == errc::connect_timeout || c == errc::auth_failed ||
      c == errc::select_failed || c == errc::request_timeout || c == errc::connection_lost ||
      c == errc::protocol_error || c == errc::server_full || c == errc::server_oom || c == errc::no_replicas ||
      c == errc::server_busy || c == errc::server_loading || c == errc::server_readonly ||
      c == errc::no_sentinel || c == errc::not_replicated)
    return exit_code::unavailable;
  return exit_code::software;
}

int parse_and_run(CLI::App& app, int argc, char** argv, action_t& action, std::string_view program) {
  // CLI11's messages ("--wait: invalid duration ...") get the program's name, as every other error.
  app.failure_message([prefix = std::string(program) + ": "](const CLI::App* a, const CLI::Error& e) {
    return prefix + CLI::FailureMessage::simple(a, e);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : exit_code::usage;
  }
  if (!action) {
    std::cerr << app.help();
    return exit_code::usage;
  }
  try {
    return action();
  } catch (const redlease::error& e) {
    std::cerr << program << ": " << cli_words(e.what()) << "\n";
    return exit_code_for(e.code());
  } catch (const std::exception& e) {
    std::cerr << program << ": " << e.what() << "\n";
    return exit_code::software;
  }
}

}  // namespace redlease::cli
