// SPDX-License-Identifier: MIT
// TLS on the command and pub/sub connections, against real redis-server processes with TLS ports and
// certificates made at test time (tests/support/test_certs.hpp). Every failure must arrive as its own
// error code, with words that say what to fix, well within config::connect_timeout, and TLS must
// never fall back to plaintext.
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ssl/context.hpp>
#include <asio/ssl/stream.hpp>
#include <atomic>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"
#include "test_certs.hpp"

namespace redlease::test {
namespace {

constexpr auto connect_timeout = 2000ms;
constexpr long long within_ms = 3000;  // a failure must arrive before this

class tls_test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (redis_server::available() && test_certs::available()) certs_ = std::make_unique<test_certs>();
  }
  static void TearDownTestSuite() { certs_.reset(); }

  void SetUp() override {
    REDLEASE_REQUIRE(certs_, "redis-server or openssl not found");
  }

  // A server whose TLS port presents `cert`; clients need a certificate when `auth_clients`.
  std::unique_ptr<redis_server> start(const cert_pair& cert, bool auth_clients = false, std::string password = {}) {
    server_options o;
    o.password = std::move(password);
    o.tls.cert_file = cert.cert;
    o.tls.key_file = cert.key;
    o.tls.ca_file = certs_->ca();
    o.tls.auth_clients = auth_clients;
    return std::make_unique<redis_server>(o);
  }

  // A TLS config for `url` that trusts the test CA and reports background errors to log_.
  config tls_config(const std::string& url) {
    config c = config::from_url(url);
    c.tls.ca_file = certs_->ca();
    c.connect_timeout = connect_timeout;
    c.request_timeout = 5000ms;
    c.reconnect_min_delay = 10ms;
    c.reconnect_max_delay = 100ms;
    c.on_error = log_.hook();
    return c;
  }

  // PING fails with `want`, before `within_ms`, and the error's words contain each of `words`.
  void expect_failure(const config& c, errc want, std::initializer_list<std::string> words) {
    client cl{c};
    auto t0 = steady::now();
    std::error_code ec;
    cl.ping(ec);
    auto took = ms_since(t0);
    std::string text = last_error_text();
    std::cout << "[ tls ] " << make_error_code(want).message() << " after " << took << " ms: " << text << "\n";
    EXPECT_EQ(ec, want) << ec.message() << ": " << text;
    EXPECT_LT(took, within_ms);
    for (const auto& w : words) EXPECT_NE(text.find(w), std::string::npos) << "'" << w << "' not in: " << text;
    // The library's words name config fields, not the CLI's flags (the CLI translates them).
    for (const char* flag : {"--cacert", "--sni", "--cert", "--key"})
      EXPECT_EQ(text.find(flag), std::string::npos) << "'" << flag << "' in: " << text;
    // A second request while the client backs off fails the same way, without waiting for a timeout.
    t0 = steady::now();
    cl.ping(ec);
    EXPECT_EQ(ec, want) << ec.message();
    EXPECT_LT(ms_since(t0), within_ms);
  }

  static std::unique_ptr<test_certs> certs_;
  error_log log_;
};

std::unique_ptr<test_certs> tls_test::certs_;

std::string here(const redis_server& s) { return "127.0.0.1:" + std::to_string(s.tls_port()); }

// A TLS server that completes every handshake (asking for a client certificate, optionally, when
// `ask`) and then closes the connection without a word: what a TLS proxy whose backend is down
// looks like, or a server at maxclients that let the handshake through.
class closes_after_handshake {
 public:
  closes_after_handshake(const cert_pair& cert, const std::string& ca, bool ask)
      : acceptor_(io_, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    ctx_.use_certificate_chain_file(cert.cert);
    ctx_.use_private_key_file(cert.key, asio::ssl::context::pem);
    if (ask) {
      ctx_.load_verify_file(ca);
      ctx_.set_verify_mode(asio::ssl::verify_peer);  // asks; a client without one is let in
    }
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~closes_after_handshake() {
    io_.stop();
    thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int handshakes() const { return handshakes_; }

 private:
  void accept() {
    acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket s) {
      if (ec) return;
      auto stream = std::make_shared<asio::ssl::stream<asio::ip::tcp::socket>>(std::move(s), ctx_);
      stream->async_handshake(asio::ssl::stream_base::server, [this, stream](std::error_code ec) {
        if (!ec) ++handshakes_;
        std::error_code ignored;
        stream->lowest_layer().close(ignored);
      });
      accept();
    });
  }

  asio::ssl::context ctx_{asio::ssl::context::tls_server};
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
  std::atomic<int> handshakes_{0};
};

TEST_F(tls_test, ValidCertificateLocksAndWakesWaitersOverTls) {
  auto s = start(certs_->server(), false, "tls-pw");
  config c = tls_config(s->tls_url());
  c.watchdog_timeout = 30000ms;  // a wake-up by lease expiry would take 30 s
  client cl{c};
  cl.ping();
  EXPECT_EQ(cl.command({"SET", "over-tls", "yes"}).str, "OK");
  raw_client raw = s->client();
  EXPECT_EQ(raw({"GET", "over-tls"}).str, "yes");

  auto l = cl.lock("tls-wake");
  l.lock();
  client other{c};
  std::promise<void> started;
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto l2 = other.lock("tls-wake");
    started.set_value();
    got = l2.try_lock(10s);
    if (got) l2.unlock();
  });
  started.get_future().wait();
  ASSERT_TRUE(eventually([&] {
    auto r = raw({"PUBSUB", "NUMSUB", "redisson_lock__channel:{tls-wake}"});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  }));
  auto t_unlock = steady::now();
  l.unlock();
  waiter.join();
  EXPECT_TRUE(got);
  auto latency = ms_since(t_unlock);
  EXPECT_LT(latency, 2000) << "the waiter was not woken by the unlock message";
  std::cout << "[ tls ] waiter woken " << latency << " ms after unlock (pub/sub over TLS)\n";
  EXPECT_GE(other.stats().pubsub_connects, 1u);
  EXPECT_EQ(log_.count("insecure"), 0u);
  // No lane over TLS: the records go through the connection's TLS stream.
  EXPECT_EQ(cl.stats().lane_requests, 0u);
  EXPECT_EQ(other.stats().lane_requests, 0u);
}

TEST_F(tls_test, UnknownCa) {
  auto s = start(certs_->other_ca_server());
  expect_failure(tls_config(s->tls_url()), errc::tls_untrusted_certificate,
                 {"unknown CA", "ca_file", here(*s), "unable to get local issuer certificate"});
}

TEST_F(tls_test, SystemStoreDoesNotTrustTheTestCa) {
  auto s = start(certs_->server());
  config c = tls_config(s->tls_url());
  c.tls.ca_file.clear();
  expect_failure(c, errc::tls_untrusted_certificate, {"set config::tls.ca_file to its CA"});
}

TEST_F(tls_test, NameMismatchAndVerifyName) {
  auto s = start(certs_->localhost_only());
  expect_failure(tls_config(s->tls_url()), errc::tls_name_mismatch, {here(*s), "config::tls.verify_name"});
  config c = tls_config(s->tls_url());
  c.tls.verify_name = "localhost";
  client cl{c};
  cl.ping();
  // A name the certificate does not list fails even when asked for explicitly.
  c.tls.verify_name = "not-localhost.example";
  expect_failure(c, errc::tls_name_mismatch, {"'not-localhost.example'"});
}

TEST_F(tls_test, ConnectingByNameVerifiesTheName) {
  auto s = start(certs_->localhost_only());
  config c = tls_config(s->tls_url());
  c.host = "localhost";  // resolves to loopback; SNI and verification use the name
  client cl{c};
  std::error_code ec;
  cl.ping(ec);
  EXPECT_FALSE(ec) << ec.message() << ": " << last_error_text();
}

// docs/deployment.md's rule for names: a host name is matched against the DNS subjectAltNames, and
// against the CN only when there are none; an IP address never against the CN.
TEST_F(tls_test, TheCnNamesTheHostOnlyWhenNoSanDoes) {
  auto cn_only = start(certs_->cn_only());
  config c = tls_config(cn_only->tls_url());
  c.host = "localhost";
  {
    client cl{c};
    std::error_code ec;
    cl.ping(ec);
    EXPECT_FALSE(ec) << ec.message() << ": " << last_error_text();
  }
  expect_failure(tls_config(cn_only->tls_url()), errc::tls_name_mismatch, {here(*cn_only)});
  auto san = start(certs_->san_not_cn());
  c = tls_config(san->tls_url());
  c.host = "localhost";
  expect_failure(c, errc::tls_name_mismatch, {"localhost"});
  c.tls.verify_name = "elsewhere.example";
  client cl{c};
  std::error_code ec;
  cl.ping(ec);
  EXPECT_FALSE(ec) << ec.message() << ": " << last_error_text();
}

TEST_F(tls_test, ExpiredCertificate) {
  auto s = start(certs_->expired());
  expect_failure(tls_config(s->tls_url()), errc::tls_certificate_expired, {"expired", here(*s)});
}

TEST_F(tls_test, ClientCertificateRequired) {
  auto s = start(certs_->server(), /*auth_clients=*/true);
  expect_failure(tls_config(s->tls_url()), errc::tls_client_certificate_required, {"config::tls.cert_file and key_file", here(*s)});
  config c = tls_config(s->tls_url());
  c.tls.cert_file = certs_->client().cert;
  c.tls.key_file = certs_->client().key;
  client cl{c};
  cl.ping();
  EXPECT_EQ(cl.command({"SET", "mtls", "1"}).str, "OK");
  // A client certificate from a CA the server does not trust is refused too.
  c.tls.cert_file = certs_->other_ca_server().cert;
  c.tls.key_file = certs_->other_ca_server().key;
  expect_failure(c, errc::tls_client_certificate_required, {"rejected the client certificate"});
}

// A server that did not ask for a client certificate and closes right after the handshake is not
// reported as wanting one: it says what was seen, and it is retried like any refused connection.
TEST_F(tls_test, ACloseAfterTheHandshakeWithoutACertificateRequestIsNotBlamedOnTheCertificate) {
  closes_after_handshake server(certs_->server(), certs_->ca(), /*ask=*/false);
  const std::string at = "127.0.0.1:" + std::to_string(server.port());
  expect_failure(tls_config("rediss://" + at), errc::connect_failed,
                 {at + " closed the connection right after the TLS handshake, before any reply",
                  "did not ask for a client certificate", "maxclients"});
  EXPECT_GE(server.handshakes(), 1);
  EXPECT_EQ(log_.count("requires a client certificate"), 0u);
  // The same server asking for one (and closing without an alert, which a reset may also discard):
  // now the certificate is the likely cause, and the message still names the others.
  closes_after_handshake asking(certs_->server(), certs_->ca(), /*ask=*/true);
  expect_failure(tls_config("rediss://127.0.0.1:" + std::to_string(asking.port())),
                 errc::tls_client_certificate_required,
                 {"asked for a client certificate and none is configured", "config::tls.cert_file", "maxclients"});
}

TEST_F(tls_test, BadFiles) {
  auto s = start(certs_->server());
  config c = tls_config(s->tls_url());
  c.tls.ca_file = certs_->dir() + "/no-such-ca.crt";
  expect_failure(c, errc::tls_bad_files, {"ca_file", "no-such-ca.crt"});
  c = tls_config(s->tls_url());
  c.tls.cert_file = certs_->client().cert;
  c.tls.key_file = certs_->server().key;  // not the certificate's key
  expect_failure(c, errc::tls_bad_files, {"key_file", "mismatch"});
  // An encrypted key fails to load (no pass phrase prompt on the terminal).
  c.tls.key_file = certs_->encrypted_key();
  expect_failure(c, errc::tls_bad_files, {"key_file", "encrypted.key"});
  // A key without its certificate was reported as a key that "does not match cert_file ''".
  c = tls_config(s->tls_url());
  c.tls.key_file = certs_->client().key;
  expect_failure(c, errc::tls_bad_files, {"key_file", "without config::tls.cert_file"});
}

TEST_F(tls_test, CaDirectory) {
  auto s = start(certs_->server());
  config c = tls_config(s->tls_url());
  c.tls.ca_file.clear();
  c.tls.ca_dir = certs_->ca_dir();
  client cl{c};
  cl.ping();
}

// TLS to a port without TLS: Redis waits silently for the end of a line that never comes. Nothing
// is sent in plaintext: the server never sees AUTH or CLIENT SETNAME.
TEST_F(tls_test, TlsToPlainPort) {
  server_options o;
  o.password = "plain-pw";
  redis_server s(o);
  raw_client raw = s.client();
  auto stat_line = [&](const std::string& name) {
    std::string stats = raw({"INFO", "commandstats"}).str;
    auto at = stats.find("cmdstat_" + name + ":");
    return at == std::string::npos ? std::string() : stats.substr(at, stats.find('\r', at) - at);
  };
  const std::string auth_before = stat_line("auth"), ping_before = stat_line("ping");
  ASSERT_FALSE(auth_before.empty());  // the raw client's own AUTH
  config c = tls_config("rediss://127.0.0.1:" + std::to_string(s.port()));
  c.password = "plain-pw";
  expect_failure(c, errc::tls_not_offered_by_server, {"redis://", "127.0.0.1:" + std::to_string(s.port())});
  EXPECT_EQ(stat_line("auth"), auth_before) << "AUTH was sent in plaintext";
  EXPECT_EQ(stat_line("client|setname"), "") << "CLIENT SETNAME was sent in plaintext";
  EXPECT_EQ(stat_line("ping"), ping_before) << "PING was sent in plaintext";
  EXPECT_EQ(raw({"INFO", "errorstats"}).str.find("errorstat_"), std::string::npos);
}

// A restarted server: the client reconnects with a fresh TLS session, and locks work again.
TEST_F(tls_test, ReconnectsAfterRestart) {
  auto s = start(certs_->server());
  client cl{tls_config(s->tls_url())};
  cl.ping();
  s->restart();
  ASSERT_TRUE(eventually([&] {
    std::error_code ec;
    cl.ping(ec);
    return !ec;
  }));
  EXPECT_GE(cl.stats().connects, 2u);
  auto l = cl.lock("after-restart");
  EXPECT_TRUE(l.try_lock());
  l.unlock();
}

TEST_F(tls_test, PlainToTlsPort) {
  auto s = start(certs_->server());
  config c = tls_config("redis://127.0.0.1:" + std::to_string(s->tls_port()));
  expect_failure(c, errc::tls_expected_by_server, {"rediss://", here(*s)});
}

// A reset before any reply is no proof of a TLS port: a route that refuses (here a proxy that
// accepts and resets) stays connect_failed, because that peer does not answer a TLS handshake.
TEST_F(tls_test, ResetByAPeerWithoutTlsIsConnectFailed) {
  auto s = start(certs_->server());
  fault_proxy proxy(s->port());
  proxy.refuse(true);
  expect_failure(tls_config("redis://127.0.0.1:" + std::to_string(proxy.port())), errc::connect_failed, {});
}

TEST_F(tls_test, TlsOnUnixSocketIsRefused) {
  auto s = start(certs_->server());
  config c = tls_config("unix://" + s->unix_path());
  c.tls.enabled = true;
  expect_failure(c, errc::tls_not_supported, {"unix socket"});
}

TEST_F(tls_test, InsecureConnectsWithOneWarning) {
  auto s = start(certs_->other_ca_server());
  config c = tls_config(s->tls_url());
  c.tls.insecure = true;
  client cl{c};
  cl.ping();
  EXPECT_EQ(cl.command({"SET", "insecure", "1"}).str, "OK");
  auto l = cl.lock("insecure-lock");  // the pub/sub connection is TLS too
  l.lock();
  l.unlock();
  EXPECT_TRUE(eventually([&] { return log_.count("insecure") == 1; }));
  EXPECT_EQ(log_.count("NOT verified"), 1u);
}

// Only the data nodes' insecure setting was reported; the Sentinels' was silent.
TEST_F(tls_test, InsecureSentinelTlsIsReportedToo) {
  config c = tls_config("redis://127.0.0.1:1");
  c.tls.enabled = false;
  c.sentinel.master_name = "m";
  c.sentinel.nodes = {host_port{"127.0.0.1", 1}};  // nothing listens: only the warning matters
  c.sentinel.tls.enabled = true;
  c.sentinel.tls.insecure = true;
  client cl{c};
  EXPECT_TRUE(eventually([&] { return log_.count("sentinel.tls.insecure is set") == 1; }));
  EXPECT_EQ(log_.count("NOT verified"), 1u);
}

}  // namespace
}  // namespace redlease::test
