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
  /// TLS was requested (`config::tls.enabled`) for a unix-socket connection, which redlease does
  /// not support. (Before TLS support, `rediss://` URLs were rejected with it.)
  tls_not_supported,
  /// An argument is out of range: empty name, negative/zero/overflowing duration, a read hold
  /// nested more than 1,000 deep, ...
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
  /// client's own I/O thread (with an executor you supplied: on a thread that runs its context, when
  /// no other thread runs the client's strand).
  would_deadlock,
  /// The server is busy (BUSY: a script is running; MASTERDOWN, TRYAGAIN). Transient: acquisitions
  /// retry it within their wait.
  server_busy,
  /// The server is a read-only replica (READONLY).
  server_readonly,
  /// A well-formed reply that is not what the operation expects: a value of the wrong shape, or a
  /// key holding something that is not a number where one is needed. The message names the key.
  bad_reply,
  /// The ACL user may not run a command or touch a key or channel (NOPERM). Configuration: fails at
  /// once; the message names what the server named. docs/deployment.md has the ACL lines.
  no_permission,
  /// The server does not know a command redlease needs: renamed or disabled (`rename-command`).
  /// Configuration: fails at once.
  unknown_command,
  /// The server is out of memory (`maxmemory` with `noeviction`) and refused a write. Transient:
  /// acquisitions retry it within their wait; releases work regardless.
  server_oom,
  /// Fewer replicas than `min-replicas-to-write` are connected (NOREPLICAS). Transient: acquisitions
  /// retry it within their wait.
  no_replicas,
  /// The server refused the connection: `maxclients` reached.
  server_full,
  /// The server is loading its dataset (LOADING). Transient.
  server_loading,
  /// The TLS handshake failed for a reason none of the codes below names (no common protocol
  /// version or cipher, a certificate rejected for another reason, an alert from the server). The
  /// message carries OpenSSL's words.
  tls_handshake_failed,
  /// The server's certificate is not signed by a CA this client trusts (or is self-signed). Set
  /// `config::tls.ca_file` (`--cacert`) to the CA that signed it. Configuration: fails at once.
  tls_untrusted_certificate,
  /// The server's certificate does not name the host connected to. Connect by a name it lists, or
  /// set `config::tls.verify_name` (`--sni`) to one. Configuration: fails at once.
  tls_name_mismatch,
  /// The server's certificate has expired (or is not valid yet). Renew it on the server (or check
  /// this machine's clock). Configuration: fails at once.
  tls_certificate_expired,
  /// The server requires a client certificate (`tls-auth-clients yes`) and refused the connection
  /// without one (or rejected the one sent). Set `config::tls.cert_file` and `key_file`
  /// (`--cert`, `--key`). Configuration: fails at once.
  tls_client_certificate_required,
  /// Plaintext to a TLS port: the server reset the plaintext connection before any reply (what a
  /// Redis TLS port does) and answered a TLS handshake on a second connection (the check that
  /// tells it from a refusing proxy or a server going down: those stay `connect_failed`). Use
  /// `rediss://`. Configuration: fails at once.
  tls_expected_by_server,
  /// The server does not speak TLS on this port: it answered the TLS hello with bytes that are
  /// not TLS, or did not answer it at all within `config::connect_timeout` (what a Redis plaintext
  /// port does; a stalled server looks the same, so it is retried like `connect_timeout`). Use
  /// `redis://`, or the server's TLS port.
  tls_not_offered_by_server,
  /// A file of `config::tls` (CA, certificate, key) could not be loaded, or the key does not match
  /// the certificate. The message names the field and OpenSSL's reason. Configuration: fails at once.
  tls_bad_files,
  /// Fewer replicas than `config::replica_ack` asks for acknowledged a write in time (WAIT). An
  /// acquisition is rolled back first, then retried within its wait (`replica_ack.retry`) or
  /// reported. Renewals and releases ran on the master and stand.
  not_replicated,
  /// No Sentinel answered, or none knows the configured master name. The message names each
  /// Sentinel tried and what it said.
  no_sentinel,
  /// The master changed (a Sentinel failover) and the lock's key had not reached the new master:
  /// the `cause` of a lock lost that way (`lost_info`).
  master_switched,
  /// A wait without a deadline (`lock()`, `async_lock`, `lock_and_get_token`) ran out of the
  /// `max_attempts` of its backoff `wait_strategy` while the lock stayed held by someone else: it
  /// ends without the lock, and says so (a wait with a deadline, `try_lock(wait)`, returns false
  /// instead). Not a cancellation: nothing aborted it.
  attempts_exhausted,
  /// A watchdog hold reached `config::max_hold`: the watchdog stopped renewing it, and its holder
  /// was told as of a loss (the `cause` in `lost_info`); an unlock then fails with `lock_lost`.
  max_hold_exceeded,
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
/// `std::errc::operation_not_permitted`, `server_busy` and `server_loading` ==
/// `std::errc::device_or_resource_busy`, `no_permission` == `std::errc::permission_denied`,
/// `unknown_command` == `std::errc::function_not_supported`, `server_oom` ==
/// `std::errc::not_enough_memory`,
/// `protocol_error` == `std::errc::protocol_error`, `bad_reply` == `std::errc::bad_message`,
/// `tls_not_supported` == `std::errc::protocol_not_supported`, `tls_client_certificate_required` ==
/// `std::errc::permission_denied`, `tls_expected_by_server` == `std::errc::connection_reset`,
/// `tls_not_offered_by_server` == `std::errc::protocol_error` (the other TLS codes have no
/// portable counterpart), `attempts_exhausted` == `std::errc::resource_unavailable_try_again`. They
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

  /// The type of `whole_message`.
  struct whole_message_t {
    explicit whole_message_t() = default;
  };
  /// Selects the constructor whose `what` is the whole message.
  static constexpr whole_message_t whole_message{};
  /// Wraps `ec` with `what` as the whole message: `what()` is `what`, without `ec.message()`
  /// appended, for a message that already says what the code says (a TLS failure's reason and
  /// remedy, what is wrong with a URL).
  error(std::error_code ec, const std::string& what, whole_message_t) : std::system_error(ec) {
    static_cast<std::runtime_error&>(*this) = std::runtime_error(what);
  }
};

/// The words behind the last error reported to this thread: the server's own reply text (`NOPERM
/// this user has no permissions to run the 'evalsha' command`, `OOM command not allowed ...`), or
/// what was wrong with bytes that are not RESP. Set when a blocking call fails (before it returns or
/// throws; the exception's message carries it too) and for the duration of an async completion
/// handler that receives an error. Empty when the error has no words beyond its code. Thread-local.
const std::string& last_error_text() noexcept;

/// Throws `redlease::error(ec, what)` if `ec` is set, with `last_error_text()` appended to `what`.
/// Used by the throwing overloads. A TLS failure's text says what its code says, and more (the
/// reason and what to set): the message then ends with the text, without the code's own words.
void throw_if(const std::error_code& ec, const char* what);

namespace detail {
/// @private This thread's `last_error_text()`, writable.
std::string& error_text_slot() noexcept;
/// @private Sets this thread's error text for its lifetime, then restores the previous one.
class scoped_error_text {
 public:
  explicit scoped_error_text(std::string text) : saved_(std::move(error_text_slot())) {
    error_text_slot() = std::move(text);
  }
  ~scoped_error_text() { error_text_slot() = std::move(saved_); }
  scoped_error_text(const scoped_error_text&) = delete;
  scoped_error_text& operator=(const scoped_error_text&) = delete;

 private:
  std::string saved_;
};
}  // namespace detail

}  // namespace redlease

template <>
struct std::is_error_code_enum<redlease::errc> : std::true_type {};
