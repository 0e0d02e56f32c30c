// SPDX-License-Identifier: MIT
// Unit tests of tools/common.cpp: the CLI's mapping of library errors to exit statuses
// (exit_code_for, which also covers codes no CLI run produces: attempts_exhausted), and the words of
// its messages (durations, the library's TLS field names, the program's prefix).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "redlease/error.hpp"

namespace redlease::cli {
namespace {

// A backoff wait whose max_attempts ran out gave up waiting for a lock someone else holds: the
// "not acquired" status, as for a --wait that runs out, not 70 (an unexpected error).
TEST(cli_exit_code, attempts_exhausted_is_not_acquired) {
  EXPECT_EQ(exit_code_for(make_error_code(errc::attempts_exhausted)), exit_code::not_acquired);
  EXPECT_EQ(exit_code::not_acquired, 75);
}

// The rest of the table, so that a change to it is a deliberate one.
TEST(cli_exit_code, each_class_of_error_has_its_status) {
  EXPECT_EQ(exit_code_for(make_error_code(errc::wrong_type)), exit_code::data_error);
  EXPECT_EQ(exit_code_for(make_error_code(errc::invalid_argument)), exit_code::usage);
  EXPECT_EQ(exit_code_for(make_error_code(errc::invalid_url)), exit_code::usage);
  EXPECT_EQ(exit_code_for(make_error_code(errc::connect_failed)), exit_code::unavailable);
  EXPECT_EQ(exit_code_for(make_error_code(errc::tls_handshake_failed)), exit_code::unavailable);
  EXPECT_EQ(exit_code_for(make_error_code(errc::tls_bad_files)), exit_code::unavailable);
  EXPECT_EQ(exit_code_for(make_error_code(errc::no_sentinel)), exit_code::unavailable);
  EXPECT_EQ(exit_code_for(make_error_code(errc::no_permission)), exit_code::config_problem);
  EXPECT_EQ(exit_code_for(make_error_code(errc::unknown_command)), exit_code::config_problem);
  EXPECT_EQ(exit_code_for(make_error_code(errc::server_error)), exit_code::software);
  EXPECT_EQ(exit_code_for(make_error_code(errc::bad_reply)), exit_code::software);
}

// A negative duration says so; before, "-5s" was only "invalid".
TEST(cli_words, durations) {
  CLI::Validator v = duration_validator();
  std::string text = "-5s";
  EXPECT_EQ(v(text), "invalid duration '-5s': negative durations are not allowed");
  text = "5x";
  EXPECT_EQ(v(text), "invalid duration '5x' (use e.g. 250ms, 5s, 2m, 1h)");
  text = "1.5s";
  EXPECT_EQ(v(text), "");
}

// The library names its config fields; the CLI says the flags that set them.
TEST(cli_words, tls_fields_become_flags) {
  EXPECT_EQ(cli_words("TLS: the certificate of h:1 is signed by an unknown CA: x; set config::tls.ca_file to its CA"),
            "TLS: the certificate of h:1 is signed by an unknown CA: x; set --cacert to its CA");
  EXPECT_EQ(cli_words("set config::tls.cert_file and key_file (tls-auth-clients yes)"),
            "set --cert and --key (tls-auth-clients yes)");
  EXPECT_EQ(cli_words("or set config::tls.verify_name to one; config::tls.key_file 'k' does not match "
                      "config::tls.cert_file 'c'"),
            "or set --sni to one; --key 'k' does not match --cert 'c'");
  EXPECT_EQ(cli_words("NOPERM no"), "NOPERM no");
}

// The library's first call in every subcommand is client::ping: the CLI says the address once and
// no C++ name ("client::ping redis://127.0.0.1:1: 127.0.0.1:1: connection refused: ...").
TEST(cli_words, a_failed_ping_says_the_address_once_without_the_call) {
  EXPECT_EQ(cli_words("client::ping redis://127.0.0.1:1: 127.0.0.1:1: connection refused: could not connect to the "
                      "Redis server"),
            "127.0.0.1:1: connection refused: could not connect to the Redis server");
  EXPECT_EQ(cli_words("client::ping redis://h:6379/2: NOAUTH Authentication required."),
            "redis://h:6379/2: NOAUTH Authentication required.");
  EXPECT_EQ(cli_words("client::ping rediss://h:1: TLS: the certificate of h:1 is signed by an unknown CA; set "
                      "config::tls.ca_file to its CA"),
            "rediss://h:1: TLS: the certificate of h:1 is signed by an unknown CA; set --cacert to its CA");
}

// Every message of the tool starts with its name, CLI11's too ("--wait: invalid duration '-5s'"
// had none), and a library error is said once, in the CLI's words.
TEST(cli_words, parse_and_run_prefixes_every_message) {
  auto run = [](std::vector<std::string> args, std::function<int()> body) {
    CLI::App app{"test"};
    std::string wait;
    action_t action;
    auto* sub = app.add_subcommand("run", "");
    sub->add_option("--wait", wait)->check(duration_validator());
    sub->callback([&action, body] { action = body; });
    args.insert(args.begin(), "redlease");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    testing::internal::CaptureStderr();
    int rc = parse_and_run(app, static_cast<int>(argv.size()), argv.data(), action, "redlease");
    return std::pair{rc, testing::internal::GetCapturedStderr()};
  };
  auto [rc, err] = run({"run", "--wait=-5s"}, [] { return 0; });
  EXPECT_EQ(rc, exit_code::usage);
  EXPECT_EQ(err.rfind("redlease: --wait: invalid duration '-5s': negative durations are not allowed\n", 0), 0u)
      << err;
  std::tie(rc, err) = run({"run"}, []() -> int {
    throw error(errc::tls_untrusted_certificate, "ping: TLS: unknown CA; set config::tls.ca_file to its CA",
                error::whole_message);
  });
  EXPECT_EQ(rc, exit_code::unavailable);
  EXPECT_EQ(err, "redlease: ping: TLS: unknown CA; set --cacert to its CA\n");
}

}  // namespace
}  // namespace redlease::cli
