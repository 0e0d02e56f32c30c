// SPDX-License-Identifier: MIT
/// @file
/// `redlease::count_down_latch`: a distributed count-down latch, compatible with Redisson's
/// `RCountDownLatch` (docs/latch.md).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "redlease/detail/async.hpp"

namespace redlease {

namespace detail {
class client_impl;
}

/// A count-down latch on the string key `name`, which holds the count (Redisson's layout: a missing
/// key is a count of 0); its changes are announced on `redisson_countdownlatch__channel__{name}`, so
/// a Java service using Redisson's `RCountDownLatch` on the same name shares it.
///
/// `try_set_count` starts a round (only when no count is set); `count_down` takes one off, and the
/// one that reaches 0 deletes the key and wakes every waiter; `await`/`await_for` wait for the count
/// to read 0 (pub/sub, through the client's wait engine; each waiter also checks again at least every
/// `config::mutex_poll_cap`, so a lost message or a latch that expires by its TTL holds no waiter
/// longer than that). A deleted latch reads 0 (Redisson's `getCount`): its waiters pass on the check
/// its message brings (Redisson's own `await` would wait on for a "0"). The `async_` forms take Asio
/// completion tokens.
///
/// A cheap handle (the client and the name): copyable, and thread-safe as the lock handles are (any
/// number of threads may call any of its calls at once, on one handle or on copies). Every call but
/// the `async_` ones blocks the calling thread until the server answers; each has a throwing form and
/// one that sets a `std::error_code` (and then returns false or 0). Errors: the client's (`errc::client_closed`, the
/// connection's and the server's, `errc::request_timeout`), `errc::invalid_argument` for a bad
/// argument (nothing sent), and the server's error (WRONGTYPE, or a value that is not an integer)
/// when the key holds something that is not a count.
class count_down_latch {
 public:
  /// Made by `client::count_down_latch(name)`, which checks `name`.
  count_down_latch(std::shared_ptr<detail::client_impl> c, std::string name);

  /// The latch's name (its key).
  const std::string& name() const noexcept { return name_; }

  /// Sets the count to `count` if the latch has none (Redisson's `trySetCount`), and announces it.
  /// True when it was set; false when a count is already set (the latch exists). Exactly once: a call
  /// sent again after its reply was lost gets the first sending's answer.
  /// @throws redlease::error; `errc::invalid_argument` for a count below 1.
  bool try_set_count(long long count);
  /// As above; on failure sets `ec` and returns false.
  bool try_set_count(long long count, std::error_code& ec);
  /// As above, and the latch's key expires after `ttl` (beyond Redisson, its issue #3811): a round
  /// abandoned by its counters does not stay for ever. An expired latch reads 0 (its waiters pass
  /// within a poll cap; nothing is published). @throws redlease::error; `errc::invalid_argument` for a
  /// count below 1 or a `ttl` that is not positive (or beyond `max_duration`).
  bool try_set_count(long long count, std::chrono::milliseconds ttl);
  /// As above; on failure sets `ec` and returns false.
  bool try_set_count(long long count, std::chrono::milliseconds ttl, std::error_code& ec);

  /// Takes one off the count (Redisson's `countDown`). The call that reaches 0 deletes the key and
  /// wakes every waiter; a count already at 0 (a missing latch) stays 0. Exactly once across a lost
  /// reply: it is sent again (up to three sendings) under one request id, and the server counts it
  /// once. @throws redlease::error: the connection's errors once the sendings are spent (the count
  /// may or may not have gone down then), the server's (WRONGTYPE, a value that is not an integer).
  void count_down();
  /// As above; on failure sets `ec`.
  void count_down(std::error_code& ec);

  /// The count (GET; a missing latch is 0, as Redisson's `getCount`).
  /// @throws redlease::error: `errc::bad_reply` when the key holds something that is not an integer;
  /// the connection's and the server's errors (WRONGTYPE).
  long long count();
  /// As above; on failure sets `ec` and returns 0.
  long long count(std::error_code& ec);

  /// Waits, without limit, until the count reads 0 (Redisson's `await`): at once when it already
  /// does or the latch does not exist. @throws redlease::error: the client's and the server's errors
  /// (a wait goes on through reconnections; WRONGTYPE ends it).
  void await();
  /// As above; on failure sets `ec`.
  void await(std::error_code& ec);
  /// Waits up to `timeout` (0: one check) for the count to read 0. True when it did; false when the
  /// time ran out first. @throws redlease::error as `await`; `errc::invalid_argument` for a negative
  /// `timeout` (or one beyond `max_duration`).
  bool await_for(std::chrono::milliseconds timeout);
  /// As above; on failure sets `ec` and returns false.
  bool await_for(std::chrono::milliseconds timeout, std::error_code& ec);

  /// `count_down()`, then `await_for(timeout)` (Redisson's #6060): a party of a rendezvous says it
  /// arrived and waits for the others. True when the count read 0 within `timeout`.
  /// @throws redlease::error as both.
  bool count_down_and_await(std::chrono::milliseconds timeout);
  /// As above; on failure sets `ec` and returns false.
  bool count_down_and_await(std::chrono::milliseconds timeout, std::error_code& ec);

  /// Deletes the latch (Redisson's `delete`): true when it existed. Its waiters are woken and pass
  /// (a deleted latch reads 0). @throws redlease::error: the connection's and the server's errors.
  bool delete_latch();
  /// As above; on failure sets `ec` and returns false.
  bool delete_latch(std::error_code& ec);

  /// Async `try_set_count` (`ttl` empty: none). Completion signature `void(std::error_code, bool set)`;
  /// errors as `try_set_count`. The handler runs on its associated executor (the client's if it has
  /// none), never inside this call; so do the other async forms'.
  template <class CompletionToken>
  auto async_try_set_count(long long count, std::optional<std::chrono::milliseconds> ttl, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this, count, ttl](auto handler) {
          async_set_count_impl(count, ttl, detail::erase_handler<std::error_code, bool>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `count`. Completion signature `void(std::error_code, long long count)`; errors as `count`.
  template <class CompletionToken>
  auto async_count(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, long long)>(
        [this](auto handler) {
          async_count_impl(detail::erase_handler<std::error_code, long long>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `delete_latch`. Completion signature `void(std::error_code, bool deleted)`; errors as
  /// `delete_latch`.
  template <class CompletionToken>
  auto async_delete_latch(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this](auto handler) {
          async_delete_impl(detail::erase_handler<std::error_code, bool>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `count_down`. Completion signature `void(std::error_code)`; errors as `count_down`.
  template <class CompletionToken>
  auto async_count_down(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code)>(
        [this](auto handler) {
          async_count_down_impl(detail::erase_handler<std::error_code>(std::move(handler), executor()));
        },
        token);
  }
  /// Async `await_for`: waits up to `timeout` for the count to read 0. Completion signature
  /// `void(std::error_code, bool reached_zero)`; errors as `await_for`. It takes no cancellation
  /// slot: its `timeout` bounds it (or the client's close, `errc::client_closed`).
  template <class CompletionToken>
  auto async_await_for(std::chrono::milliseconds timeout, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this, timeout](auto handler) {
          async_await_impl(timeout, detail::erase_handler<std::error_code, bool>(std::move(handler), executor()));
        },
        token);
  }

 private:
  asio::any_io_executor executor() const;
  void async_set_count_impl(long long count, std::optional<std::chrono::milliseconds> ttl,
                            detail::unique_function<void(std::error_code, bool)> h);
  void async_count_impl(detail::unique_function<void(std::error_code, long long)> h);
  void async_delete_impl(detail::unique_function<void(std::error_code, bool)> h);
  void async_count_down_impl(detail::unique_function<void(std::error_code)> h);
  void async_await_impl(std::chrono::milliseconds timeout, detail::unique_function<void(std::error_code, bool)> h);
  bool set_count(long long count, std::optional<std::chrono::milliseconds> ttl, std::error_code& ec);
  std::shared_ptr<detail::client_impl> client_;
  std::string name_;
};

}  // namespace redlease
