// SPDX-License-Identifier: MIT
#include "net/tls.hpp"

#include <asio/error.hpp>
#include <asio/ip/address.hpp>
#include <asio/ssl/error.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <utility>

#include "redlease/error.hpp"

namespace redlease::detail {
namespace {

bool is_ip_address(const std::string& host) {
  std::error_code ec;
  (void)asio::ip::make_address(host, ec);
  return !ec;
}

// OpenSSL's reason for an error code of Asio's SSL category ("certificate verify failed", ...).
std::string openssl_words(std::error_code ec) {
  if (ec.category() == asio::error::get_ssl_category()) {
    if (const char* r = ::ERR_reason_error_string(static_cast<unsigned long>(ec.value()))) return r;
  }
  return ec.message();
}

int ssl_reason(std::error_code ec) {
  if (ec.category() != asio::error::get_ssl_category()) return 0;
  return ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
}

bool closed_by_peer(std::error_code ec) {
  return ec == asio::ssl::error::stream_truncated || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

// The alerts a server sends when it wants a client certificate it did not get (or rejects ours).
bool client_certificate_alert(int reason) {
  return reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED || reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE ||
         reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE || reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
         reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN || reason == SSL_R_TLSV1_ALERT_ACCESS_DENIED;
}

tls_failure client_certificate_failure(const tls_options& o, const std::string& where, const std::string& how) {
  if (o.cert_file.empty()) {
    return {errc::tls_client_certificate_required,
            "TLS: " + where + " requires a client certificate and none is configured (" + how +
                "); set config::tls.cert_file and key_file"};
  }
  return {errc::tls_client_certificate_required,
          "TLS: " + where + " rejected the client certificate " + o.cert_file + " (" + how +
              "); it must be signed by a CA the server trusts (its tls-ca-cert-file)"};
}

// Where a stream notes that the server asked for a client certificate (Asio keeps its verify
// callback in the SSL's app data, index 0).
int certificate_request_index() {
  static const int index = ::SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// OpenSSL calls this on a client when the server's CertificateRequest arrives, whether or not a
// certificate is set; it changes nothing but the note.
int note_certificate_request(SSL* ssl, void*) {
  ::SSL_set_ex_data(ssl, certificate_request_index(), reinterpret_cast<void*>(1));
  return 1;
}

tls_failure verify_failure(long result, const tls_options& o, const std::string& where) {
  std::string words = ::X509_verify_cert_error_string(result);
  words += " (X509 verify error " + std::to_string(result) + ")";
  switch (result) {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_UNTRUSTED:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      return {errc::tls_untrusted_certificate,
              "TLS: the certificate of " + where + " is signed by an unknown CA: " + words + "; set " +
                  (o.ca_file.empty() && o.ca_dir.empty() ? std::string("config::tls.ca_file to its CA")
                                                         : "config::tls.ca_file to its CA (now: " +
                                                               (o.ca_file.empty() ? o.ca_dir : o.ca_file) + ")")};
    case X509_V_ERR_CERT_HAS_EXPIRED:
    case X509_V_ERR_CERT_NOT_YET_VALID:
    case X509_V_ERR_CRL_HAS_EXPIRED:
      return {errc::tls_certificate_expired,
              "TLS: the certificate of " + where + " is not valid now: " + words +
                  "; renew the server's certificate (or check this machine's clock)"};
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return {errc::tls_name_mismatch,
              "TLS: the certificate of " + where + " does not name " +
                  (o.verify_name.empty() ? std::string("the host connected to") : "'" + o.verify_name + "'") + ": " +
                  words + "; connect by a name the certificate lists, or set config::tls.verify_name to one"};
    default:
      return {errc::tls_handshake_failed, "TLS: the certificate of " + where + " was rejected: " + words};
  }
}

}  // namespace

std::unique_ptr<asio::ssl::context> make_tls_context(const tls_options& o, tls_failure& err) {
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  std::error_code ec;
  auto bad = [&](const char* field, const std::string& path) {
    err = {errc::tls_bad_files, "TLS: cannot load config::tls." + std::string(field) + " '" + path +
                                    "': " + openssl_words(ec)};
    return nullptr;
  };
  // TLS 1.2 at least; no compression; no renegotiation.
  ::SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_compression, ec);
  ::SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_RENEGOTIATION);
  ctx->set_verify_mode(o.insecure ? asio::ssl::verify_none : asio::ssl::verify_peer, ec);
  // An encrypted key must fail to load (tls_bad_files), not make OpenSSL prompt on the terminal
  // from the I/O thread.
  ctx->set_password_callback([](std::size_t, asio::ssl::context::password_purpose) { return std::string(); }, ec);
  if (!o.ca_file.empty() && (ctx->load_verify_file(o.ca_file, ec), ec)) return bad("ca_file", o.ca_file);
  if (!o.ca_dir.empty() && (ctx->add_verify_path(o.ca_dir, ec), ec)) return bad("ca_dir", o.ca_dir);
  if (o.ca_file.empty() && o.ca_dir.empty() && (ctx->set_default_verify_paths(ec), ec))
    return bad("ca_file", "(system store)");
  if (o.cert_file.empty() && !o.key_file.empty()) {
    err = {errc::tls_bad_files, "TLS: config::tls.key_file '" + o.key_file +
                                    "' is set without config::tls.cert_file: a client key needs its certificate"};
    return nullptr;
  }
  if (!o.cert_file.empty() && (ctx->use_certificate_chain_file(o.cert_file, ec), ec))
    return bad("cert_file", o.cert_file);
  if (!o.key_file.empty() || !o.cert_file.empty()) {
    const std::string& key = o.key_file.empty() ? o.cert_file : o.key_file;  // a PEM may hold both
    if ((ctx->use_private_key_file(key, asio::ssl::context::pem, ec), ec)) return bad("key_file", key);
    if (::SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      err = {errc::tls_bad_files,
             "TLS: config::tls.key_file '" + key + "' does not match config::tls.cert_file '" + o.cert_file + "'"};
      return nullptr;
    }
  }
  return ctx;
}

tls_failure prepare_tls_stream(tls_stream& s, const tls_options& o, const std::string& host) {
  SSL* ssl = s.native_handle();
  ::SSL_set_cert_cb(ssl, note_certificate_request, nullptr);
  const std::string& sni = !o.sni.empty() ? o.sni : (is_ip_address(host) ? std::string() : host);
  if (!sni.empty() && SSL_set_tlsext_host_name(ssl, sni.c_str()) != 1)
    return {errc::tls_handshake_failed, "TLS: cannot send '" + sni + "' as server name (SNI)"};
  if (o.insecure) return {};
  const std::string& name = o.verify_name.empty() ? host : o.verify_name;
  ::SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  int ok = is_ip_address(name) ? ::X509_VERIFY_PARAM_set1_ip_asc(::SSL_get0_param(ssl), name.c_str())
                               : ::SSL_set1_host(ssl, name.c_str());
  if (ok != 1)
    return {errc::tls_handshake_failed, "TLS: cannot verify the certificate against the name '" + name + "'"};
  return {};
}

tls_failure classify_handshake_failure(std::error_code ec, tls_stream& s, const tls_options& o,
                                       const std::string& where) {
  if (!o.insecure) {
    long result = ::SSL_get_verify_result(s.native_handle());
    if (result != X509_V_OK) return verify_failure(result, o, where);
  }
  const int reason = ssl_reason(ec);
  if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
      reason == SSL_R_UNKNOWN_PROTOCOL) {
    return {errc::tls_not_offered_by_server,
            "TLS: " + where + " does not speak TLS on this port (it answered the TLS hello with something else: " +
                openssl_words(ec) + "); use redis://, or the server's TLS port"};
  }
  if (client_certificate_alert(reason)) return client_certificate_failure(o, where, openssl_words(ec));
  if (closed_by_peer(ec))
    return {errc::tls_handshake_failed, "TLS: " + where + " closed the connection during the TLS handshake (" +
                                            openssl_words(ec) + ")"};
  return {errc::tls_handshake_failed, "TLS: the handshake with " + where + " failed: " + openssl_words(ec)};
}

tls_failure classify_failure_after_handshake(std::error_code ec, const tls_options& o, const std::string& where,
                                             bool certificate_requested) {
  if (client_certificate_alert(ssl_reason(ec))) return client_certificate_failure(o, where, openssl_words(ec));
  if (!closed_by_peer(ec))
    return {errc::connect_failed, "TLS connection to " + where + " failed after the handshake: " + openssl_words(ec)};
  // With TLS 1.3 the server checks the client's certificate only after the handshake. Its alert can
  // be lost: when our first request is still unread as it closes, the kernel sends a reset, and the
  // reset discards the alert waiting in our receive buffer. A close without an alert is all that is
  // left, and a server closes like that for other reasons too (Redis at maxclients, a TLS proxy
  // whose backend is down): the certificate is named only when the server asked for one.
  const std::string seen = "TLS: " + where + " closed the connection right after the TLS handshake, before any " +
                           "reply (" + openssl_words(ec) + ")";
  const std::string others =
      "a server at its maxclients, or a TLS proxy that cannot reach its backend, closes this way too";
  if (!certificate_requested) {
    return {errc::connect_failed,
            seen + "; it did not ask for a client certificate, so that is not the cause: it may refuse connections "
                   "(maxclients reached) or be shutting down, or a TLS proxy in front of it may not reach the server"};
  }
  if (o.cert_file.empty()) {
    return {errc::tls_client_certificate_required,
            seen + "; it asked for a client certificate and none is configured, so it most likely requires one "
                   "(tls-auth-clients yes): set config::tls.cert_file and key_file (" +
                others + ")"};
  }
  return {errc::tls_client_certificate_required,
          seen + "; it asked for a client certificate, so it most likely rejected the client certificate " +
              o.cert_file + ": it must be signed by a CA the server trusts (its tls-ca-cert-file) (" + others + ")"};
}

bool tls_client_certificate_requested(tls_stream& s) noexcept {
  return ::SSL_get_ex_data(s.native_handle(), certificate_request_index()) != nullptr;
}

tls_probe::tls_probe(const asio::any_io_executor& ex)
    : ctx_(asio::ssl::context::tls_client), stream_(tls_stream::next_layer_type(ex), ctx_) {
  std::error_code ignored;
  ctx_.set_verify_mode(asio::ssl::verify_none, ignored);
}

void tls_probe::start(const asio::generic::stream_protocol::endpoint& ep, std::function<void(bool)> done) {
  done_ = std::move(done);
  stream_.next_layer().async_connect(ep, [self = shared_from_this()](std::error_code ec) {
    if (ec) return self->finish(false);
    self->stream_.async_handshake(asio::ssl::stream_base::client, [self](std::error_code ec) {
      // A TLS alert from the server (reason codes from SSL_AD_REASON_OFFSET on) is TLS too.
      self->finish(!ec || ssl_reason(ec) >= SSL_AD_REASON_OFFSET);
    });
  });
}

void tls_probe::cancel() noexcept {
  std::error_code ignored;
  stream_.next_layer().close(ignored);
}

void tls_probe::finish(bool tls) {
  cancel();
  if (auto done = std::exchange(done_, nullptr)) done(tls);
}

std::uint64_t tls_bytes_received(tls_stream& s) noexcept {
  BIO* rbio = ::SSL_get_rbio(s.native_handle());
  return rbio != nullptr ? ::BIO_number_read(rbio) : 0;
}

}  // namespace redlease::detail
