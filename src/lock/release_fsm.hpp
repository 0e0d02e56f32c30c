// SPDX-License-Identifier: MIT
// The decisions of one release (an unlock) and its retries, sans-io, in the style of the watchdog's
// schedule and of boost.redis's `*_fsm`: the engine sends, feeds each reply to `resume`, and does
// what the returned action says; the state machine never sends, reads a clock or touches a hold.
//
// A release whose reply did not come (the connection dropped, or it timed out and may still run)
// is sent again in retry mode, under the same request id: the script's latch counts it once. After
// three tries its outcome stays unknown, and the next unlock of the hold continues it (in doubt).
// A WRONGTYPE asks the key's type before it is believed: a lock replaced by a key of another type is
// lost; another key of the kind's (a fair queue) holding the wrong type leaves the hold standing.
#pragma once

#include <optional>
#include <string_view>
#include <system_error>

#include "lock/protocol.hpp"

namespace redlease::detail {

/// What the engine knows of the hold when a release settles.
struct release_facts {
  bool has_hold = false;         // the client knows of a hold (else: an unlock of a hold it never saw)
  bool removed = false;          // the hold left the table meanwhile
  bool lost = false;             // the hold was found lost before
  std::size_t levels = 0;        // its levels before this release
  bool closed = false;           // the client is closed
  std::optional<lost_reason> seen;  // a renewal found it gone while this release was out
  lost_reason not_held_reason = lost_reason::deleted;  // the kind's (lock_protocol::not_held_reason)
  bool sets_remaining_lease = false;  // the kind's (lock_protocol::release_sets_remaining_lease)
};

/// What settling a release does to the hold, in this order, and what the caller hears.
struct release_outcome {
  enum class level { none, drop_lost, erase, pop };
  bool set_in_doubt = false;    // the next unlock continues this one (retry mode, same request id)
  bool clear_in_doubt = false;  // settled: the next unlock starts afresh
  level change = level::none;   // drop_lost: one level of a lost hold (the hold goes with its last)
  std::optional<lost_reason> drop_reason;  // drop_lost: mark it lost for this first, if not yet
  std::optional<lost_reason> mark_lost;    // after the level change: the hold is lost (on_lost runs)
  bool set_deadline = false;    // levels remain: their lease counts from this release
  bool report_seen = false;     // a renewal's earlier "gone" now stands (unless lost or removed)
  bool reschedule = false;      // levels remain: the watchdog takes the hold again (unless lost)
  std::error_code result;       // what the unlock's caller hears
};

class release_fsm {
 public:
  /// `attempt`: 0 for a first sending, 1 for one that continues a release in doubt.
  explicit release_fsm(int attempt, long long expected) : attempt_(attempt), expected_(expected) {}

  enum class next {
    send_again,  // the reply did not come: send again, in retry mode (`attempt()` says which)
    ask_type,    // WRONGTYPE: ask the lock key's TYPE, then `settle_type`
    settle,      // settle with `settle`
  };
  /// After the release script's reply (`ec` as the request completed). Reads `has_hold`, `removed`
  /// (the client's hold left its table meanwhile: nothing to retry for), `lost` and `closed` of `f`.
  next resume(std::error_code ec, const release_facts& f);
  /// Settles after the script's reply: `res` is what it said (ignored when `ec` is set).
  release_outcome settle(const release_facts& f, std::error_code ec, release_result res) const;
  /// Settles after the TYPE reply: `type` is the key's type (empty if the TYPE failed), `own_type`
  /// the kind's.
  release_outcome settle_type(const release_facts& f, std::error_code ec, std::string_view type,
                              std::string_view own_type) const;

  int attempt() const noexcept { return attempt_; }
  long long expected() const noexcept { return expected_; }
  /// Whether `ec` leaves the release's outcome unknown (it may have run).
  static bool unknown(std::error_code ec) noexcept;

  static constexpr int max_attempt = 3;

 private:
  int attempt_;
  long long expected_;
};

}  // namespace redlease::detail
