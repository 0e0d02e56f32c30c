// SPDX-License-Identifier: MIT
/// @file
/// A stand-in for a Java Redisson client in interop tests: RedissonFairLock and
/// RedissonReadWriteLock as Redisson 4.7 runs them, written from the protocol notes
/// (/work/shared/reference/redisson-protocol-2.md §0-§2, §10), not from redlease's scripts.
///
/// Each operation is a raw EVAL of Redisson's own script logic (its bugs included where they are
/// harmless to a test: the fair lock's 0 ms retry, the shift of every deadline by the acquirer's
/// allowance, the silent downgrade, the accumulating write TTL, the spurious message and latch of an
/// unlock with no "mode"), sent over a `raw_client`. The wait loops follow Java's `lock()` and
/// `tryLock()` (§1.8): try, subscribe, try again, wait for a message for at most the reply's TTL,
/// and for the fair lock `acquireFailed` when a `tryLock` gives up. There is no watchdog: a lease of
/// 0 or less means 30000 ms, once. PUBLISH (not SPUBLISH) and no WAIT, as a single-server Redisson.
///
/// Not thread-safe: one object per thread. Objects made with the same `client_id` behave like
/// threads of one Java client (owner ids `<client_id>:<thread id>`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "raw_client.hpp"

namespace redlease::test {

/// Redisson's fair and read-write locks over a raw connection (see the file comment).
class redisson_peer {
 public:
  /// Redisson's `fairLockWaitTimeout` default: the allowance W of a wait without a bound.
  static constexpr long long fair_lock_wait_timeout = 300'000;

  /// Connects to `host:port`. An empty `client_id` gets a new random UUID (a new Java client).
  redisson_peer(std::string host, std::uint16_t port, std::string password = {},
                std::string client_id = {});

  /// This client's id, a lowercase UUID like `java.util.UUID.randomUUID().toString()`.
  const std::string& client_id() const noexcept { return client_id_; }
  /// The owner id Redisson uses for `thread_id` of this client: `<client_id>:<thread_id>`.
  std::string owner(long long thread_id) const;
  /// A new random lowercase version-4 UUID.
  static std::string new_client_id();
  /// Redisson's `prefixName(prefix, name)`: `prefix:{name}`, or `prefix:name` if name has a `{`.
  static std::string prefix_name(std::string_view prefix, std::string_view name);
  /// Redisson's `suffixName(name, suffix)`: `{name}:suffix`, or `name:suffix` if name has a `{`.
  static std::string suffix_name(std::string_view name, std::string_view suffix);
  /// The client's clock, as Redisson reads it: epoch milliseconds.
  static long long now_ms();

  /// The command connection (for inspecting state from the peer's side).
  raw_client& raw() noexcept { return cmd_; }
  /// How long a wait without a bound (`wait_ms < 0`) may last before the peer throws
  /// `std::runtime_error` instead of hanging the test. Default 30 s.
  void set_unbounded_cap(long long ms) noexcept { unbounded_cap_ms_ = ms; }

  // ---- RedissonFairLock ----------------------------------------------------------------------

  /// `wait_ms < 0`: `lock(lease)`; `wait_ms == 0`: `tryLock()` (one mode-A attempt, never
  /// queued); `wait_ms > 0`: `tryLock(wait, lease)` (mode B, the per-waiter channel
  /// `redisson_lock__channel:{name}:<owner>`, acquireFailed on giving up). True when acquired.
  bool fair_try_lock(const std::string& name, const std::string& owner, long long lease_ms,
                     long long wait_ms);
  /// One mode-A ("try-once") script call: nil when acquired, else 1.
  raw_reply fair_acquire_try_once(const std::string& name, const std::string& owner, long long lease_ms,
                                  long long allowance_ms = fair_lock_wait_timeout);
  /// One mode-B ("queueing") script call: nil when acquired, else the TTL to wait (may be 0 or
  /// negative, as Redisson's).
  raw_reply fair_acquire_queueing(const std::string& name, const std::string& owner, long long lease_ms,
                                  long long allowance_ms);
  /// Redisson's acquireFailed with allowance `allowance_ms`.
  void fair_acquire_failed(const std::string& name, const std::string& owner, long long allowance_ms);
  /// `unlock()`: nil (IllegalMonitorStateException in Java), 0 (still held) or 1 (released, or the
  /// lock was already gone). `internal_lease_ms` is the PEXPIRE of a re-entrant decrement.
  raw_reply fair_unlock(const std::string& name, const std::string& owner,
                        long long internal_lease_ms = 30'000);

  // ---- RedissonReadWriteLock -----------------------------------------------------------------

  /// `readLock()`: `wait_ms < 0` lock(), `0` tryLock(), `> 0` tryLock(wait, lease); the channel is
  /// `redisson_rwlock:{name}`. True when acquired.
  bool read_lock(const std::string& name, const std::string& owner, long long lease_ms, long long wait_ms);
  /// `writeLock()`, as `read_lock`. A reader asking for the write lock waits (no upgrade).
  bool write_lock(const std::string& name, const std::string& owner, long long lease_ms, long long wait_ms);
  /// One read-acquire script call: nil when acquired, else the PTTL.
  raw_reply read_acquire(const std::string& name, const std::string& owner, long long lease_ms);
  /// One write-acquire script call: nil when acquired, else the PTTL.
  raw_reply write_acquire(const std::string& name, const std::string& owner, long long lease_ms);
  /// `readLock().unlock()`: nil (not held), 0 (still held) or 1 (freed).
  raw_reply read_unlock(const std::string& name, const std::string& owner);
  /// `writeLock().unlock()`: nil (not held), 0 (still held) or 1 (write released).
  raw_reply write_unlock(const std::string& name, const std::string& owner,
                         long long internal_lease_ms = 30'000);

 private:
  raw_client subscribe(const std::string& channel);
  bool wait_message(raw_client& sub, long long ms);
  std::string latch_key(const std::string& name);
  bool rw_lock(bool write, const std::string& name, const std::string& owner, long long lease_ms,
               long long wait_ms);

  std::string host_;
  std::uint16_t port_;
  std::string password_;
  std::string client_id_;
  raw_client cmd_;
  long long unbounded_cap_ms_ = 30'000;
};

}  // namespace redlease::test
