// SPDX-License-Identifier: MIT
// Where the callbacks of `client::subscribe` run: off the I/O thread, so that a flood on one channel
// and a slow callback cannot starve the pub/sub connection (issue 39). The I/O thread only appends
// each message to its subscription's queue; a small pool of delivery threads calls the callbacks,
// one message of a subscription per turn, in turn with every other subscription that has messages.
// A subscription's messages are delivered in order, by one thread at a time. A queue holds at most
// `delivery_queue::cap` messages: past that the oldest are dropped and counted (a callback slower
// than its channel would otherwise grow the client's memory without bound).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace redlease::detail {

class delivery_pool;

/// One subscription's messages waiting for its callback. Thread-safe.
class delivery_queue : public std::enable_shared_from_this<delivery_queue> {
 public:
  /// The most messages a queue keeps.
  static constexpr std::size_t cap = 100'000;

  /// `deliver(payload)` runs on a delivery thread; `dropped(n)` there too, before the next message
  /// delivered after `n` were dropped.
  delivery_queue(std::function<void(std::string_view)> deliver, std::function<void(std::uint64_t)> dropped);

  /// Appends `payload` (the I/O thread) and hands the queue to `pool` if it was idle.
  void push(std::string_view payload, delivery_pool& pool);
  /// Drops what is queued; nothing is delivered from now on.
  void close() noexcept;

 private:
  friend class delivery_pool;
  // Delivers one message (a delivery thread). True if more are queued: the pool takes it again.
  bool deliver_one();

  std::function<void(std::string_view)> deliver_;
  std::function<void(std::uint64_t)> dropped_;
  std::mutex mu_;
  std::deque<std::string> q_;
  std::uint64_t lost_ = 0;
  bool scheduled_ = false;  // in the pool's ready list, or being delivered
  bool closed_ = false;
};

/// The delivery threads of one client, started with the first subscription. Thread-safe.
class delivery_pool : public std::enable_shared_from_this<delivery_pool> {
 public:
  /// Two threads: a callback that blocks holds one, and the other subscriptions go on on the other.
  static std::shared_ptr<delivery_pool> make(std::size_t threads = 2);
  delivery_pool(const delivery_pool&) = delete;
  delivery_pool& operator=(const delivery_pool&) = delete;
  ~delivery_pool();

  /// Queues `q` for a turn.
  void ready(std::shared_ptr<delivery_queue> q);
  /// Stops the threads once their callbacks in progress return; what is queued is not delivered.
  /// `join`: waits for them, except the calling thread when it is one of them (a callback that
  /// closed its client), which ends when its callback returns. Without `join` (a close on the I/O
  /// thread, which a callback's blocking call may be waiting for) none is waited for. Idempotent.
  void stop(bool join = true) noexcept;

 private:
  delivery_pool() = default;
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<delivery_queue>> ready_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

}  // namespace redlease::detail
