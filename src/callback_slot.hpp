// SPDX-License-Identifier: MIT
// A user callback that the I/O thread calls and any thread may replace or clear, with the teardown
// promise: once `set` returns, the old callback is not running and never runs again.
//
// Compact (48 bytes): a client may hold 100,000 locks, each with its handle's slot. The lock is a
// 4-byte futex word, and the slot remembers which thread is inside the callback so that a `set`
// from inside it neither waits for itself nor destroys the running function.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#include <thread>
#endif

#include "background.hpp"

namespace redlease::detail {

// A mutex in one word (Drepper, "Futexes are tricky", mutex 3): 0 free, 1 locked, 2 locked and
// someone may sleep on it.
class word_mutex {
 public:
  void lock() noexcept {
    std::uint32_t c = 0;
    if (v_.compare_exchange_strong(c, 1, std::memory_order_acquire)) return;
    if (c != 2) c = v_.exchange(2, std::memory_order_acquire);
    while (c != 0) {
      sleep();
      c = v_.exchange(2, std::memory_order_acquire);
    }
  }
  void unlock() noexcept {
    if (v_.fetch_sub(1, std::memory_order_release) != 1) {
      v_.store(0, std::memory_order_release);
      wake();
    }
  }

 private:
#if defined(__linux__)
  void sleep() noexcept {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&v_), FUTEX_WAIT_PRIVATE, 2u, nullptr, nullptr, 0);
  }
  void wake() noexcept {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&v_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  }
#else
  void sleep() noexcept { v_.wait(2, std::memory_order_acquire); }
  void wake() noexcept { v_.notify_one(); }
#endif
  std::atomic<std::uint32_t> v_{0};
};

// A small nonzero number per thread, for "is this thread inside the callback".
inline std::uint32_t this_thread_tag() noexcept {
  static std::atomic<std::uint32_t> next{1};
  thread_local const std::uint32_t tag = next.fetch_add(1, std::memory_order_relaxed);
  return tag;
}

template <class... Args>
class callback_slot {
 public:
  using function = std::function<void(Args...)>;

  /// Replaces the callback (empty: clears it). From another thread, waits for a call in progress to
  /// end. From inside the callback itself it neither waits nor destroys the running function: the
  /// running one is never called again, the new one is from the next call on.
  void set(function f) {
    if (inside_.load(std::memory_order_relaxed) == this_thread_tag()) {
      // We hold the lock (call() below, on this thread); the running function is not in fn_.
      fn_ = std::move(f);
      replaced_ = true;
      return;
    }
    mu_.lock();
    function old = std::move(fn_);
    fn_ = std::move(f);
    mu_.unlock();
    // The old callback's captures die here, outside the lock.
  }

  /// Calls the callback, if any; an exception it throws is reported through `cfg.on_error`. A call
  /// from inside the callback itself does nothing.
  void call(const config& cfg, const char* source, Args... args) noexcept {
    if (inside_.load(std::memory_order_relaxed) == this_thread_tag()) return;
    mu_.lock();
    if (!fn_) {
      mu_.unlock();
      return;
    }
    function running = std::move(fn_);
    replaced_ = false;
    inside_.store(this_thread_tag(), std::memory_order_relaxed);
    try {
      running(args...);
    } catch (...) {
      report_exception(cfg, source);
    }
    inside_.store(0, std::memory_order_relaxed);
    if (!replaced_) fn_ = std::move(running);
    mu_.unlock();
    // A replaced callback dies here, outside the lock.
  }

 private:
  word_mutex mu_;
  std::atomic<std::uint32_t> inside_{0};  // the tag of the thread inside the callback, or 0
  bool replaced_ = false;                 // set() ran inside the call in progress
  function fn_;
};

}  // namespace redlease::detail
