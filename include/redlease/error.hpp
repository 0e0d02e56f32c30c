// SPDX-License-Identifier: MIT
/// @file
/// Error codes and the exception type of redlease.
///
/// Every operation reports failure as a `std::error_code` in the `redlease` category (async
/// completions and the `std::error_code&` overloads) or as a thrown `redlease::error` (the throwing
/// overloads). Contention is not an error: `try_lock` returns `false`.
#pragma once

#include <stdexcept>
#include <string>
#include <system_error>

namespace redlease {

/// The error conditions redlease reports. Values are stable; 0 is never used.
enum class errc {
  /// Connecting failed (refused, unreachable, name resolution failed).
  connect_failed = 1,
  /// No connection could be made within `config::connect_timeout`.
  connect_timeout,
  /// The connection dropped while the request was in flight; the command may or may not have run.
  connection_lost,
  /// The server did not answer within `config::request_timeout`.
  request_timeout,
  /// AUTH was refused (wrong password or ACL user) or the server demands a password we lack.
  auth_failed,
  /// SELECT of the configured database failed.
  select_failed,
  /// The peer does not speak the Redis protocol (RESP2), or broke it (a reply over the configured
  /// bounds): the connection was dropped and is re-established. The message shows its first bytes.
  protocol_error,
  /// The server answered with an error reply; its text is kept in the exception message.
  server_error,
  /// The server reports a key of the wrong type (e.g. a mutex used on a Redisson hash).
  wrong_type,
  /// The URL could not be parsed.
  invalid_url,
  /// `rediss://` (TLS) is not supported yet.
  tls_not_supported,
  /// An argument is out of range: empty name, negative/zero/overflowing duration, ...
  invalid_argument,
  /// The client was closed (or destroyed) before the operation completed.
  client_closed,
  /// The operation was cancelled.
  operation_aborted,
  /// unlock by an owner that does not hold the lock (Redisson's IllegalMonitorStateException).
  not_owner,
  /// The lock was held by this owner but is gone: expired, deleted or taken by someone else.
  lock_lost,
  /// The call would deadlock: re-acquiring a non-reentrant mutex, or a blocking call made on the
  /// client's own I/O thread.
  would_deadlock,
  /// The server is busy (BUSY: a script is running), loading (LOADING) or out of memory (OOM).
  server_busy,
  /// The server is a read-only replica (READONLY).
  server_readonly,
  /// A well-formed reply that is not what the operation expects: a value of the wrong shape, or a
  /// key holding something that is not a number where one is needed. The message names the key.
  bad_reply,
};

/// The `std::error_category` of `redlease::errc`. Thread-safe; the object lives forever.
const std::error_category& error_category() noexcept;

/// Makes a `std::error_code` in redlease's category.
///
/// The codes compare equal to the portable conditions they correspond to, so generic code works:
/// `request_timeout` and `connect_timeout` == `std::errc::timed_out`, `operation_aborted` ==
/// `std::errc::operation_canceled` (the condition of Asio's `asio::error::operation_aborted`),
/// `invalid_argument` == `std::errc::invalid_argument`, `would_deadlock` ==
/// `std::errc::resource_deadlock_would_occur`, `connect_failed` == `std::errc::connection_refused`,
/// `connection_lost` == `std::errc::connection_reset`, `not_owner` ==
/// `std::errc::operation_not_permitted`, `server_busy` == `std::errc::device_or_resource_busy`,
/// `protocol_error` == `std::errc::protocol_error`, `bad_reply` == `std::errc::bad_message`. They
/// also match the same conditions in Asio's system category: `ec ==
/// asio::error_code(asio::error::operation_aborted).default_error_condition()` holds for
/// `errc::operation_aborted`. (Two *codes* of different categories never compare equal in C++.)
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// The exception thrown by the throwing overloads. `code()` is the error code; `what()` carries the
/// context and, for server error replies, the server's own text.
class error : public std::system_error {
 public:
  /// Wraps `ec` with a context message.
  error(std::error_code ec, const std::string& what) : std::system_error(ec, what) {}
  /// Wraps `ec` alone.
  explicit error(std::error_code ec) : std::system_error(ec) {}
};

/// Throws `redlease::error(ec, what)` if `ec` is set. Used by the throwing overloads.
void throw_if(const std::error_code& ec, const char* what);

}  // namespace redlease

template <>
struct std::is_error_code_enum<redlease::errc> : std::true_type {};
