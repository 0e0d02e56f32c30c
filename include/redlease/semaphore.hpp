// SPDX-License-Identifier: MIT
/// @file
/// `redlease::semaphore`: a distributed counting semaphore, wire-compatible with Redisson's
/// `RSemaphore`, and `redlease::semaphore_guard`, which holds permits for a scope.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_signal.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "redlease/detail/async.hpp"

namespace redlease {

namespace detail {
class client_impl;
struct acquire_cancel;
/// The engine's cancellation of an acquisition on `c`, hooked to `slot` (a cancellation is posted to
/// the client's executor); nullptr when the slot is not connected. Any thread.
std::shared_ptr<acquire_cancel> hook_acquire_cancel(const std::shared_ptr<client_impl>& c, asio::cancellation_slot slot);
}

/// A counting semaphore on the string key `name`, which holds the available permits (Redisson's
/// `RSemaphore` layout: `docs/semaphores.md`). Changes that add permits publish the new count on
/// `redisson_sc:{name}`; a waiter sleeps until such a message says that enough permits are free for
/// it (no polling), and Redisson's clients and this one wake each other.
///
/// Permits belong to nobody: any client may release permits it never acquired, and a process that
/// dies holding permits does not give them back (use `try_set_permits` with a TTL to bound that).
///
/// Made by `client::semaphore(name)`. Cheap to copy (a name and a shared pointer). Thread-safety:
/// every member may be called from any thread on a handle shared by threads. Errors: each call
/// throws `redlease::error`, or reports through its `std::error_code&` overload (and then returns
/// false or 0); `errc::invalid_argument` for a count out of range (nothing sent).
class semaphore {
 public:
  /// Made by `client::semaphore`, which checks `name`.
  semaphore(std::shared_ptr<detail::client_impl> c, std::string name);

  /// The semaphore's name (its Redis key).
  const std::string& name() const noexcept { return name_; }

  /// Takes `n` permits (n >= 1), waiting for as long as it takes.
  void acquire(long long n = 1);
  /// As above; on failure sets `ec`.
  void acquire(long long n, std::error_code& ec);
  /// Takes `n` permits (n >= 1) if they become available within `wait` (0: one attempt). False when
  /// they did not. A waiter for `n` is woken only by a message saying at least `n` are available.
  bool try_acquire(long long n, std::chrono::milliseconds wait = std::chrono::milliseconds::zero());
  /// As above; on failure sets `ec` and returns false.
  bool try_acquire(long long n, std::chrono::milliseconds wait, std::error_code& ec);
  /// One permit within `wait`, as `std::counting_semaphore::try_acquire_for`.
  bool try_acquire_for(std::chrono::milliseconds wait) { return try_acquire(1, wait); }
  /// As above; on failure sets `ec` and returns false.
  bool try_acquire_for(std::chrono::milliseconds wait, std::error_code& ec) { return try_acquire(1, wait, ec); }

  /// Gives `n` permits (n >= 1) back and wakes the waiters they suffice for. Exactly once: a call
  /// whose reply is lost is sent again with the same request id, and its latch key keeps the second
  /// sending from adding again. Keeps the key's TTL.
  void release(long long n = 1);
  /// As above; on failure sets `ec`.
  void release(long long n, std::error_code& ec);
  /// Adds `n` permits (Redisson's `addPermits`; `n` may be negative), exactly once as `release`,
  /// keeping the key's TTL. Returns the count after the change.
  long long add_permits(long long n);
  /// As above; on failure sets `ec` and returns 0.
  long long add_permits(long long n, std::error_code& ec);
  /// Sets the permits to `n` (n >= 0) if the semaphore has none yet (its key is missing), with an
  /// expiry `ttl` if given (> 0). True when set. Not retried after a lost reply (a second sending
  /// could not tell its first from someone else's): such a call fails with the connection's error.
  bool try_set_permits(long long n, std::optional<std::chrono::milliseconds> ttl = std::nullopt);
  /// As above; on failure sets `ec` and returns false.
  bool try_set_permits(long long n, std::optional<std::chrono::milliseconds> ttl, std::error_code& ec);
  /// The permits available now (a missing key: 0).
  long long available_permits();
  /// As above; on failure sets `ec` and returns 0.
  long long available_permits(std::error_code& ec);
  /// Takes every available permit; returns how many there were (Redisson's `drainPermits`: the key
  /// is set to 0, which drops its TTL).
  long long drain_permits();
  /// As above; on failure sets `ec` and returns 0.
  long long drain_permits(std::error_code& ec);

  // ---- async calls ------------------------------------------------------------------------------

  /// Async `try_acquire(n, wait)`; `wait` empty waits as long as it takes (then it completes with
  /// true or an error). Completion signature `void(std::error_code, bool acquired)`. Supports
  /// per-operation cancellation through an `asio::cancellation_slot` bound to the token: it
  /// completes with `errc::operation_aborted`, and permits its attempt took are given back first.
  template <class CompletionToken>
  auto async_try_acquire(long long n, std::optional<std::chrono::milliseconds> wait, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this, n, wait](auto handler) {
          auto x = hook_cancel(asio::get_associated_cancellation_slot(handler));
          const bool clear = x != nullptr;
          async_acquire_impl(n, wait, detail::erase_handler<std::error_code, bool>(std::move(handler), executor(), clear),
                             std::move(x));
        },
        token);
  }
  /// Async `release(n)` (exactly once, as `release`). Completion signature `void(std::error_code)`.
  template <class CompletionToken>
  auto async_release(long long n, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code)>(
        [this, n](auto handler) {
          async_release_impl(n, detail::erase_handler<std::error_code>(std::move(handler), executor()));
        },
        token);
  }

  /// Async `add_permits(n)` (`n` may be negative), exactly once as `add_permits` (the same latched
  /// call). Completion signature `void(std::error_code, long long available)`: the count after the
  /// change; errors as `add_permits`. The handler runs on its associated executor (the client's if
  /// it has none), never inside this call; so do the other async forms'.
  template <class CompletionToken>
  auto async_add_permits(long long n, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, long long)>(
        [this, n](auto handler) {
          async_add_impl(n, detail::erase_handler<std::error_code, long long>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `try_set_permits(n, ttl)` (`ttl` empty: none). Completion signature
  /// `void(std::error_code, bool set)`; errors as `try_set_permits`: `errc::invalid_argument` (nothing
  /// sent) for `n` below 0 or a `ttl` that is not positive (or beyond `max_duration`).
  template <class CompletionToken>
  auto async_try_set_permits(long long n, std::optional<std::chrono::milliseconds> ttl, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this, n, ttl](auto handler) {
          async_set_impl(n, ttl, detail::erase_handler<std::error_code, bool>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `available_permits()`. Completion signature `void(std::error_code, long long available)`
  /// (a missing key: 0); errors as `available_permits` (`errc::bad_reply` when the key holds
  /// something that is not a count).
  template <class CompletionToken>
  auto async_available_permits(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, long long)>(
        [this](auto handler) {
          async_available_impl(detail::erase_handler<std::error_code, long long>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `drain_permits()`. Completion signature `void(std::error_code, long long drained)`: how
  /// many permits there were; errors as `drain_permits`.
  template <class CompletionToken>
  auto async_drain_permits(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, long long)>(
        [this](auto handler) {
          async_drain_impl(detail::erase_handler<std::error_code, long long>(std::move(handler), executor()));
        },
        token);
  }

 private:
  // The permit-expirable semaphore shares the plain one's set and add (the same key and scripts).
  friend class permit_semaphore;
  asio::any_io_executor executor() const;
  // The engine's cancellation of an acquisition, hooked to `slot` (nullptr when it is not connected).
  std::shared_ptr<detail::acquire_cancel> hook_cancel(asio::cancellation_slot slot);
  void async_acquire_impl(long long n, std::optional<std::chrono::milliseconds> wait,
                          detail::unique_function<void(std::error_code, bool)> h,
                          std::shared_ptr<detail::acquire_cancel> cancel);
  void async_release_impl(long long n, detail::unique_function<void(std::error_code)> h);
  void async_add_impl(long long n, detail::unique_function<void(std::error_code, long long)> h);
  void async_set_impl(long long n, std::optional<std::chrono::milliseconds> ttl,
                      detail::unique_function<void(std::error_code, bool)> h);
  void async_available_impl(detail::unique_function<void(std::error_code, long long)> h);
  void async_drain_impl(detail::unique_function<void(std::error_code, long long)> h);
  bool try_acquire_impl(long long n, std::optional<std::chrono::milliseconds> wait, std::error_code& ec);
  std::shared_ptr<detail::client_impl> client_;
  std::string name_;
};

/// Holds `n` permits of a semaphore for a scope: acquires them in the constructor (waiting as long
/// as it takes; throws `redlease::error` on failure, holding nothing), releases them in the
/// destructor, which never throws (a release that fails is dropped: the permits stay taken, as those
/// of a process that died). Not copyable, not movable. Thread-safety: one guard belongs to one scope.
class semaphore_guard {
 public:
  /// Acquires `n` permits of `s` (a copy of the handle is kept).
  explicit semaphore_guard(semaphore s, long long n = 1) : s_(std::move(s)), n_(n) { s_.acquire(n_); }
  semaphore_guard(const semaphore_guard&) = delete;
  semaphore_guard& operator=(const semaphore_guard&) = delete;
  /// Releases the permits; errors are swallowed.
  ~semaphore_guard() {
    std::error_code ec;
    s_.release(n_, ec);
  }

 private:
  semaphore s_;
  long long n_;
};

}  // namespace redlease
