// SPDX-License-Identifier: MIT
/// @file
/// A minimal move-only `std::function` (C++23's `std::move_only_function` is not in C++20), used to
/// type-erase completion handlers between the public templates and the compiled library.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace redlease::detail {

template <class Sig>
class unique_function;

/// Move-only type-erased callable. Not thread-safe; invoking an empty one is undefined.
template <class R, class... Args>
class unique_function<R(Args...)> {
  struct base {
    virtual ~base() = default;
    virtual R call(Args... args) = 0;
  };
  template <class F>
  struct impl final : base {
    F f;
    explicit impl(F&& fn) : f(std::move(fn)) {}
    R call(Args... args) override { return f(std::forward<Args>(args)...); }
  };
  std::unique_ptr<base> p_;

 public:
  unique_function() noexcept = default;
  unique_function(std::nullptr_t) noexcept {}
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, unique_function> &&
                                              std::is_invocable_r_v<R, std::decay_t<F>&, Args...>>>
  unique_function(F&& f) : p_(std::make_unique<impl<std::decay_t<F>>>(std::decay_t<F>(std::forward<F>(f)))) {}
  unique_function(unique_function&&) noexcept = default;
  unique_function& operator=(unique_function&&) noexcept = default;

  /// Calls the target.
  R operator()(Args... args) { return p_->call(std::forward<Args>(args)...); }
  /// True when a target is held.
  explicit operator bool() const noexcept { return static_cast<bool>(p_); }
};

}  // namespace redlease::detail
