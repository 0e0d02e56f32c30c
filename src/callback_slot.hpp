// SPDX-License-Identifier: MIT
// A user callback that the I/O thread calls and any thread may replace or clear, with the teardown
// promise: once `set` returns, the old callback is not running and never runs again.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include "background.hpp"

namespace redlease::detail {

template <class... Args>
class callback_slot {
 public:
  using function = std::function<void(Args...)>;

  /// Replaces the callback (empty: clears it). From another thread, waits for a call in progress to
  /// end. From inside the callback itself it neither waits nor destroys the running function: the
  /// replacement takes effect when the call returns, and the old one is never called again.
  void set(function f) {
    std::unique_lock<std::recursive_mutex> g(mu_);
    if (depth_ > 0) {  // we hold a recursive lock: the call in progress is on this thread
      next_ = std::make_unique<function>(std::move(f));
      return;
    }
    function old = std::move(fn_);
    fn_ = std::move(f);
    g.unlock();
    // The old callback's captures die here, outside the lock.
  }

  /// Calls the callback, if any; an exception it throws is reported through `cfg.on_error`.
  void call(const config& cfg, const char* source, Args... args) noexcept {
    std::unique_lock<std::recursive_mutex> g(mu_);
    if (!fn_ || next_) return;
    ++depth_;
    try {
      fn_(args...);
    } catch (...) {
      report_exception(cfg, source);
    }
    if (--depth_ == 0 && next_) {
      function old = std::move(fn_);
      fn_ = std::move(*next_);
      next_.reset();
      g.unlock();
    }
  }

 private:
  std::recursive_mutex mu_;
  function fn_;
  std::unique_ptr<function> next_;  // a replacement set from inside the call in progress
  int depth_ = 0;
};

}  // namespace redlease::detail
