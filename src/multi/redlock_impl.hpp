// SPDX-License-Identifier: MIT
// The I/O driver of a RedLock (redlease::redlock): a composition above the lock engine. It talks
// to one client per master through that client's lock runtime (a script call on the client's
// executor), feeds the answers to the decision core (redlock_fsm.hpp) and does what it says.
//
// Threads: the state marked "home" lives on the first client's executor (its timers, the fsms,
// the completions); the state under `mu_` is read by the public calls from any thread.
#pragma once

#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "base/command.hpp"
#include "base/script.hpp"
#include "callback_slot.hpp"
#include "multi/node_set.hpp"
#include "multi/redlock_fsm.hpp"
#include "redlease/lock.hpp"
#include "redlease/redlock.hpp"
#include "redlease/reply.hpp"

namespace redlease::detail {

/// The identity of one async acquisition's cancellation (see redlock::async_try_lock).
struct redlock_cancel {};

class redlock_impl : public std::enable_shared_from_this<redlock_impl> {
 public:
  using duration = redlock_clock::duration;
  using time_point = redlock_clock::time_point;
  /// Completes an acquisition: (error, acquired). Runs on the home executor.
  using acquire_done = std::function<void(std::error_code, bool)>;
  /// Completes a release. Runs on the home executor.
  using release_done = std::function<void(std::error_code)>;

  redlock_impl(node_set nodes, std::string name, const redlock_options& o);

  // Any thread.
  /// Starts an acquisition that attempts until `wait_until` (≤ now: one attempt). Fails at once
  /// (through `done`, posted) with would_deadlock while held or acquiring. `cancel`, when set,
  /// names it for `cancel()`.
  void acquire(time_point wait_until, acquire_done done, std::shared_ptr<redlock_cancel> cancel = nullptr);
  /// Ends the acquisition named `x` with operation_aborted, if it is still under way: its requests
  /// are released on every node.
  void cancel(const std::shared_ptr<redlock_cancel>& x);
  /// Starts a release (see redlock::unlock).
  void release(release_done done);
  /// The handle is gone: no callback any more, the watchdog stops, a held lock is released.
  void shutdown() noexcept;
  /// Blocking calls would deadlock on this thread (a client's I/O thread or user context).
  bool blocking_forbidden() const noexcept;
  /// The home client is closed: nothing will complete any more.
  bool home_closed() const noexcept;
  /// How long a blocking call spins for its completion before it sleeps: 200 us under the first
  /// client's `sync_wait_policy::latency_first`, none under `cpu_first`.
  std::chrono::microseconds spin_budget() const noexcept;
  /// Whether `op` is still the operation under way.
  bool current(std::uint64_t op) const;
  std::size_t size() const noexcept { return nodes_.size(); }
  /// The home executor: the first client's.
  asio::any_io_executor executor() const noexcept;

  time_point valid_until() const;
  bool valid() const;
  void set_on_lost(lost_handler cb) { lost_cb_.set(std::move(cb)); }
  std::string value() const;
  std::stop_token lost_token() const;
  std::vector<redlock_token> fencing_tokens() const;

  const std::string name;
  const duration ttl;
  const duration node_timeout;
  const bool fenced;

 private:
  enum class phase { idle, acquiring, held, releasing, closed };
  using answer_fn = std::function<void(std::error_code, const reply&)>;

  // Home only.
  void send(std::size_t node, const lua_script& s, arg_list args, answer_fn on_answer);
  void start_attempt(std::uint64_t op);
  void on_acquire(std::uint64_t op, redlock_acquire_fsm::next n);
  void finish_acquire(std::error_code ec, bool ok);
  void release_everywhere();
  void arm_watchdog(std::uint64_t op);
  void start_round(std::uint64_t op);
  void on_extend(std::uint64_t op, std::uint64_t round, std::size_t node, redlock_extend_fsm::next n);
  void arm(asio::steady_timer& t, time_point at, std::function<void()> fn);
  void do_release(std::uint64_t op, release_done done);
  void finish_release(std::error_code ec);
  // The home client closed: what is under way completes with client_closed.
  void on_home_closed();
  // The acquire script and its arguments: fenced or not (redlock_options::fencing_tokens).
  const lua_script& acquire_script() const;
  arg_list acquire_args() const;
  // Records node `node`'s fencing token from an acquire answer, for attempt (or round) `op`.
  void note_token(std::uint64_t op, std::size_t node, const reply& r);
  void forget_token(std::size_t node);
  void post_home(std::function<void()> fn);
  // As post_home; once the home client is closed, runs `closed` here instead (a completion then
  // goes to the system executor: the home executor runs nothing more).
  void post_home_or(std::function<void()> fn, const std::function<void()>& closed);
  // As post_home_or, but run here when the home executor can be run on this thread
  // (node_set::run_home_here).
  void run_home_or(std::function<void()> fn, const std::function<void()>& closed);
  // The home client is closed: every later call fails with client_closed.
  void closed_for_good();
  arg_list args_with_ttl() const;

  node_set nodes_;  // declared before the timers: outlives them
  const redlock_backoff backoff_;
  const bool retake_;
  const duration interval_;

  // Home only.
  asio::steady_timer timer_;   // the attempt's decide_by, the retry delay, the next round
  asio::steady_timer expiry_;  // the lease's end while held
  std::uint64_t timer_gen_ = 0, expiry_gen_ = 0;
  std::optional<redlock_acquire_fsm> acq_;
  std::optional<redlock_extend_fsm> ext_;
  time_point wait_until_{};
  acquire_done acquire_done_;
  std::shared_ptr<redlock_cancel> cancel_;  // names the acquisition under way, if cancellable
  std::size_t refusals_ = 0;                // the attempt's definitive refusals (WRONGTYPE, NOPERM, ...)
  std::error_code refusal_;                 // the first of them
  std::string refusal_words_;               // its server's words
  release_done release_done_;
  bool close_hook_ = false;
  std::vector<std::weak_ptr<asio::steady_timer>> timeouts_;  // the requests' node timeouts

  // Any thread, under mu_.
  mutable std::mutex mu_;
  phase phase_ = phase::idle;
  std::uint64_t op_ = 0;  // bumped by every acquisition, release and shutdown: stale work stops
  bool lost_ = false;
  time_point valid_until_{};
  std::string value_;
  std::stop_source lost_src_{std::nostopstate};  // a new one per acquisition
  std::vector<std::uint64_t> tokens_;             // per node; 0: none

  callback_slot<const lost_info&> lost_cb_;
};

}  // namespace redlease::detail
