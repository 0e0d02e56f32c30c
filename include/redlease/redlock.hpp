// SPDX-License-Identifier: MIT
/// @file
/// `redlease::redlock`: one mutex held over N independent Redis masters (RedLock), interoperable
/// with redsync and node-redlock on the same servers. docs/redlock.md describes it.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_type.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "redlease/detail/async.hpp"
#include "redlease/lock.hpp"

namespace redlease {

class client;

namespace detail {
class redlock_impl;
struct redlock_cancel;
}

/// The settings of a `redlock`. A plain value type.
struct redlock_options {
  /// The TTL of the keys on every node (the lease). Zero: the first client's
  /// `config::watchdog_timeout`. The lock is valid for the TTL minus the attempt's time minus the
  /// clock drift allowance (1 % of the TTL plus 2 ms), and renewed every third of it.
  std::chrono::milliseconds ttl{0};
  /// How long one node may take to answer one request before it counts as unknown. Zero: max(50 ms,
  /// ttl / 100). Far below the TTL: a hung node costs an attempt at most this.
  std::chrono::milliseconds node_timeout{0};
  /// The first window of the random delay between failed attempts; it doubles up to `retry_cap`.
  /// The delay is drawn (from the CSPRNG) from the window's upper half.
  std::chrono::milliseconds retry_first{50};
  /// The largest window of the random delay between failed attempts.
  std::chrono::milliseconds retry_cap{400};
  /// Whether a renewal that finds a node without the key (restarted empty, evicted) takes it again
  /// there with our value, so that the quorum does not erode. Off: such a node counts as lost.
  bool retake = true;
  /// Whether every grant and re-take also draws the node's fencing token (one `INCR` of the node's
  /// own sequence `redlease_redlock_token:{name}` in the acquire script), read with
  /// `redlock::fencing_tokens()`. Off: no token key is touched. docs/redlock.md, "Fencing", says
  /// what these tokens can and cannot guard.
  bool fencing_tokens = false;
};

/// One node's fencing token of a held RedLock (`redlock_options::fencing_tokens`).
struct redlock_token {
  /// The node: its index in the list of clients the handle was built with. A resource that checks
  /// the tokens must know the nodes by a name that does not change: give the clients in one order.
  std::size_t node = 0;
  /// The node's token for this hold: larger than every token that node handed out for the name
  /// before (below 2^53; docs/fencing.md's rules for one sequence apply per node).
  std::uint64_t token = 0;
};

/// A RedLock mutex: one lock named `name` over N independent Redis masters, one `client` per
/// master. It is held while a majority (N/2 + 1) of the nodes hold one random value under the key
/// `name` (a plain string with a TTL: redsync's and node-redlock's layout, so each excludes the
/// other). N may be 1 or more; RedLock is meant for 3 or 5 masters, where it survives the loss or
/// the failover of a minority of them.
///
/// An attempt goes to every node at once, each with `redlock_options::node_timeout`; it succeeds
/// when a majority granted while the validity (TTL − elapsed − drift) is still positive. A failed
/// attempt releases on every node, those that did not answer included, before a random delay and
/// the next attempt. While held, a watchdog extends the keys every third of the TTL, takes a node
/// that lost the key again (`redlock_options::retake`), and tells `on_lost` once a majority is lost
/// or the validity ran out.
///
/// One handle is one holder: it is not reentrant, and a `lock` or `try_lock` on a handle that holds
/// (or is acquiring) fails with `errc::would_deadlock`. A hold that was lost still counts until
/// `unlock()`, which then says `errc::lock_lost`. RedLock gives no single growing fencing token (that
/// needs consensus); with `redlock_options::fencing_tokens` it gives one token per node that granted,
/// the best available (docs/redlock.md, "Fencing").
///
/// Thread-safety: every member function may be called from any thread. The blocking calls must not
/// be made on any of the clients' I/O threads (nor, with an executor you supplied, on a thread that
/// runs it): they fail with `errc::would_deadlock` there. The first client's I/O thread runs the
/// handle's timers and callbacks. A closed client's node counts as not answering; once the first
/// client is closed, every call fails with `errc::client_closed` (a held lock expires with its TTL).
class redlock {
 public:
  /// A RedLock named `name` over `nodes` (one client per master, in any order, each a distinct
  /// server). No I/O. The handle keeps the clients' state alive, not their connections: closing a
  /// client fails the requests to its node.
  /// @throws redlease::error `errc::invalid_argument` if `nodes` is empty, `name` is empty, or an
  /// option is negative, or `retry_first` exceeds `retry_cap`.
  redlock(const std::vector<std::reference_wrapper<client>>& nodes, std::string name, redlock_options opts = {});
  /// Stops the watchdog and, if held, sends the release to every node without waiting for it (keys
  /// not released expire with their TTL). Once it returns, the `on_lost` callback is not running and
  /// never runs again. Never throws.
  ~redlock();
  /// Takes over `other`'s state; `other` may then only be destroyed or assigned to.
  redlock(redlock&&) noexcept;
  /// Releases this handle's state as the destructor does, then takes over `other`'s.
  redlock& operator=(redlock&&) noexcept;
  redlock(const redlock&) = delete;
  redlock& operator=(const redlock&) = delete;

  /// One attempt, no retry: true if acquired. Nodes that refuse for a reason another attempt would
  /// meet again (`wrong_type`: the key holds another type; `no_permission`; `unknown_command`;
  /// `server_error`), enough of them to stand in the way of a majority, end the acquisition with the
  /// first one's error (its words in `last_error_text()`), here and in every acquiring call below;
  /// timeouts and lost connections are retried.
  /// @throws redlease::error (`would_deadlock`, `invalid_argument`, the refusals above)
  bool try_lock();
  /// As above; on failure sets `ec` and returns false.
  bool try_lock(std::error_code& ec);
  /// Attempts until acquired or `wait` passed (an attempt starts only while the wait lasts): true if
  /// acquired. Refusals are not errors: false with `ec` clear.
  /// @throws redlease::error (`would_deadlock`, `invalid_argument` for a negative wait)
  bool try_lock(std::chrono::milliseconds wait);
  /// As above; on failure sets `ec` and returns false.
  bool try_lock(std::chrono::milliseconds wait, std::error_code& ec);
  /// Attempts until acquired, however long it takes.
  /// @throws redlease::error (`would_deadlock`)
  void lock();
  /// As above; on failure sets `ec`.
  void lock(std::error_code& ec);
  /// Releases on every node in parallel and waits for every node's answer or its timeout. Success
  /// when a majority deleted our value. `errc::lock_lost` if the lock was lost (told to `on_lost`
  /// before) or a majority had none of our value; `errc::not_owner` if the handle does not hold it;
  /// with too many nodes unanswered to tell, the first node's error (the keys left expire with their
  /// TTL). The handle no longer holds the lock afterwards, whatever the outcome.
  /// @throws redlease::error
  void unlock();
  /// As above; on failure sets `ec`.
  void unlock(std::error_code& ec);

  /// Attempts until acquired or `wait` passed, without blocking (zero: one attempt). Completion
  /// signature `void(std::error_code, bool acquired)`, posted to the handler's executor (the first
  /// client's when it has none), never run inside this call. A refusal is `false` with no error;
  /// `would_deadlock` while the handle holds or is acquiring; `invalid_argument` for a negative
  /// wait; `client_closed` when the first client closes meanwhile. Per-operation cancellation (an
  /// Asio cancellation slot of any type) ends the acquisition with `errc::operation_aborted`, after
  /// sending the release to every node behind its attempt: nothing of it is held afterwards (a
  /// grant still on the wire is deleted as it lands). A cancellation after the completion was
  /// decided does nothing.
  template <class CompletionToken>
  auto async_try_lock(std::chrono::milliseconds wait, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this](auto handler, std::chrono::milliseconds w) {
          auto slot = asio::get_associated_cancellation_slot(handler);
          std::shared_ptr<detail::redlock_cancel> x;
          if (slot.is_connected()) {
            x = new_cancel();
            slot.assign([impl = std::weak_ptr<detail::redlock_impl>(impl_), x](asio::cancellation_type type) {
              if (type != asio::cancellation_type::none) request_cancel(impl, x);
            });
          }
          bool clear = x != nullptr;
          async_try_lock_impl(w, detail::erase_handler<std::error_code, bool>(std::move(handler), executor(), clear),
                              std::move(x));
        },
        token, wait);
  }
  /// Releases as `unlock()` does, without blocking. Completion signature `void(std::error_code)`,
  /// posted to the handler's executor (the first client's when it has none).
  template <class CompletionToken>
  auto async_unlock(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code)>(
        [this](auto handler) {
          async_unlock_impl(detail::erase_handler<std::error_code>(std::move(handler), executor()));
        },
        token);
  }
  /// The executor the handle's timers and callbacks run on: the first client's. Thread-safe.
  asio::any_io_executor executor() const noexcept;

  /// Until when the lock is surely held (steady clock): the last validity a majority gave. A time in
  /// the past when not held.
  std::chrono::steady_clock::time_point valid_until() const;
  /// True while held, not known lost, and before `valid_until()`.
  bool valid() const;
  /// A token that is stop-requested when the current hold is lost (at the moment `on_lost` is
  /// told); one that never stops when not held. Its stop callbacks run on the first client's I/O
  /// thread and must not throw (`request_stop` is `noexcept`).
  std::stop_token lost_token() const;
  /// The fencing tokens of the current hold, one per node that granted it (or re-took it since), in
  /// node order; empty when not held or without `redlock_options::fencing_tokens`. No I/O.
  std::vector<redlock_token> fencing_tokens() const;
  /// Sets the callback told once when a held lock is lost (`lost_reason::taken`, `deleted`,
  /// `quorum`, or `expired`). It runs on the first client's I/O thread, never inside a call of this
  /// handle; it must not block. An exception it throws is reported through that client's
  /// `config::on_error`. Replacing it waits for a running callback to return (unless called from
  /// inside it).
  void on_lost(lost_handler cb);

  /// The lock's name (the key on every node).
  const std::string& name() const noexcept;
  /// How many nodes (masters).
  std::size_t size() const noexcept;
  /// The TTL in use (after defaults).
  std::chrono::milliseconds ttl() const noexcept;
  /// The per-node timeout in use (after defaults).
  std::chrono::milliseconds node_timeout() const noexcept;
  /// The random value written on the nodes by the current (or last) acquisition; empty before the
  /// first. For tests and diagnostics (`GET name` on a node shows it while held).
  std::string value() const;

 private:
  void async_try_lock_impl(std::chrono::milliseconds wait, detail::unique_function<void(std::error_code, bool)> h,
                           std::shared_ptr<detail::redlock_cancel> cancel);
  static std::shared_ptr<detail::redlock_cancel> new_cancel();
  static void request_cancel(const std::weak_ptr<detail::redlock_impl>& impl,
                             const std::shared_ptr<detail::redlock_cancel>& x);
  void async_unlock_impl(detail::unique_function<void(std::error_code)> h);
  std::shared_ptr<detail::redlock_impl> impl_;
};

}  // namespace redlease
