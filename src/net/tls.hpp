// SPDX-License-Identifier: MIT
// TLS for the data connections: the client context built from config::tls, the per-connection setup
// (SNI, host-name verification), the mapping of OpenSSL's failures to redlease's errors with words
// that say what to fix, and `transport`, the byte stream a connection reads and writes (plain or TLS).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/generic/stream_protocol.hpp>
#include <asio/ssl/context.hpp>
#include <asio/ssl/stream.hpp>

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "redlease/config.hpp"

namespace redlease::detail {

using tls_stream = asio::ssl::stream<asio::generic::stream_protocol::socket>;

/// A failed TLS step: the code and the words for the requests it fails (host, OpenSSL's reason).
struct tls_failure {
  std::error_code code;
  std::string text;
};

/// The client context for `o`: TLS 1.2 at least, the server's certificate verified (unless
/// `insecure`) against `ca_file`/`ca_dir` or the system store, the client certificate if set.
/// Null with `err` set (errc::tls_bad_files) when a file cannot be loaded.
std::unique_ptr<asio::ssl::context> make_tls_context(const tls_options& o, tls_failure& err);

/// Sets up a fresh stream to `host`: SNI (`o.sni`, else `host` when it is a DNS name) and the name
/// the certificate must carry (`o.verify_name`, else `host`; an IP address is checked as one).
tls_failure prepare_tls_stream(tls_stream& s, const tls_options& o, const std::string& host);

/// Why the TLS handshake with `where` ("host:port") failed, from its error and the stream's state.
tls_failure classify_handshake_failure(std::error_code ec, tls_stream& s, const tls_options& o,
                                       const std::string& where);

/// Why a TLS connection failed after its handshake and before the server answered anything (the
/// Redis handshake's first reply). A server that demands a client certificate checks it only now
/// with TLS 1.3 and sends an alert, which names the cause. Without an alert (a reset can discard
/// it) a close is only a close: it is put down to the client certificate when the server asked for
/// one in the handshake (`certificate_requested`), with the other causes named; otherwise it is
/// `connect_failed`, saying what was seen (a server at maxclients, a TLS proxy whose backend is
/// down close the same way).
tls_failure classify_failure_after_handshake(std::error_code ec, const tls_options& o, const std::string& where,
                                             bool certificate_requested);

/// Whether the server asked for a client certificate in the handshake of `s` (prepared with
/// prepare_tls_stream()).
bool tls_client_certificate_requested(tls_stream& s) noexcept;

/// Bytes the server sent on `s` so far (handshake included).
std::uint64_t tls_bytes_received(tls_stream& s) noexcept;

/// A one-off check whether a server speaks TLS, for a plaintext connection it reset before any
/// reply: a TLS handshake on a connection of its own (no certificate check; nothing is sent but the
/// handshake, and the connection is closed after it). `done(true)` when the server answered as a
/// TLS server does (the handshake completed, or it sent a TLS alert). cancel() ends it; `done` is
/// then still called (with false) unless it already was.
class tls_probe : public std::enable_shared_from_this<tls_probe> {
 public:
  explicit tls_probe(const asio::any_io_executor& ex);
  void start(const asio::generic::stream_protocol::endpoint& ep, std::function<void(bool)> done);
  void cancel() noexcept;

 private:
  void finish(bool tls);

  asio::ssl::context ctx_;
  tls_stream stream_;
  std::function<void(bool)> done_;
};

/// The byte stream of one connection attempt: the socket, or after start_tls() a TLS stream over it.
/// Reconnects call close() and then build a fresh TLS stream; completions of a closed stream keep it
/// alive until they have run (its operations refer to it).
class transport {
 public:
  using socket = asio::generic::stream_protocol::socket;

  explicit transport(const asio::any_io_executor& ex) : sock_(ex) {}

  /// The socket to open and connect (before start_tls()).
  socket& plain() noexcept { return sock_; }
  /// Moves the connected socket into a new TLS stream; reads and writes go through it from now on.
  tls_stream& start_tls(asio::ssl::context& ctx) {
    tls_ = std::make_shared<tls_stream>(std::move(sock_), ctx);
    return *tls_;
  }
  bool is_tls() const noexcept { return tls_ != nullptr; }
  /// The TLS stream (is_tls() only).
  tls_stream& tls() noexcept { return *tls_; }

  template <class Handler>
  void async_handshake(Handler&& h) {
    tls_->async_handshake(asio::ssl::stream_base::client, keep_alive(std::forward<Handler>(h)));
  }
  template <class Buffers, class Handler>
  void async_read_some(const Buffers& b, Handler&& h) {
    if (tls_) tls_->async_read_some(b, keep_alive(std::forward<Handler>(h)));
    else sock_.async_read_some(b, std::forward<Handler>(h));
  }
  template <class Buffers, class Handler>
  void async_write_some(const Buffers& b, Handler&& h) {
    if (tls_) tls_->async_write_some(b, keep_alive(std::forward<Handler>(h)));
    else sock_.async_write_some(b, std::forward<Handler>(h));
  }
  /// Writes what the socket takes at once, without blocking and without the executor (plain
  /// connections only: TLS records go through the stream). The bytes written; 0 when none were.
  std::size_t try_write_now(const char* data, std::size_t n) noexcept {
    if (tls_ || !sock_.is_open()) return 0;
    ssize_t r = ::send(sock_.native_handle(), data, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    return r > 0 ? static_cast<std::size_t>(r) : 0;
  }
  /// Closes the connection (no TLS close_notify: nothing is waited for) and drops the TLS stream.
  void close() noexcept {
    std::error_code ignored;
    if (tls_) tls_->next_layer().close(ignored);
    tls_.reset();
    sock_.close(ignored);
  }

 private:
  template <class Handler>
  auto keep_alive(Handler&& h) {
    return [keep = tls_, h = std::forward<Handler>(h)](auto&&... args) mutable {
      h(std::forward<decltype(args)>(args)...);
    };
  }

  socket sock_;
  std::shared_ptr<tls_stream> tls_;
};

}  // namespace redlease::detail
