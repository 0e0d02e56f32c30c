// SPDX-License-Identifier: MIT
// TLS for the bench's raw connection (bench_support.hpp, raw_conn): OpenSSL over a connected,
// blocking socket, with the settings of config::tls, so that a `rediss://` server has a ceiling
// measured by the same process as its cases.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "redlease/config.hpp"

namespace redlease::cli::bench {

/// One TLS session on a connected socket: TLS 1.2 at least, the server's certificate verified
/// (unless `insecure`) against `ca_file`/`ca_dir` or the system store and against `verify_name`,
/// else the host (an IP address is checked as one); SNI `sni`, else the host when it is a DNS name;
/// the client certificate and key when set. Not thread-safe. Throws std::runtime_error on failure.
class tls_session {
 public:
  /// Handshakes on `fd` (which stays owned by the caller) with the server at `host`.
  tls_session(int fd, const tls_options& o, const std::string& host);
  ~tls_session();
  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  /// Writes all of `data`, also on a non-blocking socket (it retries until everything is written).
  void write_all(std::string_view data);
  /// Reads at most `n` bytes into `buf`: how many (at least 1), or 0 when a non-blocking socket has
  /// nothing yet. Throws when the server closed the connection or on an error.
  std::size_t read_some(char* buf, std::size_t n);

 private:
  struct impl;
  impl* p_;
};

}  // namespace redlease::cli::bench
