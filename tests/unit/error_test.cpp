// SPDX-License-Identifier: MIT
// Unit tests of redlease's error category, exception type and the mapping of server error replies.
#include <gtest/gtest.h>

#include <asio/error.hpp>

#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "net/connection.hpp"
#include "redlease/error.hpp"

namespace redlease {
namespace {

constexpr errc all_errcs[] = {
    errc::connect_failed,  errc::connect_timeout,  errc::connection_lost, errc::request_timeout,
    errc::auth_failed,     errc::select_failed,    errc::protocol_error,  errc::server_error,
    errc::wrong_type,      errc::invalid_url,      errc::tls_not_supported, errc::invalid_argument,
    errc::client_closed,   errc::operation_aborted, errc::not_owner,      errc::lock_lost,
    errc::would_deadlock,  errc::server_busy,      errc::server_readonly, errc::bad_reply,
    errc::no_permission,   errc::unknown_command,  errc::server_oom,     errc::no_replicas,
    errc::server_full,     errc::server_loading,
    errc::tls_handshake_failed,            errc::tls_untrusted_certificate, errc::tls_name_mismatch,
    errc::tls_certificate_expired,         errc::tls_client_certificate_required,
    errc::tls_expected_by_server,          errc::tls_not_offered_by_server, errc::tls_bad_files,
    errc::not_replicated,                  errc::no_sentinel,               errc::master_switched,
    errc::attempts_exhausted,
};

TEST(ErrorCategory, Name) {
  EXPECT_STREQ(error_category().name(), "redlease");
  EXPECT_EQ(&error_category(), &error_category());
  EXPECT_EQ(make_error_code(errc::client_closed).category(), error_category());
}

TEST(ErrorCategory, ValuesAreStable) {
  EXPECT_EQ(static_cast<int>(errc::connect_failed), 1);
  EXPECT_EQ(static_cast<int>(errc::server_readonly), 19);
  EXPECT_EQ(static_cast<int>(errc::tls_handshake_failed), 27);
  EXPECT_EQ(static_cast<int>(errc::tls_bad_files), 34);
  int expected = 1;
  for (errc e : all_errcs) EXPECT_EQ(static_cast<int>(e), expected++);
}

TEST(ErrorCategory, EveryCodeHasADistinctMessage) {
  std::set<std::string> seen;
  for (errc e : all_errcs) {
    std::error_code ec = make_error_code(e);
    SCOPED_TRACE(static_cast<int>(e));
    EXPECT_TRUE(static_cast<bool>(ec));
    std::string msg = ec.message();
    EXPECT_FALSE(msg.empty());
    EXPECT_NE(msg, "unknown redlease error");
    EXPECT_TRUE(seen.insert(msg).second) << "duplicate message: " << msg;
  }
  EXPECT_EQ(seen.size(), std::size(all_errcs));
  // A value outside the enum still has a message.
  EXPECT_FALSE(error_category().message(0).empty());
  EXPECT_FALSE(error_category().message(1000).empty());
}

TEST(ErrorCategory, ImplicitConversionFromErrc) {
  static_assert(std::is_error_code_enum_v<errc>);
  std::error_code ec = errc::wrong_type;
  EXPECT_EQ(ec, errc::wrong_type);
  EXPECT_NE(ec, errc::server_error);
  EXPECT_EQ(ec.value(), static_cast<int>(errc::wrong_type));
  // Not confused with a generic code of the same value.
  EXPECT_NE(ec, std::error_code(static_cast<int>(errc::wrong_type), std::generic_category()));
}

TEST(ErrorException, IsASystemErrorCarryingCodeAndText) {
  static_assert(std::is_base_of_v<std::system_error, error>);
  try {
    throw error(errc::lock_lost, "my context");
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::lock_lost);
    std::string what = e.what();
    EXPECT_NE(what.find("my context"), std::string::npos) << what;
    EXPECT_NE(what.find(make_error_code(errc::lock_lost).message()), std::string::npos) << what;
  }
  error bare{make_error_code(errc::client_closed)};
  EXPECT_EQ(bare.code(), errc::client_closed);
  EXPECT_NE(std::string(bare.what()).find(make_error_code(errc::client_closed).message()), std::string::npos);
}

TEST(ErrorException, ThrowIf) {
  EXPECT_NO_THROW(throw_if(std::error_code{}, "nothing"));
  try {
    throw_if(errc::not_owner, "unlock");
    ADD_FAILURE() << "throw_if did not throw";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::not_owner);
    EXPECT_NE(std::string(e.what()).find("unlock"), std::string::npos);
  }
}

// A TLS failure's words say what failed, why and what to set, in the library's terms: the message is
// one sentence, not followed by the code's own words (which said it again, with the CLI's flag too:
// "...; set config::tls.ca_file / --cacert to its CA: TLS: the server's certificate is signed by an
// unknown CA; set config::tls.ca_file / --cacert").
TEST(ErrorException, ATlsFailureIsSaidOnce) {
  const std::string words =
      "TLS: the certificate of 127.0.0.1:6380 is signed by an unknown CA: self-signed certificate in certificate "
      "chain (X509 verify error 19); set config::tls.ca_file to its CA";
  try {
    detail::scoped_error_text text(words);
    throw_if(errc::tls_untrusted_certificate, "client::ping redis://127.0.0.1:6380");
    ADD_FAILURE() << "throw_if did not throw";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::tls_untrusted_certificate);
    EXPECT_EQ(std::string(e.what()), "client::ping redis://127.0.0.1:6380: " + words);
  }
  for (auto code : {errc::tls_untrusted_certificate, errc::tls_name_mismatch, errc::tls_client_certificate_required,
                    errc::tls_bad_files}) {
    const std::string m = make_error_code(code).message();
    EXPECT_EQ(m.find("--"), std::string::npos) << "a CLI flag in the library's words: " << m;
  }
  // Other codes keep their words after the server's.
  try {
    detail::scoped_error_text text("NOPERM this user has no permissions");
    throw_if(errc::no_permission, "lock \"x\"");
  } catch (const error& e) {
    EXPECT_EQ(std::string(e.what()), "lock \"x\": NOPERM this user has no permissions: " +
                                         make_error_code(errc::no_permission).message());
  }
}

// ---- detail::error_from_reply_text ----------------------------------------------------------------

using detail::error_from_reply_text;

TEST(ErrorFromReplyText, WrongType) {
  EXPECT_EQ(error_from_reply_text("WRONGTYPE Operation against a key holding the wrong kind of value"),
            errc::wrong_type);
}

TEST(ErrorFromReplyText, Auth) {
  EXPECT_EQ(error_from_reply_text("NOAUTH Authentication required."), errc::auth_failed);
  EXPECT_EQ(error_from_reply_text("WRONGPASS invalid username-password pair or user is disabled."),
            errc::auth_failed);
  EXPECT_EQ(error_from_reply_text("ERR invalid password"), errc::auth_failed);
  EXPECT_EQ(error_from_reply_text("ERR AUTH <password> called without any password configured for the default "
                                  "user. Are you sure your configuration is correct?"),
            errc::auth_failed);
}

// An ACL that refuses a command a script calls (TIME, for a name's first fencing token): Redis 7's
// words inside a script. It was server_error, so `redlease run` exited 70 instead of taking the
// lock without a token.
TEST(ErrorFromReplyText, AclRefusalOfACommandInsideAScript) {
  EXPECT_EQ(error_from_reply_text("ERR The user executing the script can't run this command or subcommand script: "
                                  "1a8c67671c988614eb0c618efa73283c54565629, on @user_script:1."),
            errc::no_permission);
  EXPECT_EQ(error_from_reply_text("ERR The user executing the script can't run this command or subcommand"),
            errc::no_permission);
}

TEST(ErrorFromReplyText, Busy) {
  EXPECT_EQ(error_from_reply_text("BUSY Redis is busy running a script. You can only call SCRIPT KILL or "
                                  "SHUTDOWN NOSAVE."),
            errc::server_busy);
  EXPECT_EQ(error_from_reply_text("LOADING Redis is loading the dataset in memory"), errc::server_loading);
  EXPECT_EQ(error_from_reply_text("OOM command not allowed when used memory > 'maxmemory'."), errc::server_oom);
  EXPECT_EQ(error_from_reply_text("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
            errc::server_busy);
}

TEST(ErrorFromReplyText, ReadOnly) {
  EXPECT_EQ(error_from_reply_text("READONLY You can't write against a read only replica."),
            errc::server_readonly);
}

TEST(ErrorFromReplyText, ScriptErrorWrappingWrongType) {
  // Redis 7 reports an error raised inside a script after a generic prefix.
  EXPECT_EQ(error_from_reply_text("ERR Error running script (call to f_b3bc9b6cb369d345d1b539ec389ba48fcbd39136): "
                                  "@user_script:6: WRONGTYPE Operation against a key holding the wrong kind of "
                                  "value"),
            errc::wrong_type);
  EXPECT_EQ(error_from_reply_text("ERR user_script:1: WRONGTYPE Operation against a key holding the wrong kind of "
                                  "value script: b3bc9b6c, on @user_script:1."),
            errc::wrong_type);
}

TEST(ErrorFromReplyText, ScriptErrorWrappingOomOrReadonly) {
  EXPECT_EQ(error_from_reply_text("ERR Error running script: @user_script:1: OOM command not allowed when used "
                                  "memory > 'maxmemory'."),
            errc::server_oom);
  EXPECT_EQ(error_from_reply_text("ERR Error running script: @user_script:1: READONLY You can't write against a "
                                  "read only replica."),
            errc::server_readonly);
}

TEST(ErrorFromReplyText, AnythingElseIsServerError) {
  for (const char* t : {"ERR value is not an integer or out of range",
                        "NOSCRIPT No matching script. Please use EVAL.", "ERR syntax error", "ERR", "",
                        "EXECABORT Transaction discarded because of previous errors.",
                        "wrongtype lower case is not the marker", "noperm lower case is not the marker"}) {
    EXPECT_EQ(error_from_reply_text(t), errc::server_error) << t;
  }
}

TEST(ErrorFromReplyText, PrefixMustBeAtTheStart) {
  // The auth and busy markers only count at the start of the text (they are Redis error codes).
  EXPECT_EQ(error_from_reply_text("ERR my key is called NOAUTH"), errc::server_error);
  EXPECT_EQ(error_from_reply_text("ERR something BUSY"), errc::server_error);
  EXPECT_EQ(error_from_reply_text("ERR LOADING"), errc::server_error);
}

// ---- detail::without_script_location --------------------------------------------------------------

// What we show of an error raised inside a script is the failing command's words: Redis's location
// of the error in our script (its SHA and line) means nothing to a user. The rest is kept as is.
TEST(WithoutScriptLocation, StripsRedis7sSuffixAndRedis6sPrefix) {
  using detail::without_script_location;
  EXPECT_EQ(without_script_location("WRONGTYPE Operation against a key holding the wrong kind of value script: "
                                    "83bfcc4b9e3d0a1f2c5b8e7d6a4f3c2b1a0e9d8c, on @user_script:18."),
            "WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_EQ(without_script_location("OOM command not allowed when used memory > 'maxmemory'. script: 6dd27e3, on "
                                    "@user_script:1."),
            "OOM command not allowed when used memory > 'maxmemory'.");
  EXPECT_EQ(without_script_location("ERR Error running script (call to f_83bfcc4b9e3d0a1f): @user_script:18: "
                                    "WRONGTYPE Operation against a key holding the wrong kind of value"),
            "WRONGTYPE Operation against a key holding the wrong kind of value");
  // A function's location, too.
  EXPECT_EQ(without_script_location("ERR value is not an integer script: acquire, on @user_function:3."),
            "ERR value is not an integer");
  // Words that only look alike are kept.
  for (std::string_view kept : {"WRONGTYPE Operation against a key holding the wrong kind of value",
                                "ERR my script: broken, on purpose.", "ERR script: x, on @user_script:abc.",
                                "ERR Error running script (call to f_1): @user_script:x: y", ""}) {
    EXPECT_EQ(without_script_location(kept), kept);
  }
}

}  // namespace
}  // namespace redlease

// Generic code tests portable conditions: redlease's codes match the ones they correspond to, and
// so do Asio's codes for the same situation.
TEST(ErrorEquivalence, CodesMatchPortableConditions) {
  using redlease::errc;
  std::error_code aborted = errc::operation_aborted;
  std::error_code asio_aborted = asio::error::operation_aborted;
  EXPECT_EQ(aborted, std::errc::operation_canceled);
  // Asio keeps its codes in its own system category, whose conditions are not std::errc's: ours
  // match those too, so a test written against Asio's condition holds for redlease's code.
  EXPECT_TRUE(aborted == asio_aborted.default_error_condition());
  EXPECT_TRUE(std::error_code(errc::request_timeout) ==
              std::error_code(asio::error::timed_out).default_error_condition());
  EXPECT_FALSE(std::error_code(errc::request_timeout) == asio_aborted.default_error_condition());
  EXPECT_EQ(std::error_code(errc::request_timeout), std::errc::timed_out);
  EXPECT_EQ(std::error_code(errc::connect_timeout), std::errc::timed_out);
  EXPECT_EQ(std::error_code(errc::invalid_argument), std::errc::invalid_argument);
  EXPECT_EQ(std::error_code(errc::would_deadlock), std::errc::resource_deadlock_would_occur);
  EXPECT_EQ(std::error_code(errc::connect_failed), std::errc::connection_refused);
  EXPECT_EQ(std::error_code(errc::connection_lost), std::errc::connection_reset);
  EXPECT_EQ(std::error_code(errc::protocol_error), std::errc::protocol_error);
  EXPECT_EQ(std::error_code(errc::bad_reply), std::errc::bad_message);
  EXPECT_EQ(std::error_code(errc::tls_client_certificate_required), std::errc::permission_denied);
  EXPECT_EQ(std::error_code(errc::tls_expected_by_server), std::errc::connection_reset);
  EXPECT_EQ(std::error_code(errc::tls_not_offered_by_server), std::errc::protocol_error);
  EXPECT_NE(std::error_code(errc::tls_untrusted_certificate), std::error_code(errc::tls_name_mismatch));
  // Codes without a portable counterpart keep their own condition, and codes stay distinct.
  EXPECT_NE(std::error_code(errc::lock_lost), std::errc::timed_out);
  EXPECT_EQ(std::error_code(errc::lock_lost), std::error_code(errc::lock_lost).default_error_condition());
  EXPECT_NE(std::error_code(errc::request_timeout), std::error_code(errc::connect_timeout));
  EXPECT_NE(std::error_code(errc::operation_aborted), std::errc::timed_out);
}

// The server's own words, as Redis 7.0 sends them (taken from a real server), map to typed causes.
TEST(ErrorFromReplyText, ProductionSettings) {
  using redlease::errc;
  using redlease::detail::error_from_reply_text;
  EXPECT_EQ(error_from_reply_text("NOPERM this user has no permissions to run the 'evalsha' command"),
            errc::no_permission);
  EXPECT_EQ(error_from_reply_text("NOPERM this user has no permissions to access one of the keys used as arguments"),
            errc::no_permission);
  EXPECT_EQ(error_from_reply_text("ERR The user executing the script can't access at least one of the keys mentioned "
                                  "in the command arguments script: 733db98, on @user_script:1."),
            errc::no_permission);
  EXPECT_EQ(error_from_reply_text("ERR The user executing the script can't publish to the channel mentioned in the "
                                  "command script: afd1cf8, on @user_script:1."),
            errc::no_permission);
  EXPECT_EQ(error_from_reply_text("ERR unknown command 'evalsha', with args beginning with: 'abc' '0' "),
            errc::unknown_command);
  EXPECT_EQ(error_from_reply_text("OOM command not allowed when used memory > 'maxmemory'. script: 6dd27e3, on "
                                  "@user_script:1."),
            errc::server_oom);
  EXPECT_EQ(error_from_reply_text("NOREPLICAS Not enough good replicas to write."), errc::no_replicas);
  EXPECT_EQ(error_from_reply_text("NOREPLICAS Not enough good replicas to write. script: 58b2003, on @user_script:1."),
            errc::no_replicas);
  EXPECT_EQ(error_from_reply_text("ERR max number of clients reached"), errc::server_full);
  EXPECT_EQ(error_from_reply_text("ERR some other error"), errc::server_error);
}
