// SPDX-License-Identifier: MIT
/// @file
/// `redlease::multi_lock`: several locks of any kind, on any clients, taken all or none
/// (Redisson's `RedissonMultiLock`, in parallel). docs/redlock.md, "MultiLock", describes it.
///
/// **Example**:
/// @code
/// redlease::client a{redlease::config::from_url("redis://10.0.0.1")}, b{...};
/// redlease::multi_lock ml({a.lock("orders:42"), b.read_lock("stock")});
/// ml.on_lost([](const redlease::multi_lost_info& i) { /* member i.member (i.name) lost: stop */ });
/// if (ml.try_lock(2s)) {
///   // ... while ml.valid() ...
///   ml.unlock();
/// }
/// @endcode
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_type.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "redlease/detail/async.hpp"
#include "redlease/lock.hpp"

namespace redlease {

namespace detail {
class multi_lock_impl;
struct multi_cancel;
}  // namespace detail

/// The settings of a `multi_lock`. A plain value type.
struct multi_lock_options {
  /// How long one attempt lets each member wait for its lock (cut to what is left of the caller's
  /// wait). Short, so that a multi lock never holds some members for long while it waits for
  /// others; a refused attempt gives back what it got and tries again after a random delay.
  std::chrono::milliseconds attempt_wait{100};
  /// The first window of the random delay between failed attempts; it doubles up to `retry_cap`.
  /// The delay is drawn (from the CSPRNG) from the window's upper half.
  std::chrono::milliseconds retry_first{50};
  /// The largest window of the random delay between failed attempts.
  std::chrono::milliseconds retry_cap{400};
};

/// What a `multi_lock`'s `on_lost` callback is told: which member was lost, and why.
struct multi_lost_info {
  std::size_t member = 0;  ///< the member's index in the list the multi lock was made from
  std::string name;        ///< the member's lock name
  lock_kind kind = lock_kind::reentrant;      ///< the member's kind
  lost_reason reason = lost_reason::expired;  ///< how the member was lost (its `lost_info::reason`)
  std::error_code cause;  ///< why its last renewals failed, when it expired after failed renewals
  std::string detail;     ///< the server's words for `cause`, when it gave any
};

/// Callback for a lost multi lock: runs once per lost hold, on the lost member's client's I/O
/// thread (the thread that runs that member's own `on_lost`); it must not block (blocking calls
/// there fail with `errc::would_deadlock`). An exception it throws is reported through that
/// client's `config::on_error`.
using multi_lost_handler = std::function<void(const multi_lost_info&)>;

/// A multi lock: holds every one of its members (reentrant, fair, read, write locks and mutexes,
/// made by any clients, on the same or different deployments) or none of them.
///
/// An attempt asks every member at once (`lock_handle::async_try_lock` with an owner of the multi
/// lock's own, from that member's `client::new_owner()`), each waiting at most
/// `multi_lock_options::attempt_wait`. When all granted, the multi lock is held. When one is
/// refused, the members granted are released at once and, within the caller's wait, the next
/// attempt follows a random delay (a window doubling from `retry_first` to `retry_cap`): holding
/// nothing while it waits, two multi locks that take the same members in opposite orders neither
/// deadlock nor livelock. An error of a member other than a refusal (`wrong_type`,
/// `client_closed`, `no_permission`, a timeout, ...) ends the acquisition with that error, after
/// the members granted are released. A member whose answer is unknown is undone by its own client.
///
/// While held, each member is renewed by its own client's watchdog. Losing any member is losing
/// the multi lock: `on_lost` is told once (which member, and why), `lost_token()` is stopped,
/// `valid()` turns false, the other members are released at once, and the next `unlock()` says
/// `errc::lock_lost`.
///
/// One multi lock is one holder, not tied to a thread: a `lock` or `try_lock` while it holds (or
/// is acquiring) fails with `errc::would_deadlock`; `unlock` without a hold, `errc::not_owner`.
/// Two members that are one lock name on one client are refused (`errc::invalid_argument`); the
/// same name on two clients of one server is not detected, and such a multi lock is never granted.
///
/// Thread-safety: every member function may be called from any thread. The blocking calls must not
/// be made on any member client's I/O thread (nor, with an executor you supplied, on a thread that
/// runs it): they fail with `errc::would_deadlock` there. Errors: the sync calls throw
/// `redlease::error` or report through their `std::error_code&` overload; the async calls complete
/// with the error code.
class multi_lock {
 public:
  /// A multi lock over `members` (any kinds, any clients; each taken with owners of the multi
  /// lock's own, so the handles' own holds and `on_lost` callbacks are not affected). No I/O. The
  /// handles' wait strategies are kept.
  /// @throws redlease::error `errc::invalid_argument` if `members` is empty, holds a moved-from
  /// handle or two members with one name on one client, or if `attempt_wait` is negative,
  /// `retry_first` not positive, or `retry_first` exceeds `retry_cap`.
  explicit multi_lock(std::vector<detail::lock_handle> members, multi_lock_options opts = {});
  /// If held, sends the release of every member without waiting for it; an acquisition under way
  /// is cancelled (what it got is released) and completes with `errc::operation_aborted`. Once it
  /// returns, the `on_lost` callback is not running and never runs again. Never throws.
  ~multi_lock();
  /// Takes over `other`'s state; `other` may then only be destroyed or assigned to.
  multi_lock(multi_lock&&) noexcept;
  /// Releases this multi lock's state as the destructor does, then takes over `other`'s.
  multi_lock& operator=(multi_lock&&) noexcept;
  multi_lock(const multi_lock&) = delete;
  multi_lock& operator=(const multi_lock&) = delete;

  /// One attempt, no wait: true if every member was granted.
  /// @throws redlease::error (`would_deadlock`, a member's error)
  bool try_lock();
  /// As above; on failure sets `ec` and returns false.
  bool try_lock(std::error_code& ec);
  /// Attempts until every member is granted or `wait` passed: true if acquired. Refusals are not
  /// errors: false with `ec` clear.
  /// @throws redlease::error (`would_deadlock`, `invalid_argument` for a negative wait, a member's
  /// error)
  bool try_lock(std::chrono::milliseconds wait);
  /// As above; on failure sets `ec` and returns false.
  bool try_lock(std::chrono::milliseconds wait, std::error_code& ec);
  /// Attempts until every member is granted, however long it takes.
  /// @throws redlease::error (`would_deadlock`, a member's error)
  void lock();
  /// As above; on failure sets `ec`.
  void lock(std::error_code& ec);
  /// Releases every member in parallel and waits for all of them. Reports the failure of the
  /// first member (in list order) that failed, after trying them all: `errc::lock_lost` if the
  /// multi lock was lost (told to `on_lost` before; nothing is sent then) or a member was lost
  /// meanwhile; `errc::not_owner` if it does not hold. Not held afterwards, whatever the outcome.
  /// @throws redlease::error
  void unlock();
  /// As above; on failure sets `ec`.
  void unlock(std::error_code& ec);

  /// Attempts until every member is granted or `wait` passed, without blocking (zero: one
  /// attempt). Completion signature `void(std::error_code, bool acquired)`, posted to the handler's
  /// executor (the first member's client's when it has none), never run inside this call. A
  /// refusal is `false` with no error; `would_deadlock` while held or acquiring; `invalid_argument`
  /// for a negative wait. Per-operation cancellation (any type): the members' acquisitions are
  /// cancelled, what was granted is released, and it completes with `errc::operation_aborted`.
  template <class CompletionToken>
  auto async_try_lock(std::chrono::milliseconds wait, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this](auto handler, std::chrono::milliseconds w) {
          auto x = connect_cancellation(handler);
          bool clear = x != nullptr;
          async_try_lock_impl(w, detail::erase_handler<std::error_code, bool>(std::move(handler), executor(), clear),
                              std::move(x));
        },
        token, wait);
  }
  /// Releases as `unlock()` does, without blocking. Completion signature `void(std::error_code)`,
  /// posted to the handler's executor (the first member's client's when it has none).
  template <class CompletionToken>
  auto async_unlock(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code)>(
        [this](auto handler) {
          async_unlock_impl(detail::erase_handler<std::error_code>(std::move(handler), executor()));
        },
        token);
  }
  /// The first member's client's executor, where completions without an executor of their own
  /// run. Thread-safe.
  asio::any_io_executor executor() const noexcept;

  /// True while held, not known lost, and every member's hold is valid (no I/O).
  bool valid() const;
  /// The earliest of the members' `valid_until()` while held and not lost; `time_point::min()`
  /// otherwise. No I/O.
  std::chrono::steady_clock::time_point valid_until() const;
  /// A token that is stop-requested when the current hold is lost (a token that never stops when
  /// not held). Its stop callbacks run on the lost member's client's I/O thread and must not throw.
  std::stop_token lost_token() const;
  /// Sets the callback told once when a held multi lock loses a member (see `multi_lost_handler`
  /// for its thread). Replaces any earlier one; replacing it waits for a running callback to return
  /// (unless called from inside it).
  void on_lost(multi_lost_handler cb);

  /// How many members.
  std::size_t size() const noexcept;
  /// The lock name of member `i` (`i < size()`).
  const std::string& name(std::size_t i) const;
  /// The kind of member `i` (`i < size()`).
  lock_kind kind(std::size_t i) const;

 private:
  template <class Handler>
  std::shared_ptr<detail::multi_cancel> connect_cancellation(Handler& handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (!slot.is_connected()) return nullptr;
    auto x = new_cancel();
    slot.assign([x](asio::cancellation_type type) {
      if (type != asio::cancellation_type::none) request_cancel(x);
    });
    return x;
  }
  static std::shared_ptr<detail::multi_cancel> new_cancel();
  static void request_cancel(const std::shared_ptr<detail::multi_cancel>& x);
  void async_try_lock_impl(std::chrono::milliseconds wait, detail::unique_function<void(std::error_code, bool)> h,
                           std::shared_ptr<detail::multi_cancel> cancel);
  void async_unlock_impl(detail::unique_function<void(std::error_code)> h);
  std::shared_ptr<detail::multi_lock_impl> impl_;
};

}  // namespace redlease
