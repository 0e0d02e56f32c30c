// SPDX-License-Identifier: MIT
/// @file
/// A small blocking RESP2 client over a plain socket, independent of the library under test.
///
/// Tests use it to inspect and manipulate server state (seed keys, read TTLs, PUBLISH, MONITOR,
/// ...) without going through redlease's own connection code. hiredis is used only to parse
/// replies.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct redisReader;

namespace redlease::test {

/// A plain value copy of one RESP2 reply.
struct raw_reply {
  /// The RESP2 reply types.
  enum class kind { string, status, error, integer, nil, array };

  /// The reply's type.
  kind type = kind::nil;
  /// The text of a string, status or error reply (binary-safe).
  std::string str;
  /// The value of an integer reply.
  long long integer = 0;
  /// The elements of an array reply.
  std::vector<raw_reply> elements;

  /// True for a bulk string reply.
  bool is_string() const noexcept { return type == kind::string; }
  /// True for a status (simple string) reply.
  bool is_status() const noexcept { return type == kind::status; }
  /// True for an error reply.
  bool is_error() const noexcept { return type == kind::error; }
  /// True for an integer reply.
  bool is_integer() const noexcept { return type == kind::integer; }
  /// True for a nil reply (null bulk string or null array).
  bool is_nil() const noexcept { return type == kind::nil; }
  /// True for an array reply.
  bool is_array() const noexcept { return type == kind::array; }
  /// True for the status reply `+OK`.
  bool is_ok() const noexcept { return type == kind::status && str == "OK"; }

  /// Structural equality (type and all fields).
  bool operator==(const raw_reply&) const = default;

  /// A human-readable rendering, e.g. `"abc"`, `+OK`, `-ERR x`, `(integer) 3`, `(nil)`, `[...]`.
  std::string to_string() const;
};

/// Prints `r.to_string()`; lets gtest show replies in failure messages.
std::ostream& operator<<(std::ostream& os, const raw_reply& r);

/// Thrown by raw_client when a send or receive does not complete within its timeout.
class timeout_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A blocking RESP2 client connection over TCP (POSIX sockets).
///
/// Not thread-safe: use one object per thread. I/O errors and error-free-but-broken streams throw
/// `std::runtime_error` and close the connection. A receive timeout throws `timeout_error` and
/// keeps the connection open: the late reply is still pending and can be fetched with
/// `read_reply()`.
class raw_client {
 public:
  /// Connects to `host:port` (name or numeric address) and, if `password` is non-empty, sends
  /// `AUTH password`. Throws `std::runtime_error` if connecting or AUTH fails.
  raw_client(std::string host, std::uint16_t port, std::string password = {});
  /// Closes the connection.
  ~raw_client();
  /// Moves the connection; the source is left closed.
  raw_client(raw_client&& other) noexcept;
  /// Moves the connection; the previous one of `*this` is closed.
  raw_client& operator=(raw_client&& other) noexcept;
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  /// Sends one command (arguments are binary-safe) and waits for its reply. Error replies are
  /// returned, not thrown. Throws `timeout_error` on timeout, `std::runtime_error` on I/O error.
  raw_reply command(std::vector<std::string> args);
  /// Convenience form of `command`: `client({"SET", "k", "v"})`.
  raw_reply operator()(std::initializer_list<std::string_view> args);
  /// Sends all commands in one write, then reads one reply per command, in order.
  std::vector<raw_reply> pipeline(const std::vector<std::vector<std::string>>& cmds);
  /// Reads one more reply or push message (SUBSCRIBE messages, MONITOR lines, a late reply after a
  /// timeout). Throws like `command`.
  raw_reply read_reply();

  /// Sets the send and receive timeout (SO_SNDTIMEO/SO_RCVTIMEO); zero means none. Default 10 s.
  void set_timeout(std::chrono::milliseconds timeout);
  /// The current timeout.
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  /// True until the connection is closed (explicitly or after an I/O error).
  bool connected() const noexcept { return fd_ >= 0; }
  /// Closes the connection now (e.g. to simulate a client going away). Idempotent.
  void close() noexcept;

 private:
  struct reader_deleter {
    void operator()(::redisReader* r) const noexcept;
  };

  void send_all(std::string_view data);
  void apply_timeout();
  [[noreturn]] void fail(const std::string& what);

  int fd_ = -1;
  std::unique_ptr<::redisReader, reader_deleter> reader_;
  std::chrono::milliseconds timeout_{10'000};
};

}  // namespace redlease::test
