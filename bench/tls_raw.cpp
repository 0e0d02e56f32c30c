// SPDX-License-Identifier: MIT
#include "tls_raw.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <stdexcept>

namespace redlease::cli::bench {
namespace {

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ::ERR_get_error()) {
    char buf[256];
    ::ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? std::string("no OpenSSL error queued") : out;
}

[[noreturn]] void tls_fail(const std::string& what) {
  throw std::runtime_error("bench raw connection: TLS " + what + ": " + openssl_errors());
}

bool is_ip(const std::string& s) {
  unsigned char addr[16];
  return ::inet_pton(AF_INET, s.c_str(), addr) == 1 || ::inet_pton(AF_INET6, s.c_str(), addr) == 1;
}

}  // namespace

struct tls_session::impl {
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  ~impl() {
    if (ssl != nullptr) ::SSL_free(ssl);
    if (ctx != nullptr) ::SSL_CTX_free(ctx);
  }
};

tls_session::tls_session(int fd, const tls_options& o, const std::string& host) : p_(new impl) {
  try {
    p_->ctx = ::SSL_CTX_new(::TLS_client_method());
    if (p_->ctx == nullptr) tls_fail("context");
    ::SSL_CTX_set_min_proto_version(p_->ctx, TLS1_2_VERSION);
    if (!o.insecure) {
      const bool own_ca = !o.ca_file.empty() || !o.ca_dir.empty();
      if (own_ca ? ::SSL_CTX_load_verify_locations(p_->ctx, o.ca_file.empty() ? nullptr : o.ca_file.c_str(),
                                                   o.ca_dir.empty() ? nullptr : o.ca_dir.c_str()) != 1
                 : ::SSL_CTX_set_default_verify_paths(p_->ctx) != 1)
        tls_fail("CA " + (own_ca ? o.ca_file + o.ca_dir : std::string("(system store)")));
      ::SSL_CTX_set_verify(p_->ctx, SSL_VERIFY_PEER, nullptr);
    }
    if (!o.cert_file.empty()) {
      const std::string& key = o.key_file.empty() ? o.cert_file : o.key_file;
      if (::SSL_CTX_use_certificate_chain_file(p_->ctx, o.cert_file.c_str()) != 1)
        tls_fail("certificate " + o.cert_file);
      if (::SSL_CTX_use_PrivateKey_file(p_->ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) tls_fail("key " + key);
    }
    p_->ssl = ::SSL_new(p_->ctx);
    if (p_->ssl == nullptr || ::SSL_set_fd(p_->ssl, fd) != 1) tls_fail("session");
    // An IP address is never sent as SNI (RFC 6066), as the library does.
    const std::string sni = !o.sni.empty() ? o.sni : (is_ip(host) ? std::string() : host);
    if (!sni.empty() && ::SSL_set_tlsext_host_name(p_->ssl, sni.c_str()) != 1) tls_fail("SNI " + sni);
    if (!o.insecure) {
      const std::string name = o.verify_name.empty() ? host : o.verify_name;
      bool ok = is_ip(name) ? ::X509_VERIFY_PARAM_set1_ip_asc(::SSL_get0_param(p_->ssl), name.c_str()) == 1
                            : ::SSL_set1_host(p_->ssl, name.c_str()) == 1;
      if (!ok) tls_fail("verify name " + name);
    }
    if (::SSL_connect(p_->ssl) != 1) {
      long v = ::SSL_get_verify_result(p_->ssl);
      tls_fail("handshake with " + host +
               (v != X509_V_OK ? std::string(" (certificate: ") + ::X509_verify_cert_error_string(v) + ")" : ""));
    }
  } catch (...) {
    delete p_;
    throw;
  }
}

tls_session::~tls_session() { delete p_; }

void tls_session::write_all(std::string_view data) {
  while (!data.empty()) {
    int n = ::SSL_write(p_->ssl, data.data(), static_cast<int>(std::min<std::size_t>(data.size(), 1 << 30)));
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    int e = ::SSL_get_error(p_->ssl, n);
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) continue;
    tls_fail("write");
  }
}

std::size_t tls_session::read_some(char* buf, std::size_t n) {
  int got = ::SSL_read(p_->ssl, buf, static_cast<int>(std::min<std::size_t>(n, 1 << 30)));
  if (got > 0) return static_cast<std::size_t>(got);
  int e = ::SSL_get_error(p_->ssl, got);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
  if (e == SSL_ERROR_ZERO_RETURN) throw std::runtime_error("bench raw connection: closed by the server");
  tls_fail("read");
}

}  // namespace redlease::cli::bench
