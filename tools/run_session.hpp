// SPDX-License-Identifier: MIT
// `redlease run`: what every kind of lock shares. run_session blocks the forwarded signals, starts
// the command, supervises it (signals forwarded, terminated when the lock is lost) and ends the run
// with the release and the exit status; a kind's session connects, acquires and releases
// (cli_run.cpp: the kinds on one server; cli_run_redlock.cpp: RedLock over several masters).
//
// Threads and signals: the forwarded signals and SIGCHLD are blocked before any client (and its I/O
// thread) exists, so they are only ever read from a signalfd by the main thread. The clients'
// callbacks (acquisition done, lock lost) run on their I/O threads and only store a value and write
// to an eventfd; the main thread poll()s both. The lock is acquired (asynchronously, so that a
// signal can interrupt the wait) and released by the main thread.
#pragma once

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "commands.hpp"
#include "redlease/lock.hpp"

namespace redlease::cli::run_detail {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct run_options {
  std::vector<std::string> urls;  // --redis, in the order given; none: $REDLEASE_URL
  std::string name;
  std::vector<std::string> command;
  std::string wait, lease, watchdog = "30s", kill_after = "10s";
  bool mutex = false, fair = false, read = false, write = false, redlock = false, semaphore = false;
  long long permits = 1;  // --semaphore: how many
  bool quiet = false, verbose = false, json = false;
};

/// `signal_name(SIGTERM)` is "SIGTERM".
std::string signal_name(int sig);
/// The name of a loss reason in events: "expired", "deleted", "taken", "quorum".
const char* reason_name(lost_reason r);
/// "250ms", "5s", "2m", "1h".
std::string format_ms(milliseconds d);
long long ms_between(steady::time_point a, steady::time_point b);
/// The signals read from the signalfd `fd` since the last call.
std::vector<signalfd_siginfo> read_signals(int fd);
/// Empties the eventfd `fd`.
void drain(int fd);

// One event: a JSON line with --json, else (depending on its level) a human line.
class reporter {
 public:
  enum level { verbose_only, notice, error };

  reporter(const run_options& o, std::string lock) : o_(o), lock_(std::move(lock)) {}

  class event {
   public:
    event(const reporter& r, level lv, const char* name);
    event& str(const char* key, std::string_view v);
    event& num(const char* key, long long v);
    /// Emits the event; `text` is the human message (without the "redlease: " prefix).
    void say(const std::string& text);

   private:
    void key_(const char* key);
    const reporter& r_;
    level lv_;
    std::string line_;
  };

  event operator()(level lv, const char* name) const { return event(*this, lv, name); }
  /// The lock name as shown in human messages.
  std::string quoted() const { return "\"" + printable(lock_) + "\""; }

 private:
  const run_options& o_;
  std::string lock_;
};

class unique_fd {
 public:
  explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
  ~unique_fd();
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  int get() const noexcept { return fd_; }
  /// Closes the descriptor held, if any, and holds `fd`.
  void reset(int fd) noexcept;

 private:
  int fd_;
};

// What the clients' I/O threads tell the main thread. Shared so that it outlives any late callback.
struct shared_state {
  enum { pending, acquired, not_acquired, failed };
  unique_fd wake;
  std::atomic<int> acquire{pending};
  std::error_code acquire_error;   // written before `acquire` is released
  std::string acquire_error_text;  // the server's words for it (redlease::last_error_text)
  std::uint64_t fencing_token = 0;  // the grant's fencing token (written before `acquire`)
  std::string fencing_tokens;       // a RedLock's per-node tokens, "0=T0 1=T1 ..." (likewise)
  std::string permit_ids;           // a semaphore's permits, "ID ID ..." (likewise)
  std::atomic<int> lost{-1};       // a lost_reason once the lock is lost

  shared_state();
  void notify() noexcept;
};

// One `redlease run`, in the order it happens; run() strings the steps together. A step that ends
// the run returns its exit status; std::nullopt goes on to the next step.
//   prepare()        the options' durations; the forwarded signals blocked and read from a signalfd
//   check_options()  what the kind refuses (the kind's)
//   connect()        the clients and the lock handle (the kind's)
//   acquire()        the lock, or a signal that ends the wait (the kind's; it ends with acquired())
//   spawn()          the command, with REDLEASE_LOCK_NAME (and REDLEASE_FENCING_TOKEN or a RedLock's
//                    REDLEASE_FENCING_TOKENS, if any)
//   supervise()      the command until it exits: signals forwarded, terminated when the lock is lost
//   exit_status()    the release (the kind's release()), and the status redlease exits with
class run_session {
 public:
  explicit run_session(const run_options& o) : o_(o), rep_(o, o.name) {}
  virtual ~run_session() = default;
  run_session(const run_session&) = delete;
  run_session& operator=(const run_session&) = delete;

  // `reraise`: the signal the command died of, when redlease should end by it too (see run_command).
  int run(int& reraise);

 protected:
  using step = std::optional<int>;

  virtual step check_options() = 0;
  virtual void connect() = 0;
  virtual step acquire() = 0;
  // Sends the release and waits for it: errc::lock_lost if the lock was no longer ours.
  virtual std::error_code unlock() = 0;
  // Why the lock was lost, when its release found it so and no loss was told before: "taken",
  // "deleted" or "unknown".
  virtual const char* lost_at_release() = 0;

  // Releases the lock (unless known lost); true if it was still ours. Sets release_error_ when the
  // release was not confirmed.
  bool release();

  int fail(int status, const std::string& library_message) const;
  int interrupted(int sig) const;
  void report_lost(const char* reason);
  // After a grant: the `acquired` event (`kind`, `holder` as `status` lists it), then the end of the
  // run if the lock was lost already or a signal came with the grant.
  step acquired(const char* kind, const std::string& holder);
  // The lock's on_lost: stores the reason in state_ and wakes the main thread.
  lost_handler tell_lost() const;
  // While the acquisition is out: a signal read from the signalfd cancels it (`cancel` emits the
  // cancellation on the client's thread), waits up to `bound` for it to end, gives back a grant
  // that came first, and ends the run by the signal (128+N). std::nullopt when no signal came.
  step interrupt_acquisition(const std::function<void()>& cancel, milliseconds bound);
  // Waits until the acquisition started ends, a signal interrupting it (interrupt_acquisition);
  // `each_wake` runs after every wake-up (it may start the acquisition again). std::nullopt once it
  // ended (state_->acquire says how).
  step await_acquisition(const std::function<void()>& cancel, milliseconds bound,
                         const std::function<void()>& each_wake = {});
  // The kinds on one server: a usage error for several --redis (those are for --redlock).
  step one_server_only() const;
  // The config of the client for `url` (make_config): with --json, its warnings and background
  // errors are events; the lease is --watchdog-timeout.
  config client_config(const std::string& url) const;

  const run_options& o_;
  const reporter rep_;
  // prepare()
  std::optional<milliseconds> wait_, lease_;
  milliseconds watchdog_{0}, kill_after_{0};
  unique_fd sigfd_;
  // What the clients' I/O threads tell the main thread (shared: it outlives any late callback).
  std::shared_ptr<shared_state> state_ = std::make_shared<shared_state>();
  // acquire() .. exit_status()
  steady::time_point t0_;
  bool lost_reported_ = false, lost_ = false;
  std::error_code release_error_;

 private:
  step prepare();
  step spawn();
  int supervise();
  int exit_status(int wstatus, int& reraise);

  sigset_t handled_{}, previous_{}, defaults_{};
  std::set<int> inherited_;
  pid_t pid_ = -1;
  bool own_group_ = false;
};

/// `redlease run --redlock` (cli_run_redlock.cpp): the command's status, as run_session::run.
int run_redlock(const run_options& o, int& reraise);
/// `redlease run --semaphore` (cli_run_semaphore.cpp): the command's status, as run_session::run.
int run_semaphore(const run_options& o, int& reraise);

}  // namespace redlease::cli::run_detail
