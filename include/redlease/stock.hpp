// SPDX-License-Identifier: MIT
/// @file
/// `redlease::segmented_stock`: inventory split over several keys, deducted atomically (flash sales).
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <system_error>

#include "redlease/detail/async.hpp"

namespace redlease {

namespace detail {
class client_impl;
struct stock_keys;
}

/// Stock split over `segments` string keys `<name>:0` .. `<name>:<segments-1>` (the seeds'
/// "分段锁": spreading one hot counter over several keys).
///
/// `try_take(n)` deducts `n` units from one segment in a single Lua call: it starts at a segment
/// chosen round-robin per client and moves on to the next when one has fewer than `n` left, so an
/// order is never split and the stock is never oversold, at any count up to `LLONG_MAX` (counts are
/// compared and deducted as exact 64-bit integers, never as Lua doubles). Thread-safe; a cheap handle
/// (the key list is built once and shared by copies).
///
/// In a Redis Cluster the segments of a name without a hash tag hash to different slots, so they sit
/// on several masters (which is what segments are for), and every call goes one segment at a time:
/// `try_take` tries the segments in the same order, one script call each, and stops at the first
/// that has `n`; `init` sets each segment with its own call; `remaining` reads each with its own
/// call. Each deduction is still atomic on its segment: never oversold, an order never split. What
/// is no longer one atomic step: a `try_take` that answers false saw each segment short of `n` at
/// the moment it asked that segment (units only leave a segment, so the answer is right unless an
/// `init` ran meanwhile); `init` is not seen by all segments at once; `remaining` is a sum, not a
/// snapshot. A name with a hash tag (`{sku:1}`) keeps every segment in one slot and one call, as on
/// a single server.
class segmented_stock {
 public:
  /// The most segments a stock may have. Every call sends all the keys (the script may have to walk
  /// them all), so a call's size and its worst-case walk grow with the count; 1024 is far past the
  /// point where more segments spread the load any further, and keeps a call to tens of kilobytes.
  static constexpr std::size_t max_segments = 1024;

  /// Made by `client::stock(name, segments)`, which checks `name` and `segments`.
  segmented_stock(std::shared_ptr<detail::client_impl> c, std::string name, std::size_t segments);

  /// The stock's name (the key prefix).
  const std::string& name() const noexcept { return name_; }
  /// The number of segments.
  std::size_t segments() const noexcept { return segments_; }
  /// The key of segment `i`.
  std::string segment_key(std::size_t i) const;

  /// Sets the stock to `total`, split evenly (the first `total % segments` get one more), atomically.
  /// Every total from 0 to `LLONG_MAX` (the most a Redis counter, and so DECRBY, can hold) is stored
  /// exactly: the split is computed here in 64-bit integers and each segment's count sent as text.
  /// @throws redlease::error; `errc::invalid_argument` for a negative total.
  void init(long long total);
  /// As above; on failure sets `ec` (`errc::invalid_argument` for a negative total).
  void init(long long total, std::error_code& ec);
  /// Takes `n` units from one segment that has them. False when no segment has `n` left. Exact for
  /// every `n` up to `LLONG_MAX`.
  /// @throws redlease::error; `errc::invalid_argument` for n <= 0; `errc::bad_reply` when the walk
  /// over the segments meets one that holds something that is not a count (the message, and
  /// `last_error_text()`, name the key and its value): the call fails rather than skip it, so the
  /// same corrupt segment fails the same calls every time. The connection's and server's errors.
  bool try_take(long long n = 1);
  /// As above; on failure sets `ec` (`errc::invalid_argument` for n <= 0, `errc::bad_reply` for a
  /// segment that is not a count, its key in `last_error_text()`) and returns false.
  bool try_take(long long n, std::error_code& ec);
  /// The units left, summed over the segments (one MGET; a missing segment counts 0). MGET reads a
  /// key of another type as missing: when a segment comes back nil, one EXISTS over those tells
  /// (and, only if one exists, a TYPE per nil segment names it). Blocks the calling thread.
  /// @throws redlease::error: `errc::bad_reply` when a segment holds something that is not a count
  /// or is of another type (the message names the key and its value or type), or when the counts'
  /// sum is outside a `long long` (the message says so); or the connection's and server's errors.
  long long remaining();
  /// As above; on failure sets `ec` (the key and its value or type in `last_error_text()`) and
  /// returns 0.
  long long remaining(std::error_code& ec);

  /// Async `try_take`. Completion signature `void(std::error_code, bool taken)`; errors as for
  /// `try_take` (a bad segment's key is in `last_error_text()` during the handler).
  template <class CompletionToken>
  auto async_try_take(long long n, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this, n](auto handler) {
          async_try_take_impl(n, detail::erase_handler<std::error_code, bool>(std::move(handler), executor()));
        },
        token);
  }

 private:
  asio::any_io_executor executor() const;
  void async_try_take_impl(long long n, detail::unique_function<void(std::error_code, bool)> h);
  std::shared_ptr<detail::client_impl> client_;
  std::string name_;
  std::size_t segments_;
  std::shared_ptr<const detail::stock_keys> keys_;  // the segment keys, encoded once
};

}  // namespace redlease
