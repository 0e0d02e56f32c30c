// SPDX-License-Identifier: MIT
/// @file
/// The locks, all with the same calls (`detail::lock_handle`): `redlease::reentrant_lock` (alias
/// `redlease::lock`), Redisson-compatible and reentrant; `redlease::mutex`, the classic
/// non-reentrant `SET NX PX` lock; Redisson's `redlease::fair_lock` (FIFO) and read-write lock
/// (`redlease::read_lock`, `redlease::write_lock`).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/associated_cancellation_slot.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_type.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>

#include "redlease/detail/async.hpp"
#include "redlease/detail/limits.hpp"
#include "redlease/error.hpp"

namespace redlease {

namespace detail {
class client_impl;
}
class client;

/// Who holds a lock. The sync calls use an id bound to the calling thread; async calls take one
/// explicitly (a coroutine is not a thread): get fresh ones from `client::new_owner()`. The
/// Redisson owner field is `<client uuid>:<owner id>`.
using owner_id = std::uint64_t;

/// The owner id of the calling thread, as used by the sync calls (unique in the process).
owner_id this_thread_owner() noexcept;

/// Why a held lock was lost.
enum class lost_reason {
  expired,  ///< the lease deadline passed without a successful renewal (or the fixed lease ran out)
  deleted,  ///< a renewal found the key gone (deleted, expired on the server, server restarted)
  taken,    ///< a renewal found the key held by another owner
  /// a RedLock (`redlease::redlock`) lost its majority to a mix of nodes taken by another value and
  /// nodes without the key
  quorum,
};

/// What an `on_lost` callback is told.
struct lost_info {
  std::string name;    ///< the lock's name
  owner_id owner = 0;  ///< the owner that held it
  lost_reason reason = lost_reason::expired;  ///< how it was lost
  /// Why the last renewals failed, when they did and the lock then expired: the server refused
  /// them (`errc::no_replicas`, `errc::server_oom`, `errc::no_permission`, `errc::auth_failed` after
  /// a password change, ...) or they went unanswered (`errc::request_timeout`). Empty otherwise.
  std::error_code cause;
  /// The server's words for `cause`, when it gave any.
  std::string detail;
};

/// Callback for a lost lock. Runs once per lost hold, on the client's I/O thread, or on a blocking
/// caller's thread while that caller stands in for it (an unlock on the lane that finds the lock
/// gone; `config::sync_lane`); never at the same time as the client's other handlers. It must not
/// block (blocking calls there fail with `errc::would_deadlock`). An exception it throws is reported
/// through `config::on_error`; nothing else is affected.
using lost_handler = std::function<void(const lost_info&)>;

/// How a waiter waits for a held lock.
///
/// The default, `pubsub`, sleeps on the lock's unlock channel (no polling). `backoff` is the
/// seeds' retry loop, for deployments where pub/sub is unavailable (a proxy that does not forward
/// it, ACLs without `&channel` rights): it retries after `initial`, multiplying the delay by
/// `multiplier` up to `max`, each delay shortened by a random share of up to `jitter` (0..1), and
/// gives up after `max_attempts` retries (0: until the wait runs out): a wait with a deadline
/// (`try_lock(wait)`) then returns false; a wait without one (`lock()`, `async_lock`,
/// `lock_and_get_token`) fails with `errc::attempts_exhausted`, so that it never returns without
/// the lock and without an error.
struct wait_strategy {
  /// The pub/sub strategy (default).
  static wait_strategy pubsub() { return {}; }
  /// The backoff strategy.
  static wait_strategy backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max,
                               double multiplier = 2.0, double jitter = 0.5, unsigned max_attempts = 0) {
    wait_strategy w;
    w.use_backoff = true;
    w.initial = initial;
    w.max = max;
    w.multiplier = multiplier;
    w.jitter = jitter;
    w.max_attempts = max_attempts;
    return w;
  }
  bool use_backoff = false;                   ///< false: pub/sub
  std::chrono::milliseconds initial{10};      ///< first retry delay
  std::chrono::milliseconds max{1000};        ///< largest retry delay (at most 2^40 ms count)
  double multiplier = 2.0;                    ///< growth of the delay per retry (>= 1)
  double jitter = 0.5;                        ///< share of each delay that is random (0..1)
  unsigned max_attempts = 0;                  ///< retries before giving up; 0: until the wait ends
                                              ///< (`lock()` then fails: `errc::attempts_exhausted`)
};

/// What kind of lock a handle drives.
enum class lock_kind : std::uint8_t {
  reentrant,  ///< Redisson's hash: field `<uuid>:<owner>` → hold count
  mutex,      ///< a string key holding a random token
  fair,       ///< Redisson's fair lock: the reentrant hash plus a FIFO queue of waiters
  read,       ///< the read side of Redisson's read-write lock
  write,      ///< the write side of Redisson's read-write lock
  semaphore,  ///< Redisson's RSemaphore: a string key holding the available permits (redlease::semaphore)
  /// Redisson's count-down latch (`redlease::count_down_latch`): a string key holding the count. Not a
  /// lock: the engine only waits on it (its await), and a grant is no hold.
  latch,
  /// Redisson's RPermitExpirableSemaphore (`redlease::permit_semaphore`): a string key holding the
  /// available permits and the zset `{NAME}:timeout` of permits out, by id, scored by expiry. A grant
  /// is a hold of its permits: renewed by the watchdog and reported when lost, like a lock's.
  permit_semaphore,
};

namespace detail {

/// A wait of `d` milliseconds in whole milliseconds, rounded up and saturated at
/// ±`max_duration`: a TimedLockable wait of any length and unit converts without overflow.
inline std::chrono::milliseconds saturated_wait(double d) noexcept {
  const double cap = static_cast<double>(max_duration.count());
  if (!(d < cap)) return max_duration;  // NaN too
  if (d <= -cap) return -max_duration;
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(d)));
}

struct lost_slot;
struct acquire_cancel;
/// @private The library's own access to a handle's client and to fresh copies with a slot of their
/// own, for compositions above the lock engine (src/facade/handle_access.hpp).
struct handle_access;
using ms = std::chrono::milliseconds;
using void_handler = unique_function<void(std::error_code)>;
using bool_handler = unique_function<void(std::error_code, bool)>;
using int_handler = unique_function<void(std::error_code, long long)>;

/// What every lock kind shares: `reentrant_lock`, `mutex`, `fair_lock`, `read_lock` and
/// `write_lock` are this handle with their kind. Cheap to copy (a name and two shared pointers).
/// Thread-safety: every member may be called from any thread on a handle shared by threads (the
/// sync calls' owner is the calling thread), except `set_wait_strategy`, which is not synchronised
/// with calls in flight. Errors: the sync calls throw `redlease::error`, or report through their
/// `std::error_code&` overload; the async calls complete with the error code.
class lock_handle {
 public:
  /// The lock's name (its Redis key).
  const std::string& name() const noexcept { return name_; }
  /// The lock's kind.
  lock_kind kind() const noexcept { return kind_; }

  // ---- sync calls: the calling thread is the owner --------------------------------------------
  // Each throws redlease::error on failure; the overload with std::error_code& reports instead.

  /// Waits for the lock without limit; the watchdog keeps it (lease `config::watchdog_timeout`,
  /// renewed every third of it) until the last unlock. Every acquiring call fails with
  /// `errc::lock_lost` while this owner's hold is known lost and not yet unlocked (re-entering a
  /// broken critical section must not silently take a new lock). Returns only with the lock: a
  /// backoff wait strategy whose `max_attempts` run out fails with `errc::attempts_exhausted`.
  void lock();
  void lock(std::error_code& ec);
  /// Waits for the lock without limit; holds it for `lease`, with no renewal.
  void lock(std::chrono::milliseconds lease);
  void lock(std::chrono::milliseconds lease, std::error_code& ec);
  /// One attempt, no wait; watchdog lease. False if another owner holds it.
  bool try_lock();
  bool try_lock(std::error_code& ec);
  /// Waits up to `wait` (pub/sub wake-up, no polling); watchdog lease.
  bool try_lock(std::chrono::milliseconds wait);
  bool try_lock(std::chrono::milliseconds wait, std::error_code& ec);
  /// Waits up to `wait`; holds for `lease` with no renewal.
  bool try_lock(std::chrono::milliseconds wait, std::chrono::milliseconds lease);
  bool try_lock(std::chrono::milliseconds wait, std::chrono::milliseconds lease, std::error_code& ec);
  /// TimedLockable: waits up to `d` (rounded up to whole milliseconds; a wait longer than about
  /// 34 years, `hours::max()` say, is one of 2^40 ms; zero or negative, one attempt, as
  /// `std::timed_mutex` does), watchdog lease.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    auto wait = saturated_wait(std::chrono::duration<double, std::milli>(d).count());
    return try_lock(wait.count() > 0 ? wait : std::chrono::milliseconds::zero());
  }
  /// TimedLockable: waits until `tp` (one attempt if it has passed), watchdog lease.
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& tp) {
    // Subtracted as floating-point milliseconds: `time_point::min()`, or `max()` of a coarse
    // duration, would overflow the clock's integer arithmetic.
    using fms = std::chrono::duration<double, std::milli>;
    double left = fms(tp.time_since_epoch()).count() - fms(Clock::now().time_since_epoch()).count();
    return try_lock(left > 0 ? saturated_wait(left) : std::chrono::milliseconds::zero());
  }
  // ---- fencing tokens ---------------------------------------------------------------------------
  // A fenced acquisition also takes a fencing token: a 64-bit number that never repeats and only
  // grows for this lock name, made by the acquire script itself (no extra round trip). Hand it to
  // every resource the critical section writes, and have the resource refuse a token lower than one
  // it has seen (docs/fencing.md has the compare-token-and-set script to copy): a holder that was
  // paused past its lease then cannot overwrite its successor's work. The reentrant lock's tokens
  // share Redisson's RFencedLock key (`redisson_lock_token:{name}`), so C++ and Java holders of one
  // name draw from one sequence. Guarantees and limits: docs/fencing.md.

  /// As `lock()`, and returns the grant's fencing token.
  std::uint64_t lock_and_get_token();
  std::uint64_t lock_and_get_token(std::error_code& ec);
  /// As `lock(lease)`, and returns the grant's fencing token.
  std::uint64_t lock_and_get_token(std::chrono::milliseconds lease);
  std::uint64_t lock_and_get_token(std::chrono::milliseconds lease, std::error_code& ec);
  /// As `try_lock(wait)`: the grant's fencing token, or empty if the lock was not acquired.
  std::optional<std::uint64_t> try_lock_and_get_token(std::chrono::milliseconds wait);
  std::optional<std::uint64_t> try_lock_and_get_token(std::chrono::milliseconds wait, std::error_code& ec);
  /// As `try_lock(wait, lease)`: the grant's fencing token, or empty if not acquired.
  std::optional<std::uint64_t> try_lock_and_get_token(std::chrono::milliseconds wait, std::chrono::milliseconds lease);
  std::optional<std::uint64_t> try_lock_and_get_token(std::chrono::milliseconds wait, std::chrono::milliseconds lease,
                                                      std::error_code& ec);

  /// Releases one hold. `errc::not_owner` if this thread does not hold it; `errc::lock_lost` if it
  /// held it but the lock was lost meanwhile, also to a key of another type that replaced it (the
  /// local hold is dropped either way).
  void unlock();
  void unlock(std::error_code& ec);
  /// Deletes the lock whoever holds it and wakes its waiters. True if it existed.
  bool force_unlock();
  bool force_unlock(std::error_code& ec);
  /// True if anyone holds the lock (EXISTS).
  bool is_locked();
  bool is_locked(std::error_code& ec);
  /// True if the calling thread holds the lock, as the server sees it.
  bool is_held_by_current_thread();
  bool is_held_by_current_thread(std::error_code& ec);
  /// The calling thread's hold count on the server (0 if not held; a mutex counts 0 or 1).
  long long hold_count();
  long long hold_count(std::error_code& ec);
  /// The lock's remaining time to live: -2 ms if it does not exist, -1 ms if it has no expiry
  /// (Redisson's `remainTimeToLive`).
  std::chrono::milliseconds remaining_ttl();
  std::chrono::milliseconds remaining_ttl(std::error_code& ec);

  // ---- the local view of the calling thread's hold (no I/O) ------------------------------------
  // Thread rule: the local view answers on any thread, the client's I/O thread included (inside a
  // completion handler or an on_lost callback), without waiting for that thread: it reads the
  // client's hold table under a short lock. A hold is in the view before the completion of the
  // acquisition that made it runs.

  /// True while the calling thread holds the lock and it has not been found lost.
  bool valid() const;
  /// The time until which the calling thread's hold is known valid: the send time of the last
  /// successful acquisition or renewal plus the lease. `time_point::min()` if not held.
  std::chrono::steady_clock::time_point valid_until() const;
  /// A token that is stop-requested when the calling thread's current hold is lost. A token that
  /// never stops if the thread does not hold the lock. Its stop callbacks run on the I/O thread and
  /// must not throw: `request_stop` is `noexcept`, so an exception ends the process (`on_lost`
  /// callbacks may throw).
  std::stop_token lost_token() const;
  /// Sets the callback for the holds taken through this handle (and its copies) from now on,
  /// including the current ones. Replaces any earlier callback. A hold is the handle's that took
  /// its first level: a re-entry through another handle of the same name (a helper that calls
  /// `client::lock(name)` itself) does not take it over. Teardown promise: once it returns
  /// (or the handle's last copy is destroyed, which clears the callback), the old callback is not
  /// running and never runs again; from another thread it waits for a running call to return, from
  /// inside the callback it takes effect when the callback returns.
  void on_lost(lost_handler cb);
  /// Sets how this handle (and copies made after) waits for a held lock; pub/sub by default.
  /// Not synchronised with calls in flight on the same handle: set it before sharing the handle.
  /// @throws redlease::error `errc::invalid_argument` for non-positive delays, max < initial,
  /// multiplier < 1 or jitter outside [0, 1].
  void set_wait_strategy(const wait_strategy& w);
  /// The current wait strategy.
  const wait_strategy& get_wait_strategy() const noexcept { return wait_; }

  /// The fencing token of the calling thread's hold: that of its latest fenced acquisition (a
  /// fenced re-entry takes a new one); 0 if it holds nothing or took no token. No I/O.
  std::uint64_t token() const;
  /// The calling thread's hold as `redlease status` lists its holder: the hash field
  /// `<client id>:<owner>` (`<client id>:<owner>:write` for the write lock), or the mutex's token;
  /// empty if it holds nothing. With `client_card_key(client id)` it ties a holder to its host and
  /// process. No I/O.
  std::string holder_id() const;

  // ---- explicit-owner variants of the local view ------------------------------------------------
  // For the async calls' owners (`client::new_owner()`): no I/O, any thread (the thread rule above).

  /// As `token()`, for `owner`'s hold.
  std::uint64_t token(owner_id owner) const;
  /// As `holder_id()`, for `owner`'s hold.
  std::string holder_id(owner_id owner) const;
  /// As `valid()`: true while `owner` holds the lock and it has not been found lost.
  bool valid(owner_id owner) const;
  /// As `valid_until()`, for `owner`'s hold: `time_point::min()` if it holds nothing.
  std::chrono::steady_clock::time_point valid_until(owner_id owner) const;
  /// As `lost_token()`: stop-requested when `owner`'s current hold is lost; never stops if it holds
  /// nothing.
  std::stop_token lost_token(owner_id owner) const;

  // ---- async calls: the owner is explicit ------------------------------------------------------
  // Completion handlers run on their associated executor (the client's by default).
  //
  // Acquisitions (`async_lock`, `async_try_lock`) support per-operation cancellation (Asio's
  // cancellation slots: `asio::bind_cancellation_slot`, a coroutine's cancellation state, awaitable
  // operators, parallel groups), of any type: a cancelled acquisition completes with
  // `errc::operation_aborted` and leaves nothing behind on the server. If an attempt was on the wire
  // it is waited for, and a grant it brought is released before the completion, so the lock is
  // never held after a cancelled acquisition (Asio's "total" cancellation guarantee). (If that
  // release's own reply is lost, the operation still completes, and the release is sent again
  // until the server answers it.)

  /// Waits for the lock without limit, watchdog lease. Signature `void(std::error_code)`.
  template <class CompletionToken>
  auto async_lock(owner_id owner, CompletionToken&& token) {
    return initiate_acquire_void(token, [this, owner](void_handler h, std::shared_ptr<acquire_cancel> x) {
      async_acquire_impl(owner, {}, {}, true, std::move(h), std::move(x));
    });
  }
  /// Waits for the lock without limit, fixed `lease`. Signature `void(std::error_code)`.
  template <class CompletionToken>
  auto async_lock(owner_id owner, std::chrono::milliseconds lease, CompletionToken&& token) {
    return initiate_acquire_void(token, [this, owner, lease](void_handler h, std::shared_ptr<acquire_cancel> x) {
      async_acquire_impl(owner, {}, lease, true, std::move(h), std::move(x));
    });
  }
  /// Tries up to `wait` (0: once), watchdog lease. Signature `void(std::error_code, bool acquired)`.
  template <class CompletionToken>
  auto async_try_lock(owner_id owner, std::chrono::milliseconds wait, CompletionToken&& token) {
    return initiate_acquire_bool(token, [this, owner, wait](bool_handler h, std::shared_ptr<acquire_cancel> x) {
      async_try_impl(owner, wait, {}, std::move(h), std::move(x));
    });
  }
  /// Tries up to `wait`, fixed `lease`. Signature `void(std::error_code, bool acquired)`.
  template <class CompletionToken>
  auto async_try_lock(owner_id owner, std::chrono::milliseconds wait, std::chrono::milliseconds lease,
                      CompletionToken&& token) {
    return initiate_acquire_bool(token, [this, owner, wait, lease](bool_handler h, std::shared_ptr<acquire_cancel> x) {
      async_try_impl(owner, wait, lease, std::move(h), std::move(x));
    });
  }
  /// Waits for the lock without limit (watchdog lease, or `lease` if given) and takes a fencing
  /// token. Signature `void(std::error_code, std::uint64_t token)`. Cancellable as `async_lock`.
  template <class CompletionToken>
  auto async_lock_and_get_token(owner_id owner, CompletionToken&& token) {
    return initiate_acquire_token(token, [this, owner](token_handler h, std::shared_ptr<acquire_cancel> x) {
      async_fenced_impl(owner, {}, {}, std::move(h), std::move(x));
    });
  }
  /// Waits for the lock without limit, holds it for `lease` with no renewal, and takes a fencing
  /// token. Signature `void(std::error_code, std::uint64_t token)`. Cancellable as `async_lock`.
  template <class CompletionToken>
  auto async_lock_and_get_token(owner_id owner, std::chrono::milliseconds lease, CompletionToken&& token) {
    return initiate_acquire_token(token, [this, owner, lease](token_handler h, std::shared_ptr<acquire_cancel> x) {
      async_fenced_impl(owner, {}, lease, std::move(h), std::move(x));
    });
  }
  /// Tries up to `wait` and takes a fencing token. Signature `void(std::error_code, std::uint64_t
  /// token)`: token 0 (with no error) when the lock was not acquired. Cancellable as `async_lock`.
  template <class CompletionToken>
  auto async_try_lock_and_get_token(owner_id owner, std::chrono::milliseconds wait, CompletionToken&& token) {
    return initiate_acquire_token(token, [this, owner, wait](token_handler h, std::shared_ptr<acquire_cancel> x) {
      async_fenced_impl(owner, wait, {}, std::move(h), std::move(x));
    });
  }
  /// Tries up to `wait`, holds for `lease` with no renewal, and takes a fencing token. Signature
  /// `void(std::error_code, std::uint64_t token)`: token 0 (with no error) when the lock was not
  /// acquired. Cancellable as `async_lock`.
  template <class CompletionToken>
  auto async_try_lock_and_get_token(owner_id owner, std::chrono::milliseconds wait, std::chrono::milliseconds lease,
                                    CompletionToken&& token) {
    return initiate_acquire_token(token, [this, owner, wait, lease](token_handler h, std::shared_ptr<acquire_cancel> x) {
      async_fenced_impl(owner, wait, lease, std::move(h), std::move(x));
    });
  }
  /// Releases one hold of `owner`. Signature `void(std::error_code)`.
  template <class CompletionToken>
  auto async_unlock(owner_id owner, CompletionToken&& token) {
    return initiate_void(token, [this, owner](void_handler h) { async_unlock_impl(owner, std::move(h)); });
  }
  /// Deletes the lock whoever holds it. Signature `void(std::error_code, bool existed)`.
  template <class CompletionToken>
  auto async_force_unlock(CompletionToken&& token) {
    return initiate_bool(token, [this](bool_handler h) { async_force_unlock_impl(std::move(h)); });
  }
  /// Signature `void(std::error_code, bool locked)`.
  template <class CompletionToken>
  auto async_is_locked(CompletionToken&& token) {
    return initiate_bool(token, [this](bool_handler h) { async_is_locked_impl(std::move(h)); });
  }
  /// The lock's remaining TTL in ms (-2: absent, -1: no expiry). Signature
  /// `void(std::error_code, long long)`.
  template <class CompletionToken>
  auto async_remaining_ttl(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, long long)>(
        [this](auto handler) {
          async_remaining_ttl_impl(erase_handler<std::error_code, long long>(std::move(handler), executor()));
        },
        token);
  }
  /// `owner`'s hold count on the server. Signature `void(std::error_code, long long)`.
  template <class CompletionToken>
  auto async_hold_count(owner_id owner, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, long long)>(
        [this, owner](auto handler) {
          async_hold_count_impl(owner, erase_handler<std::error_code, long long>(std::move(handler), executor()));
        },
        token);
  }

  /// Copies share the on_lost callback and the wait strategy's state; cheap. A moved-from handle
  /// may only be destroyed or assigned to (as a moved-from `client`). An asynchronous operation
  /// whose initiation is deferred (`asio::deferred`, an awaitable not yet awaited) uses the handle
  /// when it starts: the handle must outlive that, as an Asio I/O object must.
  lock_handle(const lock_handle& o);
  lock_handle(lock_handle&& o) noexcept;
  lock_handle& operator=(const lock_handle& o);
  lock_handle& operator=(lock_handle&& o) noexcept;
  /// When the last copy goes, its on_lost callback is cleared (with the teardown promise of
  /// `on_lost`): it is not running and never runs again. Never throws.
  ~lock_handle();

 protected:
  lock_handle(std::shared_ptr<client_impl> c, std::string name, lock_kind kind);

 private:
  friend struct handle_access;
  void release_slot() noexcept;
  // An acquisition's cancellation state: installed in the handler's cancellation slot, if it has
  // one; a cancellation is posted to the client's executor, which ends the waiting (see above).
  template <class Handler>
  std::shared_ptr<acquire_cancel> connect_cancellation(Handler& handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    if (!slot.is_connected()) return nullptr;
    auto x = new_acquire_cancel();
    slot.assign([c = client_, x](asio::cancellation_type type) {
      if (type != asio::cancellation_type::none) request_cancel(c, x);
    });
    return x;
  }
  template <class Token, class F>
  auto initiate_acquire_void(Token& token, F f) {
    return asio::async_initiate<Token, void(std::error_code)>(
        [this, f](auto handler) {
          auto x = connect_cancellation(handler);
          bool clear = x != nullptr;
          f(erase_handler<std::error_code>(std::move(handler), executor(), clear), std::move(x));
        },
        token);
  }
  template <class Token, class F>
  auto initiate_acquire_bool(Token& token, F f) {
    return asio::async_initiate<Token, void(std::error_code, bool)>(
        [this, f](auto handler) {
          auto x = connect_cancellation(handler);
          bool clear = x != nullptr;
          f(erase_handler<std::error_code, bool>(std::move(handler), executor(), clear), std::move(x));
        },
        token);
  }
  using token_handler = unique_function<void(std::error_code, std::uint64_t)>;
  template <class Token, class F>
  auto initiate_acquire_token(Token& token, F f) {
    return asio::async_initiate<Token, void(std::error_code, std::uint64_t)>(
        [this, f](auto handler) {
          auto x = connect_cancellation(handler);
          bool clear = x != nullptr;
          f(erase_handler<std::error_code, std::uint64_t>(std::move(handler), executor(), clear), std::move(x));
        },
        token);
  }
  // A fenced acquisition: `wait` empty waits without limit (completing with an error or a token).
  void async_fenced_impl(owner_id owner, std::optional<ms> wait, std::optional<ms> lease, token_handler h,
                         std::shared_ptr<acquire_cancel> cancel = nullptr);
  static std::shared_ptr<acquire_cancel> new_acquire_cancel();
  static void request_cancel(const std::shared_ptr<client_impl>& c, const std::shared_ptr<acquire_cancel>& x);

  template <class Token, class F>
  auto initiate_void(Token& token, F f) {
    return asio::async_initiate<Token, void(std::error_code)>(
        [this, f](auto handler) { f(erase_handler<std::error_code>(std::move(handler), executor())); }, token);
  }
  template <class Token, class F>
  auto initiate_bool(Token& token, F f) {
    return asio::async_initiate<Token, void(std::error_code, bool)>(
        [this, f](auto handler) { f(erase_handler<std::error_code, bool>(std::move(handler), executor())); }, token);
  }
  asio::any_io_executor executor() const;
  void async_acquire_impl(owner_id owner, std::optional<ms> wait, std::optional<ms> lease, bool forever,
                          void_handler h, std::shared_ptr<acquire_cancel> cancel = nullptr);
  void async_try_impl(owner_id owner, ms wait, std::optional<ms> lease, bool_handler h,
                      std::shared_ptr<acquire_cancel> cancel = nullptr);
  void async_unlock_impl(owner_id owner, void_handler h);
  void async_force_unlock_impl(bool_handler h);
  void async_is_locked_impl(bool_handler h);
  void async_hold_count_impl(owner_id owner, int_handler h);
  void async_remaining_ttl_impl(int_handler h);

  std::shared_ptr<client_impl> client_;
  std::string name_;
  lock_kind kind_;
  std::shared_ptr<lost_slot> state_;  // the on_lost callback, shared by copies of the handle (and
                                      // the holds taken through them); counts the copies
  wait_strategy wait_;
};

}  // namespace detail

/// A reentrant lock with Redisson's layout: hash `name`, field `<client uuid>:<owner>` holding the
/// hold count, PEXPIRE as the lease; released with a PUBLISH of `0` on
/// `redisson_lock__channel:{name}`. A Java service using Redisson's `RLock` on the same name
/// excludes and is excluded by it, and wakes its waiters.
///
/// Satisfies Lockable and TimedLockable (`std::unique_lock`, `std::scoped_lock`, `std::lock_guard`).
/// Thread-safety: a handle may be shared by threads; each thread is its own owner.
class reentrant_lock : public detail::lock_handle {
 public:
  /// Made by `client::lock(name)`.
  reentrant_lock(std::shared_ptr<detail::client_impl> c, std::string name)
      : lock_handle(std::move(c), std::move(name), lock_kind::reentrant) {}
};

/// The reentrant lock under the name the product uses in examples: `redlease::lock`.
using lock = reentrant_lock;

/// A non-reentrant lock: `SET name <128-bit random token> NX PX lease`, released by
/// compare-and-delete, renewed by compare-and-PEXPIRE (the layout of redis-py, redsync,
/// node-redlock). Re-acquiring by the owner that holds it fails with `errc::would_deadlock` (an
/// acquisition that was waiting when the same owner's other one got it too, at its next attempt).
/// A release by redlease publishes on `redlease_mutex__channel:{name}` so waiters wake at once;
/// holders from other libraries do not publish, so waiters re-check at least every
/// `config::mutex_poll_cap`, or on the key's keyspace events when the server sends them.
///
/// Satisfies Lockable and TimedLockable. Thread-safety as `reentrant_lock`.
class mutex : public detail::lock_handle {
 public:
  /// Made by `client::mutex(name)`.
  mutex(std::shared_ptr<detail::client_impl> c, std::string name)
      : lock_handle(std::move(c), std::move(name), lock_kind::mutex) {}
};

/// A fair (FIFO) reentrant lock with Redisson's `RedissonFairLock` layout: the reentrant hash
/// `name`, the queue `redisson_lock_queue:{name}` and the waiters' deadlines
/// `redisson_lock_timeout:{name}`; a release hands the lock to the head of the queue only, on that
/// waiter's own channel `redisson_lock__channel:{name}:<owner field>`. Waiters are served in the
/// order they queued, across redlease and Redisson clients; a waiter that gives up (timeout,
/// cancellation, error) leaves the queue; dead waiters (past their deadline) are purged by the next
/// acquisition. A waiter keeps its place by calling again (the head every `config::mutex_poll_cap`,
/// those behind it about once a second); one whose process died blocks the queue until its
/// deadline, which `config::queue_allowance` bounds (about its turn plus 30 s, not Redisson's 300 s). docs/lock-kinds.md has the layout and
/// what differs from Redisson (no tight retry on a zero wait, the right allowance when a wait ends).
/// Fencing tokens share the reentrant lock's sequence (`redisson_lock_token:{name}`).
///
/// Satisfies Lockable and TimedLockable. Thread-safety as `reentrant_lock`.
class fair_lock : public detail::lock_handle {
 public:
  /// Made by `client::fair_lock(name)`.
  fair_lock(std::shared_ptr<detail::client_impl> c, std::string name)
      : lock_handle(std::move(c), std::move(name), lock_kind::fair) {}
};

/// The read side of a read-write lock with Redisson's `RedissonReadWriteLock` layout: one hash
/// `name` with `mode` ("read"/"write"), a field per reading owner and `<owner>:write` for the
/// writer, plus a `{name}:<owner>:rwlock_timeout:<n>` key per read acquisition; wake-ups on
/// `redisson_rwlock:{name}`. Any number of owners read at once; a writer excludes them. An owner
/// that holds the write lock may also read (a downgrade); an owner that holds only reads and asks
/// for the write lock gets `errc::would_deadlock` at once (Redisson waits for ever). The watchdog
/// renews the reader timeout keys too. Fencing tokens (readers and writers of one name draw from one
/// sequence, `redlease_rwlock_token:{name}`) order writers; readers get one too. One owner's read
/// hold nests at most 1,000 deep (a key per level): the next acquisition fails with
/// `errc::invalid_argument`. A hash whose `mode` is neither "read" nor "write" is `errc::wrong_type`.
///
/// Satisfies Lockable and TimedLockable. Thread-safety as `reentrant_lock`.
class read_lock : public detail::lock_handle {
 public:
  /// Made by `client::read_lock(name)`.
  read_lock(std::shared_ptr<detail::client_impl> c, std::string name)
      : lock_handle(std::move(c), std::move(name), lock_kind::read) {}
};

/// The write side of the read-write lock `name` (see `read_lock`).
class write_lock : public detail::lock_handle {
 public:
  /// Made by `client::write_lock(name)`.
  write_lock(std::shared_ptr<detail::client_impl> c, std::string name)
      : lock_handle(std::move(c), std::move(name), lock_kind::write) {}
};

}  // namespace redlease
