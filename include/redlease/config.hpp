// SPDX-License-Identifier: MIT
/// @file
/// Client configuration and URL parsing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace redlease {

/// How and where a `client` connects, and the timing of its locks.
///
/// A plain value type; copy it freely. `from_url` fills the address and credentials; the timing
/// fields keep their defaults unless set.
struct config {
  /// Host name or address for TCP (ignored when `unix_socket` is set).
  std::string host = "127.0.0.1";
  /// TCP port.
  std::uint16_t port = 6379;
  /// Path of a Unix-domain socket; when non-empty it is used instead of host/port.
  std::string unix_socket;
  /// ACL user for `AUTH user password`; empty means `AUTH password` (the default user).
  std::string username;
  /// Password; empty means no AUTH.
  std::string password;
  /// Database number to SELECT after connecting (0 is not selected explicitly).
  int database = 0;
  /// Name set with CLIENT SETNAME on every connection (visible in CLIENT LIST); empty: none.
  std::string client_name = "redlease";

  /// Bound on one connection attempt (resolve + connect + handshake).
  std::chrono::milliseconds connect_timeout{2000};
  /// Bound on every request, from the moment it is issued to its reply.
  std::chrono::milliseconds request_timeout{5000};
  /// First delay before reconnecting; it doubles per failed attempt, with jitter, up to the max.
  std::chrono::milliseconds reconnect_min_delay{50};
  /// Upper bound of the reconnect delay.
  std::chrono::milliseconds reconnect_max_delay{2000};

  /// How often the idle pub/sub connection is PINGed; a PING unanswered within `request_timeout`
  /// drops it, and it reconnects and resubscribes (waiters then retry at once). 0 disables it.
  std::chrono::milliseconds health_check_interval{3000};

  /// Lease of locks taken without an explicit lease; they are renewed every third of it
  /// (Redisson's `lockWatchdogTimeout`, default 30 s).
  std::chrono::milliseconds watchdog_timeout{30000};
  /// Most keys renewed by one script call of the watchdog (Redisson: 100).
  std::size_t watchdog_batch_size = 256;
  /// A mutex waiter whose holder may not publish on release (another library) re-checks at least
  /// this often. Not used while keyspace notifications deliver the key's del/expired events.
  std::chrono::milliseconds mutex_poll_cap{100};

  /// Parses `redis://[user:password@]host[:port][/db]`, `unix:///path.sock[?db=N]` or
  /// `redis+unix://`, and rejects `rediss://` (TLS) with `errc::tls_not_supported`.
  /// User and password are percent-decoded. Timing fields keep their defaults.
  /// @throws redlease::error with `errc::invalid_url` or `errc::tls_not_supported`.
  static config from_url(std::string_view url);
  /// As above; on failure sets `ec` and returns a default config.
  static config from_url(std::string_view url, std::error_code& ec);

  /// The address as a URL without the password, for messages and logs.
  std::string redacted_url() const;
};

}  // namespace redlease
