// SPDX-License-Identifier: MIT
/// @file
/// TLS certificates for the tests, made at test time with the `openssl` command-line tool in a
/// private temporary directory (nothing that expires is committed). EC P-256 keys, valid two days,
/// except the expired one (valid 2020-01-01 to 2020-01-02, signed with `openssl ca`).
#pragma once

#include <string>

namespace redlease::test {

/// A certificate and its private key (PEM paths).
struct cert_pair {
  std::string cert;
  std::string key;
};

/// One test CA and the certificates the TLS tests need. The directory is removed by the destructor.
class test_certs {
 public:
  /// True if the `openssl` tool is found on PATH.
  static bool available();
  /// Makes everything; throws std::runtime_error with openssl's output if a step fails.
  test_certs();
  ~test_certs();
  test_certs(const test_certs&) = delete;
  test_certs& operator=(const test_certs&) = delete;

  /// The test CA's certificate (what clients trust with ca_file / --cacert).
  std::string ca() const { return dir_ + "/ca.crt"; }
  /// Another CA's certificate, which signed `other_ca_server()`.
  std::string other_ca() const { return dir_ + "/other-ca.crt"; }
  /// Signed by ca(); SAN DNS:localhost, IP:127.0.0.1.
  cert_pair server() const { return pair("server"); }
  /// Signed by ca(); SAN DNS:localhost only: connecting to 127.0.0.1 fails name verification.
  cert_pair localhost_only() const { return pair("localhost-only"); }
  /// Signed by ca(); CN=localhost and no subjectAltName at all (an old-style certificate).
  cert_pair cn_only() const { return pair("cn-only"); }
  /// Signed by ca(); CN=localhost but SAN DNS:elsewhere.example, which is what names it.
  cert_pair san_not_cn() const { return pair("san-not-cn"); }
  /// Signed by ca(), SAN DNS:localhost, IP:127.0.0.1, expired in 2020.
  cert_pair expired() const { return pair("expired"); }
  /// Signed by other_ca(); SAN DNS:localhost, IP:127.0.0.1.
  cert_pair other_ca_server() const { return pair("other-server"); }
  /// A client certificate (CN=client, extendedKeyUsage clientAuth) signed by ca().
  cert_pair client() const { return pair("client"); }
  /// A directory with ca() in OpenSSL's hashed layout (`openssl rehash`), for `tls.ca_dir`.
  std::string ca_dir() const { return dir_ + "/ca-dir"; }
  /// A private key encrypted with a pass phrase (which redlease cannot use).
  std::string encrypted_key() const { return dir_ + "/encrypted.key"; }
  /// The directory holding them.
  const std::string& dir() const noexcept { return dir_; }

 private:
  cert_pair pair(const char* name) const { return {dir_ + "/" + name + ".crt", dir_ + "/" + name + ".key"}; }
  std::string dir_;
};

}  // namespace redlease::test
