// SPDX-License-Identifier: MIT
/// @file
/// `redlease::permit_semaphore`: a distributed semaphore whose permits have ids and leases,
/// wire-compatible with Redisson's `RPermitExpirableSemaphore`; and `redlease::permit`, the permits
/// one acquisition holds, kept alive by the watchdog and reported when lost, like a lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "redlease/detail/async.hpp"
#include "redlease/lock.hpp"
#include "redlease/semaphore.hpp"

namespace redlease {

namespace detail {
class client_impl;
struct lost_slot;
}

/// The permits one acquisition of a `permit_semaphore` holds: their ids, and how long they are
/// known to be held. Without a lease the client's watchdog extends every permit's expiry while the
/// `permit` lives, so a process that dies gives its permits back within one watchdog timeout; when
/// a permit is found gone (expired while the process was frozen or cut off, released by id by
/// someone else, the key deleted) the holder is told as a lock's holder is: `on_lost`, the stop
/// token, `valid()`.
///
/// Move-only. The destructor gives the permits back if they are still held (asynchronously: it
/// never blocks and never throws; errors are not reported). Thread-safety: the const members may be
/// called from any thread; `release` and `on_lost` from one thread at a time.
class permit {
 public:
  /// An empty permit (nothing held).
  permit() = default;
  permit(permit&& o) noexcept;
  permit& operator=(permit&& o) noexcept;
  permit(const permit&) = delete;
  permit& operator=(const permit&) = delete;
  ~permit();

  /// True if this object holds permits (acquired and not released yet).
  explicit operator bool() const noexcept { return client_ != nullptr; }
  /// The semaphore's name.
  const std::string& name() const noexcept { return name_; }
  /// The permits' ids as Redisson shows them (32 lowercase hex digits each), in order; a Redisson
  /// client may release or update them by these ids.
  std::vector<std::string> ids() const;
  /// How many permits are held.
  long long count() const noexcept { return count_; }
  /// The owner id the client's engine keeps the permits under (a fresh one per acquisition).
  owner_id owner() const noexcept { return owner_; }

  /// Whether the permits are held and not known lost, and their lease has not run out.
  bool valid() const;
  /// Until when the permits are known held (the lease from the last grant or renewal); `min()`
  /// when none are held.
  std::chrono::steady_clock::time_point valid_until() const;
  /// Stopped when the permits are lost (a default token when none are held).
  std::stop_token lost_token() const;
  /// Called once if the permits are lost (the rules of `lock_handle::on_lost`).
  void on_lost(lost_handler cb);

  /// Gives the permits back and wakes the waiters they suffice for. `errc::lock_lost` if they were
  /// lost (then nothing is given back: an expired permit went back to the pool by itself);
  /// `errc::not_owner` on an empty permit. Exactly once across a lost reply (a permit's id is
  /// removed once). Afterwards the object is empty.
  void release();
  /// As above; on failure sets `ec`.
  void release(std::error_code& ec);

 private:
  friend class permit_semaphore;
  permit(std::shared_ptr<detail::client_impl> c, std::string name, owner_id owner, std::string token,
         std::shared_ptr<detail::lost_slot> slot);

  std::shared_ptr<detail::client_impl> client_;
  std::string name_;
  owner_id owner_ = 0;
  std::string token_;  // the engine's name of the permits (see src/lock/protocols/permit_semaphore.cpp)
  long long count_ = 0;
  std::shared_ptr<detail::lost_slot> slot_;
};

/// One permit out, as `permit_semaphore::permits` lists it.
struct permit_entry {
  /// Its id (32 lowercase hex digits; raw bytes of another length are shown in hex too).
  std::string id;
  /// The time left on its lease in ms on the server's clock; -1 without a lease (Redisson's
  /// permits acquired without one).
  long long lease_ms = -1;
};

/// A semaphore whose permits are held under ids with leases (Redisson's
/// `RPermitExpirableSemaphore` layout, `docs/semaphores.md`): the string key `name` holds the
/// available permits, the zset `{name}:timeout` the permits out, each scored by its expiry. Expired
/// permits go back to the pool when the next call on the semaphore looks (every script reclaims
/// them first). Unlike Redisson, the scripts read the time from the server, never a client's clock.
///
/// An acquisition without a lease is kept by the watchdog (`permit`), so a crashed holder strands
/// nothing for longer than `config::watchdog_timeout`; one with a lease keeps its permits until the
/// lease ends or they are released. Waiters sleep on `redisson_sc:{name}`, are woken by count, and
/// look again at least every `config::mutex_poll_cap` and when the nearest lease ends (an expiry is
/// never announced).
///
/// Made by `client::permit_semaphore(name)`. Cheap to copy. Thread-safety: every member may be
/// called from any thread. Errors: each call throws `redlease::error`, or reports through its
/// `std::error_code&` overload; `errc::invalid_argument` for a count or duration out of range
/// (nothing sent); `errc::wrong_type` or `errc::server_error` for keys of other types.
class permit_semaphore {
 public:
  /// Made by `client::permit_semaphore`, which checks `name`.
  permit_semaphore(std::shared_ptr<detail::client_impl> c, std::string name);

  /// The semaphore's name (its Redis key).
  const std::string& name() const noexcept { return name_; }

  /// Takes `n` permits (n >= 1), waiting as long as it takes. `lease` empty: kept by the watchdog;
  /// else each permit expires `lease` after the grant.
  permit acquire(long long n = 1, std::optional<std::chrono::milliseconds> lease = std::nullopt);
  /// As above; on failure sets `ec` and returns an empty permit.
  permit acquire(long long n, std::optional<std::chrono::milliseconds> lease, std::error_code& ec);
  /// Takes `n` permits if they become available within `wait` (0: one attempt); an empty permit if
  /// not. `lease` as for `acquire`.
  permit try_acquire(long long n, std::chrono::milliseconds wait,
                     std::optional<std::chrono::milliseconds> lease = std::nullopt);
  /// As above; on failure sets `ec` and returns an empty permit.
  permit try_acquire(long long n, std::chrono::milliseconds wait, std::optional<std::chrono::milliseconds> lease,
                     std::error_code& ec);

  /// Sets the permits to `n` (n >= 0) if the semaphore has none yet (its key is missing), with an
  /// expiry `ttl` if given. True when set (Redisson's `trySetPermits`).
  bool try_set_permits(long long n, std::optional<std::chrono::milliseconds> ttl = std::nullopt);
  /// As above; on failure sets `ec` and returns false.
  bool try_set_permits(long long n, std::optional<std::chrono::milliseconds> ttl, std::error_code& ec);
  /// Makes the total (available plus out) `n` (n >= 0), moving the available count by the
  /// difference: it may go below 0 while more permits are out (Redisson's `setPermits`). Returns
  /// the available count after.
  long long set_permits(long long n);
  /// As above; on failure sets `ec` and returns 0.
  long long set_permits(long long n, std::error_code& ec);
  /// Adds `n` available permits (may be negative), exactly once across a lost reply, keeping the
  /// key's TTL. Returns the available count after.
  long long add_permits(long long n);
  /// As above; on failure sets `ec` and returns 0.
  long long add_permits(long long n, std::error_code& ec);
  /// The permits available now, after expired ones were reclaimed (a missing key: 0).
  long long available_permits();
  /// As above; on failure sets `ec` and returns 0.
  long long available_permits(std::error_code& ec);
  /// The permits out now (not expired), any client's.
  long long acquired_permits();
  /// As above; on failure sets `ec` and returns 0.
  long long acquired_permits(std::error_code& ec);
  /// The permits out, nearest expiry first, at most `limit` of them.
  std::vector<permit_entry> permits(std::size_t limit = 100);
  /// As above; on failure sets `ec` and returns an empty list.
  std::vector<permit_entry> permits(std::size_t limit, std::error_code& ec);

  /// Sets the lease of the permit `id` (32 hex digits, as `permit::ids` or Redisson show it) to
  /// `lease` from now, or none with `lease` empty. False if there is no such permit (released, or
  /// expired and reclaimed). A permit kept by this client's watchdog gets the watchdog's lease again
  /// at its next renewal.
  bool update_lease_time(std::string_view id, std::optional<std::chrono::milliseconds> lease);
  /// As above; on failure sets `ec` and returns false.
  bool update_lease_time(std::string_view id, std::optional<std::chrono::milliseconds> lease, std::error_code& ec);
  /// Gives back the permits `ids` (any holder's, as Redisson's `tryRelease(ids)`): all of them, or
  /// none when one is missing or expired. True when given back. A permit a `permit` of this client
  /// holds is then reported lost to it at its next renewal.
  bool try_release(std::span<const std::string> ids);
  /// As above; on failure sets `ec` and returns false.
  bool try_release(std::span<const std::string> ids, std::error_code& ec);

  // ---- async calls ------------------------------------------------------------------------------

  /// Async `try_acquire(n, wait, lease)`; `wait` empty waits as long as it takes. Completion
  /// signature `void(std::error_code, permit)`: an empty permit when none came within `wait`.
  /// Supports per-operation cancellation through an `asio::cancellation_slot` bound to the token: it
  /// completes with `errc::operation_aborted`, and permits its attempt took are given back first.
  template <class CompletionToken>
  auto async_try_acquire(long long n, std::optional<std::chrono::milliseconds> wait,
                         std::optional<std::chrono::milliseconds> lease, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, permit)>(
        [this, n, wait, lease](auto handler) {
          auto x = detail::hook_acquire_cancel(client_, asio::get_associated_cancellation_slot(handler));
          const bool clear = x != nullptr;
          async_acquire_impl(n, wait, lease,
                             detail::erase_handler<std::error_code, permit>(std::move(handler), executor(), clear),
                             std::move(x));
        },
        token);
  }
  /// Async `permit::release()` of `p` (taken by value: the permit is spent). Completion signature
  /// `void(std::error_code)`.
  template <class CompletionToken>
  auto async_release(permit p, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code)>(
        [this, p = std::move(p)](auto handler) mutable {
          async_release_impl(std::move(p), detail::erase_handler<std::error_code>(std::move(handler), executor()));
        },
        token);
  }

  /// Async `try_set_permits(n, ttl)` (`ttl` empty: none). Completion signature
  /// `void(std::error_code, bool set)`; errors as `try_set_permits`: `errc::invalid_argument` (nothing
  /// sent) for `n` below 0 or a `ttl` that is not positive. The handler runs on its associated
  /// executor (the client's if it has none), never inside this call; so do the other async forms'.
  template <class CompletionToken>
  auto async_try_set_permits(long long n, std::optional<std::chrono::milliseconds> ttl, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this, n, ttl](auto handler) {
          async_set_impl(n, ttl, detail::erase_handler<std::error_code, bool>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `set_permits(n)`. Completion signature `void(std::error_code, long long available)`: the
  /// available count after; errors as `set_permits` (`errc::invalid_argument` for `n` below 0).
  template <class CompletionToken>
  auto async_set_permits(long long n, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, long long)>(
        [this, n](auto handler) {
          async_set_permits_impl(n, detail::erase_handler<std::error_code, long long>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `add_permits(n)` (`n` may be negative), exactly once as `add_permits`. Completion
  /// signature `void(std::error_code, long long available)`: the available count after; errors as
  /// `add_permits`.
  template <class CompletionToken>
  auto async_add_permits(long long n, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, long long)>(
        [this, n](auto handler) {
          async_add_impl(n, detail::erase_handler<std::error_code, long long>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `available_permits()`. Completion signature `void(std::error_code, long long available)`;
  /// errors as `available_permits`.
  template <class CompletionToken>
  auto async_available_permits(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, long long)>(
        [this](auto handler) {
          async_available_impl(detail::erase_handler<std::error_code, long long>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `acquired_permits()`. Completion signature `void(std::error_code, long long acquired)`;
  /// errors as `acquired_permits`.
  template <class CompletionToken>
  auto async_acquired_permits(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, long long)>(
        [this](auto handler) {
          async_acquired_impl(detail::erase_handler<std::error_code, long long>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `permits(limit)`: the permits out, nearest expiry first, at most `limit`. Completion
  /// signature `void(std::error_code, std::vector<permit_entry>)`; errors as `permits`.
  template <class CompletionToken>
  auto async_permits(std::size_t limit, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, std::vector<permit_entry>)>(
        [this, limit](auto handler) {
          async_permits_impl(limit, detail::erase_handler<std::error_code, std::vector<permit_entry>>(
                                        std::move(handler), executor()));
        },
        token);
  }
  /// Async `update_lease_time(id, lease)` (`lease` empty: none). Completion signature
  /// `void(std::error_code, bool updated)`: false if there is no such permit; errors as
  /// `update_lease_time` (`errc::invalid_argument` for an id that is not 32 hex digits or a lease
  /// that is not positive).
  template <class CompletionToken>
  auto async_update_lease_time(std::string id, std::optional<std::chrono::milliseconds> lease, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this, id = std::move(id), lease](auto handler) {
          async_update_impl(id, lease, detail::erase_handler<std::error_code, bool>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `try_release(ids)`: gives back all the permits `ids` or none. Completion signature
  /// `void(std::error_code, bool released)`; errors as `try_release` (`errc::invalid_argument` for
  /// no ids, more than 1000, or one that is not 32 hex digits).
  template <class CompletionToken>
  auto async_try_release(std::vector<std::string> ids, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this, ids = std::move(ids)](auto handler) {
          async_release_ids_impl(ids, detail::erase_handler<std::error_code, bool>(std::move(handler), executor()));
        },
        token);
  }

 private:
  asio::any_io_executor executor() const;
  void async_acquire_impl(long long n, std::optional<std::chrono::milliseconds> wait,
                          std::optional<std::chrono::milliseconds> lease,
                          detail::unique_function<void(std::error_code, permit)> h,
                          std::shared_ptr<detail::acquire_cancel> cancel);
  void async_release_impl(permit p, detail::unique_function<void(std::error_code)> h);
  void async_set_impl(long long n, std::optional<std::chrono::milliseconds> ttl,
                      detail::unique_function<void(std::error_code, bool)> h);
  void async_set_permits_impl(long long n, detail::unique_function<void(std::error_code, long long)> h);
  void async_add_impl(long long n, detail::unique_function<void(std::error_code, long long)> h);
  void async_available_impl(detail::unique_function<void(std::error_code, long long)> h);
  void async_acquired_impl(detail::unique_function<void(std::error_code, long long)> h);
  void async_permits_impl(std::size_t limit,
                          detail::unique_function<void(std::error_code, std::vector<permit_entry>)> h);
  void async_update_impl(std::string_view id, std::optional<std::chrono::milliseconds> lease,
                         detail::unique_function<void(std::error_code, bool)> h);
  void async_release_ids_impl(std::span<const std::string> ids, detail::unique_function<void(std::error_code, bool)> h);
  permit take(long long n, std::optional<std::chrono::milliseconds> wait, std::optional<std::chrono::milliseconds> lease,
              std::error_code& ec);
  // The permit the engine granted to `owner` (its ids read from the hold), or `errc::lock_lost`.
  static permit granted(const std::shared_ptr<detail::client_impl>& c, const std::string& name, owner_id owner,
                        std::shared_ptr<detail::lost_slot> slot, std::error_code& ec);

  std::shared_ptr<detail::client_impl> client_;
  std::string name_;
};

}  // namespace redlease
