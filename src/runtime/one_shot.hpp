// SPDX-License-Identifier: MIT
// A one-shot event for a blocking call's rendezvous with the I/O thread: the waiter sleeps on a
// futex and the setter wakes exactly that waiter, once, and only if it is asleep. No sched_yield
// phase (libstdc++ 12's std::atomic::wait yields four times before it sleeps, and on a 2-vCPU
// machine every yield that switches is an involuntary context switch).
#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace redlease::detail {

/// Spins, with the CPU's pause hint, until `done()` is true or `until` has passed (the clock is read
/// every 64 turns); returns `done()`. For a short wait that is worth a core: a sleep and a wake-up
/// cost more.
template <class Done>
bool spin_until(Done&& done, std::chrono::steady_clock::time_point until) noexcept {
  for (int i = 1;; ++i) {
    if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 0 && std::chrono::steady_clock::now() >= until) return done();
  }
}

// One futex word that every blocked caller of a client sleeps on, each with its own bit
// (FUTEX_WAIT_BITSET), so that the I/O thread can wake all the callers whose replies came in one
// read with one system call instead of one each. Each FUTEX_WAKE of a caller that slept can preempt
// the waking thread (on 2 vCPUs, every wake of a blocked caller cost the I/O thread an involuntary
// context switch); one wake per batch costs it at most one. Threads get bits round robin: up to 32
// sleepers are woken exactly; beyond that two may share a bit and one wakes for nothing, re-checks
// and sleeps again.
class wake_board {
 public:
  /// This thread's bit.
  static std::uint32_t my_bit() noexcept {
    static std::atomic<std::uint32_t> next{0};
    thread_local const std::uint32_t bit = 1u << (next.fetch_add(1, std::memory_order_relaxed) % 32);
    return bit;
  }
  /// Marks the calling thread as the board's owner (the I/O thread): wakes it asks for are batched.
  void adopt_this_thread() noexcept { owner_ = this; }
  bool on_owner_thread() const noexcept { return owner_ == this; }
  /// Owner thread only: adds `bit` to the next batch. True when the batch was empty (the caller must
  /// arrange for flush() to run).
  bool defer(std::uint32_t bit) noexcept {
    bool first = mask_ == 0;
    mask_ |= bit;
    return first;
  }
  /// Owner thread only: wakes the batch.
  void flush() noexcept {
    std::uint32_t m = mask_;
    mask_ = 0;
    if (m != 0) wake(m);
  }
  /// Wakes every sleeper whose bit is in `mask`.
  void wake(std::uint32_t mask) noexcept {
    gen_.fetch_add(1, std::memory_order_seq_cst);
#if defined(__linux__)
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&gen_), FUTEX_WAKE_BITSET_PRIVATE, INT_MAX, nullptr, nullptr,
              mask);
#else
    (void)mask;
    gen_.notify_all();
#endif
  }
  std::uint32_t generation() const noexcept { return gen_.load(std::memory_order_seq_cst); }
  /// Sleeps until a wake() for `bit` after generation `gen` was read (returns at once if one was).
  void sleep(std::uint32_t gen, std::uint32_t bit) noexcept {
#if defined(__linux__)
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&gen_), FUTEX_WAIT_BITSET_PRIVATE, gen, nullptr, nullptr,
              bit);
#else
    (void)bit;
    gen_.wait(gen, std::memory_order_seq_cst);
#endif
  }

 private:
  static inline thread_local const wake_board* owner_ = nullptr;
  std::atomic<std::uint32_t> gen_{0};
  std::uint32_t mask_ = 0;  // owner thread only
};

class one_shot {
 public:
  /// True once set.
  bool ready() const noexcept { return state_.load(std::memory_order_acquire) == done; }

  /// Sets the event; wakes the waiter if it sleeps. Called once.
  void set() noexcept {
    if (state_.exchange(done, std::memory_order_acq_rel) == parked) wake();
  }

  /// Board mode: sets the event; true when the waiter sleeps on the board and must be woken with
  /// `bit()` (now, or batched by the board's owner).
  bool set_quietly() noexcept { return state_.exchange(done, std::memory_order_seq_cst) == parked; }
  /// The sleeping waiter's bit (board mode; valid once set_quietly returned true).
  std::uint32_t bit() const noexcept { return bit_; }

  /// Board mode: sleeps on `board` until set (returns at once if it is).
  void wait(wake_board& board) noexcept {
    bit_ = wake_board::my_bit();
    std::uint32_t expected = pending;
    if (!state_.compare_exchange_strong(expected, parked, std::memory_order_seq_cst)) return;  // set already
    for (;;) {
      std::uint32_t gen = board.generation();
      if (state_.load(std::memory_order_seq_cst) == done) return;
      board.sleep(gen, bit_);
    }
  }

  /// Sleeps until set (returns at once if it is).
  void wait() noexcept {
    std::uint32_t expected = pending;
    if (!state_.compare_exchange_strong(expected, parked, std::memory_order_acq_rel)) return;  // set already
    while (state_.load(std::memory_order_acquire) == parked) sleep();
  }

 private:
  static constexpr std::uint32_t pending = 0, done = 1, parked = 2;
#if defined(__linux__)
  void wake() noexcept {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
  void sleep() noexcept {
    // Returns on a wake, on a signal, or at once if the word is no longer `parked`.
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, parked, nullptr, nullptr, 0);
  }
#else
  void wake() noexcept { state_.notify_one(); }
  void sleep() noexcept { state_.wait(parked, std::memory_order_acquire); }
#endif
  std::atomic<std::uint32_t> state_{pending};
  std::uint32_t bit_ = 0;
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
};

}  // namespace redlease::detail
