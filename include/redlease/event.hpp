// SPDX-License-Identifier: MIT
/// @file
/// `redlease::lock_event`: what `config::on_event` is told, for logging and tracing systems.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>

namespace redlease {

/// What happened to a lock, as `config::on_event` is told.
struct lock_event {
  /// The kind of event.
  enum class type : std::uint8_t {
    acquired,        ///< an acquisition was granted (`waited`: from the call to the grant)
    released,        ///< a hold was given back and freed (`held`: from its grant)
    renewal_failed,  ///< a watchdog renewal failed (`cause`, `detail`); the hold may still be valid
    lost,            ///< a hold was lost (`reason_text`, `cause`; `held`: from its grant)
    failover,        ///< the master changed (`detail` says how); every hold is checked on the new one
  };
  type what = type::acquired;
  /// The lock's name (empty for `failover`).
  std::string name;
  /// The lock's kind, as `static_cast<int>(lock_kind)` (redlease/lock.hpp).
  int kind = 0;
  /// The owner that acquired, released or lost it.
  std::uint64_t owner = 0;
  /// `acquired`: how long the acquisition waited.
  std::chrono::nanoseconds waited{0};
  /// `released`, `lost`: how long the hold lasted.
  std::chrono::nanoseconds held{0};
  /// `lost`: "expired", "deleted", "taken", "quorum" or "max_hold" (`lost_reason`).
  const char* reason_text = "";
  /// `renewal_failed`, `lost`: the error behind it, when there was one.
  std::error_code cause;
  /// The server's words or what changed, when known.
  std::string detail;
};

}  // namespace redlease
