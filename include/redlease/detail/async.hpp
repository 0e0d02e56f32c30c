// SPDX-License-Identifier: MIT
/// @file
/// Glue between Asio completion tokens and the compiled library: a completion handler is wrapped
/// in a `unique_function` that the library calls on its own executor, and that hands the result to
/// the handler's associated executor (the coroutine's, the strand's, ...).
#pragma once

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

#include "redlease/detail/unique_function.hpp"
#include "redlease/error.hpp"

namespace redlease::detail {

/// Set while the library completes a handler because the client is closed: the client's own
/// executor may run nothing more, so a handler without an executor of its own goes to Asio's
/// system executor instead.
inline thread_local bool complete_inline_now = false;

/// Runs `f` with `complete_inline_now` set.
template <class F>
void complete_inline(F&& f) {
  complete_inline_now = true;
  try {
    std::forward<F>(f)();
  } catch (...) {
    complete_inline_now = false;
    throw;
  }
  complete_inline_now = false;
}

/// The current error text when the completion carries an error (its first argument), else empty.
template <class... Args>
std::string words_of(const Args&... args) {
  if constexpr (sizeof...(Args) > 0) {
    const auto& first = std::get<0>(std::forward_as_tuple(args...));
    if constexpr (std::is_same_v<std::decay_t<decltype(first)>, std::error_code>)
      if (first) return error_text_slot();
  }
  return {};
}

/// Type-erases `handler` for a completion signature `void(Args...)`. The returned function may be
/// called on any thread; the handler is always *posted* to its associated executor (`fallback`, the
/// client's, if it has none), never run inline: so it never runs inside its initiating function,
/// nor inside the library's own frames (an exception it throws cannot unwind through them).
/// With `clear_slot`, the handler's cancellation slot is cleared just before it runs (an operation
/// that installed a cancellation handler must remove it when it completes).
template <class... Args, class Handler, class Executor>
unique_function<void(Args...)> erase_handler(Handler&& handler, const Executor& fallback, bool clear_slot = false) {
  using handler_type = std::decay_t<Handler>;
  auto work = asio::make_work_guard(handler, fallback);
  return [h = std::forward<Handler>(handler), work = std::move(work), clear_slot](Args... args) mutable {
    // The error's words (redlease::last_error_text) travel with an error's completion to its thread.
    auto run = [text = words_of(args...), h = std::move(h), clear_slot,
                t = std::make_tuple(std::move(args)...)]() mutable {
      if (clear_slot) asio::get_associated_cancellation_slot(h).clear();
      if (text.empty()) {
        std::apply([&](auto&&... a) { std::move(h)(std::move(a)...); }, std::move(t));
      } else {
        scoped_error_text scope(std::move(text));
        std::apply([&](auto&&... a) { std::move(h)(std::move(a)...); }, std::move(t));
      }
    };
    if constexpr (std::is_same_v<asio::associated_executor_t<handler_type, asio::system_executor>,
                                 asio::system_executor>) {
      if (complete_inline_now) {
        // Asio's system_context thread calls std::terminate on an exception. The client promises
        // that user code may throw: the exception is reported, as on the I/O thread (whose
        // on_error may be gone by now: stderr).
        asio::post(asio::system_executor(), [run = std::move(run)]() mutable {
          try {
            run();
          } catch (const std::exception& e) {
            std::fprintf(stderr, "redlease: a completion handler threw after the client closed: %s\n", e.what());
          } catch (...) {
            std::fprintf(stderr, "redlease: a completion handler threw after the client closed\n");
          }
        });
        work.reset();
        return;
      }
    }
    asio::post(work.get_executor(), std::move(run));
    work.reset();
  };
}

}  // namespace redlease::detail
