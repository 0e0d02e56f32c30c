// SPDX-License-Identifier: MIT
// The runtime under the lock layer and the facade: the executor the client's state lives on (its own
// io_context on its own I/O thread, or a strand of the caller's executor), the inbox other threads
// hand work to it through, the I/O guard that lets a lone blocking caller write its own request, and
// blocking calls (sync_call) with their spin-then-sleep wait. It knows nothing of locks; the client
// (src/facade/client_impl.hpp) derives from it and says how quiet its connections are and how a call
// reads its replies on a lane.
#pragma once

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "base/handlers.hpp"
#include "net/lane.hpp"
#include "redlease/config.hpp"
#include "redlease/detail/async.hpp"
#include "redlease/error.hpp"
#include "runtime/io_guard.hpp"
#include "runtime/one_shot.hpp"

namespace redlease::detail {

// The board that a client's blocked callers sleep on, and the executor its batched wakes run on.
struct sync_board : wake_board {
  explicit sync_board(asio::any_io_executor e) : ex(std::move(e)) {}
  asio::any_io_executor ex;
};

class io_runtime {
 public:
  // Validates `cfg` (invalid_argument). With `user_ex` empty the runtime runs its own io_context on
  // its own thread (started by start_io_thread).
  io_runtime(config cfg, std::optional<asio::any_io_executor> user_ex);
  io_runtime(const io_runtime&) = delete;
  io_runtime& operator=(const io_runtime&) = delete;
  virtual ~io_runtime();

  const config& cfg() const noexcept { return cfg_; }
  const asio::any_io_executor& executor() const noexcept { return ex_; }
  // True on the I/O thread, and on a thread that holds the I/O guard (run_direct).
  bool on_io_thread() const noexcept;
  // With an executor the caller supplied: whether this thread runs its context (an io_context's or
  // a thread_pool's) outside the client's strand (see sync_call_on_context).
  bool on_user_context() const noexcept;
  bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }

  // A lone blocking caller's shortcut: runs `f` on the calling thread, under the I/O guard, if the
  // client runs its own I/O thread and that thread is idle (the guard is free), after whatever is in
  // the inbox (the order of one thread's calls is kept). A request `f` makes is written at once on
  // this thread (io_guard::direct): no hand-off to the I/O thread, no wake-up of it. False, and `f`
  // not run, otherwise (busy, closed, or a user executor). With `patience`, a guard that is taken
  // is tried again for that long: a caller that spun for its last reply usually comes back while
  // the I/O thread is still finishing the read that brought it.
  //
  // With `only_if_quiet` (a caller that is not alone), `f` runs only if, besides, no command
  // connection has anything queued or in flight (quiet()): the other blocking callers then wait
  // for something else (a lock's release), no write is there to join, and writing at once saves
  // the I/O thread's wake-up. While requests are out, the request goes to the I/O thread, to be
  // pipelined with theirs.
  //
  // `lanes`, when given, are handed to the guard while `f` runs (io_guard::call_lanes): a node may
  // send f's requests on a lane of the call.
  template <class F>
  bool run_direct(F&& f, std::chrono::nanoseconds patience = {}, bool only_if_quiet = false,
                  lane_session* lanes = nullptr) {
    if (!guard_) return false;
    io_guard::scope held(*guard_, std::try_to_lock);
    if (!held.owns() && patience.count() > 0) {
      spin_until([&] { return held.try_again(*guard_); }, std::chrono::steady_clock::now() + patience);
    }
    if (!held.owns() || closing_ || closed_.load(std::memory_order_acquire)) return false;
    if (only_if_quiet && !quiet()) return false;
    io_guard::direct_scope direct;
    drain_inbox();
    io_guard::lanes_scope on(*guard_, lanes);
    std::forward<F>(f)();
    return true;
  }

  // Executor (or guard holder) only: no command connection has anything queued, in flight, being
  // written or read (the client's connections: it knows them).
  virtual bool quiet() const = 0;

  // After run_direct: waits, on this thread, for the replies to what the call sent on the lane `s`
  // holds, and runs their handlers under the I/O guard (their follow-up requests may go on the lane
  // too), until the call is `answered` or none of its requests there waits for a reply; then gives
  // the lane back, or hands it to its node while requests are still in flight. Each wait spins for
  // the budget of config::sync_wait (see lane_spin), then sleeps in poll().
  virtual void pump_lane(lane_session& s, const one_shot& answered) = 0;
  // How long a wait on the lane may spin before it sleeps, and what it learns from the wait.
  std::chrono::nanoseconds lane_spin() noexcept;
  void lane_waited(bool caught, std::chrono::nanoseconds spin, clock::duration rtt) noexcept;

  // Runs `f` on the executor (inline when already there). False, and `f` not run, once closed.
  template <class F>
  bool run(F&& f) {
    return submit(std::forward<F>(f), true);
  }

  // Like run, but always posted to the executor, never run inline. False once closed.
  template <class F>
  bool post(F&& f) {
    return submit(std::forward<F>(f), false);
  }

  // Like run, for operations whose handler must complete even when the client is closed: `f(false)`
  // runs on the executor, or `f(true)` at once on the calling thread when the client is closed. A
  // handler completed that way is invoked directly (its executor may be gone).
  template <class F>
  void run_or_fail(F&& f) {
    if (on_io_thread()) {
      if (closing_) return complete_inline([&] { f(true); });
      return f(false);
    }
    if (!closed_.load(std::memory_order_acquire)) {
      // The inbox runs `f(false)` on the executor, or `f(true)` if the client closes first.
      enqueue([f = std::forward<F>(f)](bool closed) mutable {
        if (closed) complete_inline([&] { f(true); });
        else f(false);
      });
      return;
    }
    complete_inline([&] { f(true); });
  }

  std::atomic<int> sync_waiters{0};  // threads blocked in sync_call
  std::atomic<std::int64_t> sync_rtt_ns{100'000};  // recent round trip of a lone blocking call (smoothed)
  // The lane's round trip as its replies show it (smoothed; a reply that came after the spin counts
  // as twice the spin), replies in a row that came after the spin, and waits on the lane.
  std::atomic<std::int64_t> lane_rtt_ns{50'000};
  std::atomic<int> lane_misses{0};
  std::atomic<unsigned> lane_waits{0};
  const std::shared_ptr<sync_board>& board() const noexcept { return board_; }

 protected:
  // Starts the own I/O thread (none with a user executor). `self`: this runtime's owner, whose
  // inbox drains are posted with a weak reference (a drain posted as it closes may never run).
  void start_io_thread(std::weak_ptr<io_runtime> self);
  // Joins the I/O thread unless this is it or it is joined already; true if this call joined it.
  bool join_io_thread() noexcept;

  config cfg_;
  std::shared_ptr<asio::io_context> own_ctx_;
  std::shared_ptr<io_guard> guard_;  // own I/O thread only: every handler of ex_ runs under it
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  asio::any_io_executor ex_;
  std::thread thread_;
  std::thread::id thread_id_;
  std::shared_ptr<sync_board> board_;
  std::weak_ptr<io_runtime> self_;
  std::mutex join_mu_;  // thread_.join() and joinable(), across closers
  std::atomic<bool> closed_{false};
  bool closing_ = false;  // executor only

  // run and post: on the executor, `f` runs inline or is posted; elsewhere it goes to the inbox
  // unless closed (if the client closes before it runs, it is destroyed unrun).
  template <class F>
  bool submit(F&& f, bool may_run_inline) {
    if (on_io_thread()) {
      if (closing_) return false;
      if (may_run_inline) std::forward<F>(f)();
      else asio::post(ex_, std::forward<F>(f));
      return true;
    }
    if (closed_.load(std::memory_order_acquire)) return false;
    enqueue([f = std::forward<F>(f)](bool closed) mutable {
      if (!closed) f();
    });
    return true;
  }

  // The inbox: work handed to the executor by other threads. A lock-free stack that the executor
  // takes whole; only the thread that finds it empty posts to the executor, so a burst of blocking
  // callers costs one post (one wake-up of the I/O thread, one turn of Asio's queue lock) instead of
  // one each. Order per calling thread is kept (the stack is reversed when taken).
  // A job is one allocation: the link and the callable together.
  struct inbox_job {
    inbox_job* next = nullptr;
    virtual ~inbox_job() = default;
    virtual void run(bool closed) = 0;
  };
  template <class F>
  struct inbox_fn final : inbox_job {
    F f;
    explicit inbox_fn(F&& fn) : f(std::move(fn)) {}
    void run(bool closed) override { f(closed); }
  };
  std::atomic<inbox_job*> inbox_{nullptr};
  template <class F>
  void enqueue(F&& f) {
    push(new inbox_fn<std::decay_t<F>>(std::forward<F>(f)));
  }
  void push(inbox_job* job);
  // Runs every job in the inbox, oldest first: with `closed` false on the executor (true there once
  // closing), or with `closed` true on any thread once closed, when the executor may never run a
  // drain again.
  void run_inbox(bool closed) noexcept;
  void drain_inbox() noexcept { run_inbox(closing_); }
  void fail_inbox() noexcept { run_inbox(true); }
};

// The rendezvous of a blocking call with its completion on the I/O thread.
template <class T>
struct sync_slot {
  std::shared_ptr<sync_board> board;
  one_shot event;
  std::error_code ec;
  std::string text;  // the error's words (the server's reply text), for last_error_text()
  T value{};
};

// Completes a sync_slot exactly once: when called, or with client_closed if it is destroyed unused
// (the client closed and dropped the operation), so the blocked caller always wakes.
template <class T>
class sync_completer {
 public:
  explicit sync_completer(std::shared_ptr<sync_slot<T>> s) : s_(std::move(s)) {}
  sync_completer(sync_completer&& o) noexcept : s_(std::move(o.s_)) {}
  sync_completer& operator=(sync_completer&&) = delete;
  ~sync_completer() { complete(errc::client_closed, T{}); }
  void operator()(std::error_code ec, T v) { complete(ec, std::move(v)); }

 private:
  void complete(std::error_code ec, T v) {
    if (!s_) return;
    s_->ec = ec;
    if (ec) s_->text = error_text_slot();
    s_->value = std::move(v);
    // A system call only if the caller sleeps. On the I/O thread the wake joins the batch that the
    // board wakes once the handlers that are ready have run (the rest of this read's replies).
    if (s_->event.set_quietly()) {
      auto& b = s_->board;
      if (!b->on_owner_thread()) {
        b->wake(s_->event.bit());
      } else if (b->defer(s_->event.bit())) {
        asio::post(b->ex, [b] { b->flush(); });
      }
    }
    s_.reset();
  }
  std::shared_ptr<sync_slot<T>> s_;
};

// Runs `start(done)` on the client's executor and blocks until `done(ec, value)` is called.
// Fails with would_deadlock on the executor itself, and with client_closed once closed. The
// client's only blocking caller runs `start` itself when the I/O thread is idle (run_direct); so
// does one whose fellow blocking callers have no request out (they wait for locks).
//
// How the caller waits is `config::sync_wait`. latency_first: the client's only blocking caller
// spins while a reply is plausibly close — up to 1.5 times the recent round trip of blocking calls,
// at most 200 us — then sleeps; with several blocking callers nobody spins (they would take the CPU
// the I/O thread and the server need). cpu_first: it sleeps at once. Either way it sleeps on a
// futex that the I/O thread wakes once (one_shot): no yield loop.
template <class T, class Start>
T sync_call_on_context(io_runtime& c, std::error_code& ec, Start&& start);

template <class T, class Start>
T sync_call(io_runtime& c, std::error_code& ec, Start&& start) {
  ec.clear();
  error_text_slot().clear();
  if (c.on_io_thread()) {
    ec = errc::would_deadlock;
    return T{};
  }
  if (c.on_user_context()) return sync_call_on_context<T>(c, ec, std::forward<Start>(start));
  auto slot = std::make_shared<sync_slot<T>>();
  slot->board = c.board();
  auto t0 = std::chrono::steady_clock::now();
  bool alone = c.sync_waiters.fetch_add(1, std::memory_order_relaxed) == 0;
  // Counted out however this call leaves (start may throw bad_alloc): a count left behind would
  // make every later caller "not alone" for good (no lane, no spin).
  struct count_out {
    std::atomic<int>& n;
    ~count_out() { n.fetch_sub(1, std::memory_order_relaxed); }
  } counted{c.sync_waiters};
  // With the I/O thread idle, a caller alone, or one whose fellows have no request out, writes its
  // own request (run_direct); otherwise the I/O thread does, with whatever else is waiting
  // (auto-pipelining).
  bool latency_first = c.cfg().sync_wait == sync_wait_policy::latency_first;
  lane_session lanes;
  // A caller that is not alone writes only if nobody else has a request out (the others wait for
  // locks), and not on the lane: its reader spins, and the CPU is shared.
  bool direct = c.run_direct(
      [&] { start(unique_function<void(std::error_code, T)>(sync_completer<T>(slot))); },
      alone && latency_first ? std::chrono::microseconds(20) : std::chrono::microseconds(0), /*only_if_quiet=*/!alone,
      alone ? &lanes : nullptr);
  // The request went on the lane: nobody else reads its reply.
  if (lanes.held()) c.pump_lane(lanes, slot->event);
  if (!direct && !c.run([done = sync_completer<T>(slot), start = std::forward<Start>(start)]() mutable {
        start(unique_function<void(std::error_code, T)>(std::move(done)));
      })) {
    ec = errc::client_closed;
    return T{};
  }
  if (alone && latency_first) {
    auto budget = std::min<std::int64_t>(c.sync_rtt_ns.load(std::memory_order_relaxed) * 3 / 2, 200'000);
    spin_until([&] { return slot->event.ready(); }, t0 + std::chrono::nanoseconds(budget));
  }
  slot->event.wait(*slot->board);
  if (alone) {
    // The round trip a lone caller sees, smoothed (1/8 per call), for the next spin budget.
    auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    auto prev = c.sync_rtt_ns.load(std::memory_order_relaxed);
    c.sync_rtt_ns.store(prev + (std::min<std::int64_t>(took, 1'000'000) - prev) / 8, std::memory_order_relaxed);
  }
  ec = slot->ec;
  error_text_slot() = ec ? std::move(slot->text) : std::string();
  return std::move(slot->value);
}

// A blocking call on a thread that runs the context of an executor the caller supplied, outside the
// client's strand (a coroutine resumed there, a handler posted to the io_context). The strand may
// need this very thread: with no other thread running the context it never runs, and the request's
// own timeout is a timer on that context too. So the request is withdrawn if the strand has not
// started it within the request timeout, and the call fails with would_deadlock; once started, the
// strand runs on another thread, and the call sleeps until its answer. Until then it polls (every
// 200 us): a rare path, kept off the common one.
template <class T, class Start>
T sync_call_on_context(io_runtime& c, std::error_code& ec, Start&& start) {
  enum : int { posted, started, withdrawn };
  auto slot = std::make_shared<sync_slot<T>>();
  slot->board = c.board();
  auto state = std::make_shared<std::atomic<int>>(posted);
  if (!c.run([done = sync_completer<T>(slot), start = std::forward<Start>(start), state]() mutable {
        int expected = posted;
        if (!state->compare_exchange_strong(expected, started)) return;  // withdrawn: nobody reads `done`
        start(unique_function<void(std::error_code, T)>(std::move(done)));
      })) {
    ec = errc::client_closed;
    return T{};
  }
  const auto give_up = std::chrono::steady_clock::now() + c.cfg().request_timeout;
  while (!slot->event.ready() && state->load() == posted) {
    if (std::chrono::steady_clock::now() >= give_up) {
      int expected = posted;
      if (state->compare_exchange_strong(expected, withdrawn)) {
        ec = errc::would_deadlock;
        error_text_slot() = "a blocking call on a thread that runs the client's executor: the client's strand did "
                            "not run within the request timeout (nothing else runs that executor)";
        return T{};
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Started: another thread runs the strand, which completes the call (it can no longer be
  // withdrawn), so the wait sleeps as any blocking call's does.
  slot->event.wait(*slot->board);
  ec = slot->ec;
  error_text_slot() = ec ? std::move(slot->text) : std::string();
  return std::move(slot->value);
}

}  // namespace redlease::detail
