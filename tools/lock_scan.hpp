// SPDX-License-Identifier: MIT
// One pass over the locks in Redis, for `redlease top` and `redlease exporter`: SCAN (never KEYS)
// on every master (standalone, the Sentinel's master, each master of a cluster), the keys
// classified by the library's own description of each kind (describe(): a fair lock's queue, a
// permit semaphore's `{NAME}:timeout` zset, ... are folded into their lock's row), the details of
// each lock read in pipelined batches, and the waiters from the servers' pub/sub counts.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "redlease/redlease.hpp"

namespace redlease::cli {

/// One lock, semaphore or latch a scan found: a row of `top`, a sample of the exporter.
struct found_lock {
  std::string name;       ///< the main key (the lock's name)
  std::string node;       ///< "host:port" of the master it lives on (a cluster); empty otherwise
  /// reentrant | fair | read-write | mutex | semaphore | permit-semaphore | latch |
  /// "semaphore or latch" (a whole number that no waiter tells apart)
  std::string kind;
  long long ttl_ms = -2;              ///< PTTL of the main key: -1 no expiry
  std::vector<std::string> holders;   ///< the first `list_cap` holders: owner fields, a mutex's token
  long long holder_count = 0;         ///< every holder (a read-write lock's readers and writer)
  long long hold_count = 0;           ///< the sum of the listed holders' hold counts
  std::string mode;                   ///< a read-write lock's: read | write
  std::vector<std::string> queue;     ///< a fair lock's first `list_cap` waiters, head first
  long long queue_length = 0;         ///< a fair lock's waiters in its queue
  long long permits = -1;             ///< a semaphore's available permits; a latch's count
  long long permits_out = -1;         ///< a permit semaphore's permits out (its zset's size)
  long long waiters = 0;              ///< subscribers of its channels, plus a fair lock's queue
};

/// What to scan.
struct scan_options {
  std::string match = "*";      ///< glob over the lock names (auxiliary keys follow their lock)
  std::size_t count = 1000;     ///< SCAN's COUNT, and the size of each pipelined batch
  std::size_t list_cap = 3;     ///< holders and queue entries kept per lock
};

/// What one pass cost.
struct scan_cost {
  std::size_t keys = 0;                    ///< keys SCAN returned, over every master
  std::size_t commands = 0;                ///< commands sent, SCAN included
  std::size_t masters = 0;                 ///< masters scanned
  std::chrono::steady_clock::duration took{};  ///< wall time of the pass
};

/// Scans the locks of one deployment. Not thread-safe: one thread uses it.
class lock_scanner {
 public:
  /// Connects with `cfg` (standalone, Sentinel or a cluster node: every master of the cluster is
  /// scanned). Throws redlease::error when Redis is unavailable.
  explicit lock_scanner(const config& cfg);
  ~lock_scanner();
  lock_scanner(const lock_scanner&) = delete;
  lock_scanner& operator=(const lock_scanner&) = delete;

  /// One pass: every lock whose name matches, in no particular order. Throws redlease::error.
  std::vector<found_lock> scan(const scan_options& o, scan_cost* cost = nullptr);

  /// Deletes the lock `l` whoever holds it and wakes its waiters (the library's force_unlock for
  /// its kind; a semaphore's or a latch's key is deleted). Returns whether something was deleted.
  /// Throws redlease::error.
  bool force_unlock(const found_lock& l);

  /// Whether the deployment is a cluster (rows then name their node).
  bool cluster() const noexcept;
  /// The client routed by key (a lock of any name), for what a caller reads beyond the scan (the
  /// holders' cards).
  client& routed();

 private:
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace redlease::cli
