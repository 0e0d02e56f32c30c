// SPDX-License-Identifier: MIT
// The redirect decisions of one cluster request, and the gate that paces slot-table refreshes, as
// sans-io machines (unit-tested without a server or a clock): the cluster topology (not built yet,
// docs/cluster.md) sends, feeds each outcome to `resume` and does what the action says.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <system_error>

#include "net/connection.hpp"
#include "redlease/reply.hpp"
#include "topology/cluster_map.hpp"

namespace redlease::detail {

/// The outcome of one send of a request to a cluster node, as `cluster_route_fsm::resume` takes it.
/// A plain value; not synchronised.
struct route_answer {
  /// What the send came to.
  enum class kind : std::uint8_t {
    ok,                  ///< a reply that is not a cluster error: hand it up
    moved,               ///< MOVED slot node
    ask,                 ///< ASK slot node
    tryagain,            ///< TRYAGAIN
    clusterdown,         ///< CLUSTERDOWN
    loading,             ///< LOADING
    readonly,            ///< READONLY
    masterdown,          ///< MASTERDOWN
    error_before_write,  ///< no connection, or it failed before the request was written: safe to resend
    error_after_write,   ///< timeout or connection lost after the request was written: it may have run
    other_error,         ///< any other failure (`ec`): not retried
  };
  /// Which outcome.
  kind type = kind::ok;
  /// The node that answered (or the one the send was for, when there was no answer).
  node_address from;
  /// moved / ask: the slot the server named.
  std::uint16_t slot = 0;
  /// moved / ask: the node the server named.
  node_address node;
  /// error_before_write, error_after_write, other_error: what went wrong.
  std::error_code ec;

  /// The answer for reply `r` received from node `from`: its cluster error kind (MOVED/ASK parsed
  /// with `from.host` for an empty host), else ok (other error replies are the caller's business).
  /// A MOVED/ASK that does not parse is `other_error` with `errc::bad_reply`. Pure.
  static route_answer from_reply(const reply& r, const node_address& from);
};

/// What the driver of a request does next. A plain value; not synchronised.
struct route_action {
  /// What to do.
  enum class kind : std::uint8_t {
    done,                     ///< hand the reply up
    send_to,                  ///< send the request to `node` now
    asking_then_send,         ///< write ASKING and the request back to back on one connection to `node`
    retry_after,              ///< send to `node` again after `delay`
    refresh_and_retry_after,  ///< ask for a slot-table refresh (refresh_gate), re-route after `delay`
    fail,                     ///< fail the request with `ec`
  };
  /// Which step.
  kind type = kind::done;
  /// send_to, asking_then_send, retry_after: the node to send to.
  node_address node;
  /// retry_after, refresh_and_retry_after: how long to wait first.
  std::chrono::milliseconds delay{0};
  /// send_to after MOVED: set the table's entry of this slot to `node` (cluster_map::patch).
  std::optional<std::uint16_t> patch_slot;
  /// send_to after MOVED: also ask for a refresh (through the refresh_gate).
  bool refresh = false;
  /// send_to after a MOVED that names the node that answered: close the connection to it and open a
  /// new one (re-resolving its name) before sending.
  bool reconnect = false;
  /// fail: the error to complete the request with.
  std::error_code ec;
};

/// The redirect and retry rules of one request (docs/cluster.md has the table), from its first
/// send to its end. Built with the request's deadline; `resume` takes the outcome of each send and
/// the time now, and returns what to do. Reads no clock; not synchronised (one request, one owner).
///
/// Rules: at most `max_redirects` MOVED/ASK are followed; MOVED patches the slot and asks for a
/// refresh, ASK touches nothing; a MOVED to the node that answered reconnects once, then fails;
/// TRYAGAIN, LOADING and MASTERDOWN retry the same node after a backoff, CLUSTERDOWN and READONLY
/// refresh and retry after it, as do errors before the request was written; an error after it was
/// written fails at once (the request may have run: the lock layer re-checks, it is never resent);
/// a retry that would start at or past the deadline fails with the last error
/// (`errc::request_timeout` when there was none).
///
/// Errors of `fail`: the error of the last answer (`server_busy` for TRYAGAIN, MASTERDOWN and
/// CLUSTERDOWN, `server_loading`, `server_readonly`, the connection error), `server_error` after too
/// many redirects or a repeated MOVED to the same node, `request_timeout`.
class cluster_route_fsm {
 public:
  /// The clock of the time points it takes (never read here).
  using clock = std::chrono::steady_clock;
  /// Redirects followed per request (Lettuce's maxRedirects).
  static constexpr int max_redirects = 5;
  /// The first retry's delay; it doubles per retry up to backoff_max.
  static constexpr std::chrono::milliseconds backoff_first{10};
  /// The longest delay between two retries.
  static constexpr std::chrono::milliseconds backoff_max{200};

  /// A request that must end by `deadline`.
  explicit cluster_route_fsm(clock::time_point deadline) noexcept : deadline_(deadline) {}

  /// The next step after `a`, at `now`.
  route_action resume(const route_answer& a, clock::time_point now);

  /// Redirects followed so far.
  int redirects() const noexcept { return redirects_; }
  /// Retries (after a backoff) so far.
  int retries() const noexcept { return retries_; }

 private:
  route_action fail(std::error_code ec);
  // A retry after the next backoff, or a failure when it would start at or past the deadline.
  route_action backoff(route_action::kind k, const node_address& node, std::error_code why, clock::time_point now);

  clock::time_point deadline_;
  std::error_code last_;  // the last retryable error seen
  int redirects_ = 0;
  int retries_ = 0;
  bool reconnected_ = false;  // a same-address MOVED was answered with a reconnect
};

/// Paces refreshes of the slot table: one in flight at a time (requests meanwhile join it), at
/// least `min_interval` from the end of one to the start of the next, and one due every `period`
/// even without a request. Reads no clock; not synchronised (the topology's executor owns it).
class refresh_gate {
 public:
  /// The clock of the time points it takes (never read here).
  using clock = std::chrono::steady_clock;
  /// The pacing.
  struct timing {
    /// From the end of one refresh to the start of the next, at least.
    std::chrono::milliseconds min_interval{200};
    /// A refresh is due this long after the end of the last one, even without a request.
    std::chrono::milliseconds period{5000};
  };
  /// What `want` decided.
  struct decision {
    enum class kind : std::uint8_t {
      start_now,  ///< start a refresh now (the gate counts it as in flight until `done`)
      in_flight,  ///< one is running: it answers this request too
      at,         ///< too soon after the last one: call `want` again at `when` (the same time for every request meanwhile)
    };
    /// Which of the three.
    kind type = kind::start_now;
    /// at: when to ask again; start_now: the time given.
    clock::time_point when{};
  };

  /// A gate with the default timing (200 ms, 5 s).
  refresh_gate() noexcept = default;
  /// A gate with timing `t`.
  explicit refresh_gate(timing t) noexcept : timing_(t) {}

  /// A refresh is wanted (after MOVED, CLUSTERDOWN, READONLY, a connection error, or because
  /// `next_due()` came).
  decision want(clock::time_point now) noexcept;
  /// The refresh in flight ended (whether it loaded a map or not).
  void done(clock::time_point now) noexcept;
  /// Whether a refresh is in flight.
  bool in_flight() const noexcept { return in_flight_; }
  /// When the periodic refresh is due: `period` after the end of the last one (the epoch of
  /// steady_clock before the first: due at once).
  clock::time_point next_due() const noexcept;

 private:
  timing timing_{};
  bool in_flight_ = false;
  std::optional<clock::time_point> last_done_;
};

}  // namespace redlease::detail
