// SPDX-License-Identifier: MIT
// A one-shot event for a blocking call's rendezvous with the I/O thread: the waiter sleeps on a
// futex and the setter wakes exactly that waiter, once, and only if it is asleep. No sched_yield
// phase (libstdc++ 12's std::atomic::wait yields four times before it sleeps, and on a 2-vCPU
// machine every yield that switches is an involuntary context switch).
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace redlease::detail {

class one_shot {
 public:
  /// True once set.
  bool ready() const noexcept { return state_.load(std::memory_order_acquire) == done; }

  /// Sets the event; wakes the waiter if it sleeps. Called once.
  void set() noexcept {
    if (state_.exchange(done, std::memory_order_acq_rel) == parked) wake();
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
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
};

}  // namespace redlease::detail
