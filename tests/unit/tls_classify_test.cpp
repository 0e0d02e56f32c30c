// SPDX-License-Identifier: MIT
// Unit tests of how a TLS connection that fails after its handshake, before any reply, is explained
// (src/net/tls.hpp), without a server: the integration tests cannot force the order in which a
// server's alert and its reset reach us.
#include <gtest/gtest.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <asio/error.hpp>
#include <asio/ssl/error.hpp>
#include <string>
#include <vector>

#include "net/tls.hpp"
#include "redlease/error.hpp"

namespace redlease::detail {
namespace {

std::error_code alert(int reason) {
  return {static_cast<int>(ERR_PACK(ERR_LIB_SSL, 0, reason)), asio::error::get_ssl_category()};
}

tls_options with_certificate() {
  tls_options o;
  o.cert_file = "/etc/client.crt";
  o.key_file = "/etc/client.key";
  return o;
}

TEST(tls_classify_test, an_alert_for_a_missing_certificate_says_to_configure_one) {
  auto f = classify_failure_after_handshake(alert(SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED), {}, "h:1", true);
  EXPECT_EQ(f.code, errc::tls_client_certificate_required);
  EXPECT_NE(f.text.find("none is configured"), std::string::npos) << f.text;
  EXPECT_NE(f.text.find("config::tls.cert_file"), std::string::npos) << f.text;  // the CLI says --cert
}

TEST(tls_classify_test, an_alert_for_an_untrusted_certificate_names_the_file) {
  auto f = classify_failure_after_handshake(alert(SSL_R_TLSV1_ALERT_UNKNOWN_CA), with_certificate(), "h:1", true);
  EXPECT_EQ(f.code, errc::tls_client_certificate_required);
  EXPECT_NE(f.text.find("rejected the client certificate /etc/client.crt"), std::string::npos) << f.text;
}

// How a close reaches us: a reset, a plain FIN, a FIN without TLS close_notify.
std::vector<std::error_code> closes() {
  return {asio::error::connection_reset, asio::error::eof, asio::ssl::error::stream_truncated};
}

// The server's alert is lost when it resets the connection with our first request unread. When it
// asked for a client certificate in the handshake, the close is put down to the certificate, with
// the other causes named.
TEST(tls_classify_test, a_close_before_any_reply_after_a_certificate_request_is_the_certificate_refused) {
  for (std::error_code ec : closes()) {
    auto none = classify_failure_after_handshake(ec, {}, "h:1", true);
    EXPECT_EQ(none.code, errc::tls_client_certificate_required) << ec.message();
    EXPECT_NE(none.text.find("none is configured"), std::string::npos) << none.text;
    EXPECT_NE(none.text.find("config::tls.cert_file"), std::string::npos) << none.text;
    auto set = classify_failure_after_handshake(ec, with_certificate(), "h:1", true);
    EXPECT_EQ(set.code, errc::tls_client_certificate_required) << ec.message();
    EXPECT_NE(set.text.find("rejected the client certificate /etc/client.crt"), std::string::npos) << set.text;
    for (const auto* f : {&none, &set}) {
      EXPECT_NE(f->text.find("closed the connection right after the TLS handshake, before any reply"),
                std::string::npos)
          << f->text;
      EXPECT_NE(f->text.find("maxclients"), std::string::npos) << f->text;
    }
  }
}

// A server that did not ask for a client certificate and closes after the handshake (Redis at
// maxclients, a TLS proxy whose backend is down) is not reported as wanting one.
TEST(tls_classify_test, a_close_before_any_reply_without_a_certificate_request_is_connect_failed) {
  for (std::error_code ec : closes()) {
    for (const auto& o : {tls_options{}, with_certificate()}) {
      auto f = classify_failure_after_handshake(ec, o, "h:1", false);
      EXPECT_EQ(f.code, errc::connect_failed) << ec.message();
      EXPECT_NE(f.text.find("h:1 closed the connection right after the TLS handshake, before any reply"),
                std::string::npos)
          << f.text;
      EXPECT_NE(f.text.find("did not ask for a client certificate"), std::string::npos) << f.text;
      EXPECT_NE(f.text.find("maxclients"), std::string::npos) << f.text;
      EXPECT_EQ(f.text.find("requires"), std::string::npos) << f.text;
      EXPECT_EQ(f.text.find("rejected"), std::string::npos) << f.text;
    }
  }
}

// An alert names its cause whether or not a certificate was asked for (TLS 1.2 asks in the
// handshake, and the alert may be about the one we sent).
TEST(tls_classify_test, an_alert_names_the_certificate_even_without_a_request_seen) {
  auto f = classify_failure_after_handshake(alert(SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED), {}, "h:1", false);
  EXPECT_EQ(f.code, errc::tls_client_certificate_required);
}

TEST(tls_classify_test, other_failures_after_the_handshake_are_connect_failed) {
  auto f =
      classify_failure_after_handshake(std::error_code(asio::error::timed_out), with_certificate(), "h:1", true);
  EXPECT_EQ(f.code, errc::connect_failed);
  EXPECT_NE(f.text.find("h:1"), std::string::npos) << f.text;
}

}  // namespace
}  // namespace redlease::detail
