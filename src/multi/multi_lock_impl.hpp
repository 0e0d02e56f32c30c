// SPDX-License-Identifier: MIT
// The state behind redlease::multi_lock: a composition above the lock engine. It drives its members
// through their public async calls (fresh handles with on_lost slots of their own, owners of its
// own) and decides on their answers.
//
// Threads: members answer on their own clients' I/O threads, the retry timer runs on the first
// member's, the public calls come from any thread; all mutable state is under `mu_`, and nothing
// is called out of it (members' calls, completions, on_lost) while it is held.
#pragma once

#include <asio/cancellation_signal.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "callback_slot.hpp"
#include "multi/node_set.hpp"
#include "multi/redlock_fsm.hpp"
#include "redlease/multi_lock.hpp"

namespace redlease::detail {

// A per-operation cancellation of an async acquisition: which operation, once it started.
struct multi_cancel {
  std::mutex mu;
  std::weak_ptr<multi_lock_impl> impl;
  std::uint64_t op = 0;
  bool requested = false;
};

class multi_lock_impl : public std::enable_shared_from_this<multi_lock_impl> {
 public:
  using clock = std::chrono::steady_clock;
  using acquire_done = unique_function<void(std::error_code, bool)>;
  using release_done = unique_function<void(std::error_code)>;
  using later = std::vector<unique_function<void()>>;  // what to do once mu_ is released

  multi_lock_impl(std::vector<lock_handle> members, const multi_lock_options& o);
  // Sets the members' on_lost callbacks and the first client's close hook (once shared).
  void start();

  // Starts an acquisition that attempts until `wait_until` (≤ now: one attempt). would_deadlock
  // (through `done`) while held or acquiring.
  void acquire(clock::time_point wait_until, acquire_done done, std::shared_ptr<multi_cancel> cancel = nullptr);
  // The user cancelled acquisition `op`.
  void cancel(std::uint64_t op);
  // Releases every member (see multi_lock::unlock).
  void release(release_done done);
  // The handle is gone: no callback any more, an acquisition is cancelled, a hold released.
  void shutdown() noexcept;

  bool blocking_forbidden() const noexcept;
  asio::any_io_executor executor() const noexcept;
  bool valid() const;
  clock::time_point valid_until() const;
  std::stop_token lost_token() const;
  void set_on_lost(multi_lost_handler cb) { lost_cb_.set(std::move(cb)); }
  std::size_t size() const noexcept { return m_.size(); }
  const lock_handle& member(std::size_t i) const { return m_.at(i).handle; }

 private:
  enum class phase { idle, acquiring, held, releasing, closed };
  enum class outcome { pending, granted, refused, failed, aborted };
  struct member_state {
    lock_handle handle;                  // fresh: its on_lost slot is ours
    // Under mu_.
    owner_id owner = 0;  // this attempt's (or hold's) owner
    outcome out = outcome::pending;
    bool lost = false;   // lost during the attempt, before the decision
    std::shared_ptr<asio::cancellation_signal> signal;  // cancels this attempt's acquisition
  };

  void start_attempt(std::uint64_t op);
  void on_answer(std::uint64_t op, std::uint64_t attempt, std::size_t i, owner_id owner, std::error_code ec, bool ok);
  void on_lost(std::size_t i, const lost_info& info);
  void on_retry(std::uint64_t op);
  void on_home_closed();
  // Under mu_: the decision once every member answered.
  void decide(later& todo);
  // Under mu_: cancels the members still pending.
  void cancel_pending(later& todo);
  // Releases member `i`'s hold of `owner`, answers ignored.
  void release_member(later& todo, std::size_t i, owner_id owner);
  void finish_acquire(later& todo, std::error_code ec, bool ok);
  // Under mu_: the holds of the current owners, as (index, owner) pairs.
  std::vector<std::pair<std::size_t, owner_id>> owners() const;

  std::vector<member_state> m_;
  const std::chrono::milliseconds attempt_wait_;
  const redlock_backoff backoff_;
  const node_set clients_;  // member i's client is node i

  mutable std::mutex mu_;
  phase phase_ = phase::idle;
  std::uint64_t op_ = 0;       // bumped by every acquisition and by shutdown: stale answers are undone
  std::uint64_t attempt_ = 0;  // bumped by every attempt
  std::size_t pending_ = 0;    // members not yet answered (this attempt, or this release)
  bool cancelling_ = false;    // this attempt's pending members were cancelled
  bool user_cancel_ = false;   // the acquisition was cancelled by its caller
  bool waiting_retry_ = false; // between attempts
  std::uint32_t retries_ = 0;
  std::error_code error_;      // this attempt's first member error; the release's first by index
  std::vector<std::error_code> release_errors_;
  clock::time_point wait_until_{};
  acquire_done acquire_done_;
  release_done release_done_;
  bool lost_ = false;
  std::stop_source stop_{std::nostopstate};

  callback_slot<const multi_lost_info&> lost_cb_;
};

}  // namespace redlease::detail
