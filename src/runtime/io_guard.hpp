// SPDX-License-Identifier: MIT
// The I/O guard of a client that runs its own I/O thread: a mutex that every handler of the client's
// executor runs under, so that a blocking caller who finds it free may run the client's code on its
// own thread — write its own request — instead of handing the request to the I/O thread and waking
// it. The client's state still has one owner at a time: whoever holds the guard.
#pragma once

#include <asio/execution.hpp>
#include <asio/prefer.hpp>
#include <asio/query.hpp>
#include <asio/require.hpp>

#include <mutex>
#include <type_traits>
#include <utility>

namespace redlease::detail {

class lane_session;

class io_guard {
 public:
  /// The guard this thread holds, if any.
  static io_guard* held() noexcept { return held_; }
  /// Whether this thread holds the guard outside the I/O thread (a caller writing its own request):
  /// a connection then writes at once, on this thread, instead of posting its write.
  static bool direct() noexcept { return direct_; }

  /// Holds `g` for a scope (nothing if this thread holds it already: handlers nest).
  class scope {
   public:
    explicit scope(io_guard& g) noexcept : g_(&g), prev_(held_) {
      if (prev_ != &g) {
        g.mu_.lock();
        held_ = &g;
      }
    }
    /// Takes `g` only if it is free; check owns().
    scope(io_guard& g, std::try_to_lock_t) noexcept : g_(&g), prev_(held_) {
      if (prev_ == &g) return;
      if (g.mu_.try_lock()) held_ = &g;
      else g_ = nullptr;
    }
    ~scope() {
      if (g_ && prev_ != g_) {
        held_ = prev_;
        g_->mu_.unlock();
      }
    }
    bool owns() const noexcept { return g_ != nullptr; }
    /// A try_to_lock scope that does not own `g` tries once more; true when it owns it.
    bool try_again(io_guard& g) noexcept {
      if (g_) return true;
      if (!g.mu_.try_lock()) return false;
      g_ = &g;
      held_ = &g;
      return true;
    }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    io_guard* g_;
    io_guard* prev_;
  };

  /// The lanes of the blocking call that holds this guard and runs the client's code on its own
  /// thread, handed over by sync_call for the call's own code and the handlers of its replies (a
  /// node may send their requests on the call's lane); null otherwise (the I/O thread holds it, or
  /// the caller was not alone). Only the holder reads or sets it.
  lane_session* call_lanes() const noexcept { return lanes_; }
  /// Hands `s` over as the guard's call_lanes() for a scope; the caller holds the guard.
  class lanes_scope {
   public:
    lanes_scope(io_guard& g, lane_session* s) noexcept : g_(g), prev_(g.lanes_) { g.lanes_ = s; }
    ~lanes_scope() { g_.lanes_ = prev_; }
    lanes_scope(const lanes_scope&) = delete;
    lanes_scope& operator=(const lanes_scope&) = delete;

   private:
    io_guard& g_;
    lane_session* prev_;
  };

  /// Marks this thread as a direct caller for a scope (see direct()).
  class direct_scope {
   public:
    direct_scope() noexcept : prev_(direct_) { direct_ = true; }
    ~direct_scope() { direct_ = prev_; }
    direct_scope(const direct_scope&) = delete;
    direct_scope& operator=(const direct_scope&) = delete;

   private:
    bool prev_;
  };

 private:
  std::mutex mu_;
  lane_session* lanes_ = nullptr;  // the holder's
  static inline thread_local io_guard* held_ = nullptr;
  static inline thread_local bool direct_ = false;
};

// An executor that runs every function of `Inner` under an io_guard. Properties are those of
// `Inner` (require and prefer wrap the executor they return).
template <class Inner>
class guarded_executor {
 public:
  guarded_executor(Inner inner, io_guard* g) noexcept : inner_(std::move(inner)), g_(g) {}

  template <class Property>
  auto query(const Property& p) const noexcept(noexcept(asio::query(std::declval<const Inner&>(), p)))
      -> decltype(asio::query(std::declval<const Inner&>(), p)) {
    return asio::query(inner_, p);
  }
  template <class Property>
  auto require(const Property& p) const
      -> guarded_executor<std::decay_t<decltype(asio::require(std::declval<const Inner&>(), p))>> {
    return {asio::require(inner_, p), g_};
  }
  template <class Property>
  auto prefer(const Property& p) const
      -> guarded_executor<std::decay_t<decltype(asio::prefer(std::declval<const Inner&>(), p))>> {
    return {asio::prefer(inner_, p), g_};
  }
  template <class F>
  void execute(F&& f) const {
    asio::execution::execute(inner_, [g = g_, f = std::forward<F>(f)]() mutable {
      io_guard::scope s(*g);
      std::move(f)();
    });
  }
  friend bool operator==(const guarded_executor& a, const guarded_executor& b) noexcept {
    return a.g_ == b.g_ && a.inner_ == b.inner_;
  }
  friend bool operator!=(const guarded_executor& a, const guarded_executor& b) noexcept { return !(a == b); }

 private:
  Inner inner_;
  io_guard* g_;
};

}  // namespace redlease::detail
