// SPDX-License-Identifier: MIT
/// @file
/// `redlease::client`: the connection to one Redis server, shared by every lock made from it.
#pragma once

#include <asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "redlease/config.hpp"
#include "redlease/detail/async.hpp"
#include "redlease/error.hpp"
#include "redlease/lock.hpp"
#include "redlease/metrics.hpp"
#include "redlease/reply.hpp"
#include "redlease/latch.hpp"
#include "redlease/permit_semaphore.hpp"
#include "redlease/semaphore.hpp"
#include "redlease/stock.hpp"

namespace redlease {

namespace detail {
class client_impl;
}

/// Counters of a client's traffic, for tests, benchmarks and monitoring. Monotonic.
struct client_stats {
  std::uint64_t commands = 0;           ///< commands written on the command connection and the lane
  std::uint64_t writes = 0;             ///< write system calls on the command connection and the lane
  std::uint64_t direct_writes = 0;      ///< of those, writes a blocking caller made on its own
                                        ///< thread (`sync_wait`): on the lane, or on the command
                                        ///< connection while the I/O thread was idle (a lone caller,
                                        ///< or one whose fellows had no request out)
  std::uint64_t lane_requests = 0;      ///< of the commands, those a lone blocking caller sent and
                                        ///< read itself on the lane (`config::sync_lane`)
  std::uint64_t replies = 0;            ///< replies read on the command connection and the lane
  std::uint64_t connects = 0;           ///< successful (re)connections of the command connection
  std::uint64_t connection_losses = 0;  ///< drops of the command connection
  std::uint64_t protocol_errors = 0;    ///< replies that broke RESP or its bounds (both connections);
                                        ///< each dropped and re-established its connection
  std::uint64_t stalled_drops = 0;      ///< command connection dropped: a request timed out with
                                        ///< no whole reply received for twice `request_timeout`
                                        ///< (liveness)
  std::uint64_t pubsub_commands = 0;    ///< commands written on the pub/sub connection
  std::uint64_t pubsub_connects = 0;    ///< successful (re)connections of the pub/sub connection
  std::uint64_t renew_calls = 0;        ///< watchdog script calls (each renews a batch)
  std::uint64_t watchdog_ticks = 0;     ///< watchdog firings that sent renewals (each sends its
                                        ///< calls together: one write per connection in practice)
  std::uint64_t renewed_locks = 0;      ///< lock renewals done by the watchdog
  std::uint64_t held_locks = 0;         ///< holds currently tracked by this client
  std::uint64_t watched_locks = 0;      ///< holds currently renewed by the watchdog
  /// What the client counts about its locks: acquisitions by kind and outcome, wait, hold and
  /// hand-off times, losses by cause, failed renewals, failovers, wake-ups, NOSCRIPT fallbacks,
  /// redirects (redlease/metrics.hpp; docs/metrics.md).
  lock_metrics locks;
};

/// A live subscription made with `client::subscribe`; unsubscribes when destroyed or reset.
/// Move-only; not thread-safe (one owner), destruction never throws.
class subscription {
 public:
  /// An empty subscription (subscribed to nothing; `reset()` does nothing).
  subscription() = default;
  /// Takes over `other`'s subscription; `other` is left empty.
  subscription(subscription&&) noexcept = default;
  /// Unsubscribes from this one's channel (as `reset()`), then takes over `o`'s; `o` is left empty.
  subscription& operator=(subscription&& o) noexcept {
    if (this != &o) {
      reset();
      state_ = std::move(o.state_);
    }
    return *this;
  }
  ~subscription() { reset(); }
  /// Unsubscribes (the client sends UNSUBSCRIBE once no one else listens on the channel).
  ///
  /// Teardown promise: once `reset()` (or the destructor) returns, the callback is not running and
  /// never runs again, so the objects it touches may be destroyed next. Called from another thread
  /// while the callback runs, it waits for the callback to return (so the callback must not wait
  /// for that thread). Called from inside the callback itself it neither waits nor deadlocks: the
  /// callback finishes its current message and is never called again. Called on the client's I/O
  /// thread (a completion handler, `on_lost`) it does not wait either, since the callback may be
  /// waiting for that thread: no call starts after it returns, but one in progress may still run.
  void reset() noexcept;
  /// True while subscribed.
  explicit operator bool() const noexcept { return static_cast<bool>(state_); }

 private:
  friend class client;
  struct state;
  explicit subscription(std::shared_ptr<state> s) : state_(std::move(s)) {}
  std::shared_ptr<state> state_;
};

/// The connection to one Redis server, and the factory of locks on it.
///
/// A client owns two connections per node (commands, and pub/sub for the lock waiters), plus a
/// third once a thread makes blocking calls alone (the lane, `config::sync_lane`), the watchdog that
/// renews its locks, and one I/O thread that runs them all (or a strand on an executor you give
/// it). Commands issued concurrently from any number of threads are pipelined: everything queued
/// goes out in one write. The client connects in the background from construction and reconnects
/// with exponential backoff and jitter whenever the connection drops.
///
/// Thread-safety: every member function may be called from any thread. The blocking calls must not
/// be made on the client's own I/O thread (from a completion handler or an `on_lost` callback): they
/// fail with `errc::would_deadlock` there. On an executor you supply, a blocking call from a thread
/// that runs its `io_context` or `thread_pool` outside the client's strand (a coroutine resumed
/// there) needs another thread of that context to run the strand: with none, it fails with
/// `errc::would_deadlock` after `config::request_timeout`.
///
/// Callbacks and exceptions: completion handlers are always posted to their associated executor
/// (the client's I/O thread when they have none), never run inside the function that started the
/// operation. User code on the I/O thread (completion handlers, `on_lost`, subscribe callbacks) may
/// throw: the client catches the exception at that boundary, reports it through `config::on_error`
/// (default: a line on stderr) and keeps its thread, connections and watchdog running. On an
/// executor you supply, an exception from a completion handler propagates out of your `run()`, as
/// Asio specifies; the client's state is not affected.
class client {
 public:
  /// Starts the client with its own I/O thread. Does not block; connection errors show on the first
  /// call (`ping()` waits for the connection).
  /// @throws redlease::error `errc::invalid_argument` when a timing or limit of `cfg` is out of
  /// range (`config::invalid_setting()` says which).
  explicit client(config cfg);
  /// Starts the client on `ex` (wrapped in a strand); the caller runs the executor. Closing such a
  /// client (or destroying it) completes on that executor: its connections close, and its state is
  /// freed, when the executor next runs, or when its context is destroyed.
  /// @throws redlease::error `errc::invalid_argument` as above.
  client(asio::any_io_executor ex, config cfg);
  /// Closes the client as `close()` does: waits end with `errc::client_closed`, requests already
  /// sent or queued are answered first for up to `config::close_timeout`, held locks are no longer
  /// renewed (they expire after their lease). Joins the I/O thread. Never throws.
  ~client();
  /// Takes over `other`'s connections, thread, locks and watchdog; `other` may then only be
  /// destroyed or assigned to. Never throws. Not thread-safe with calls on `other`.
  client(client&&) noexcept;
  /// Closes this client (as the destructor does), then takes over `other`'s state as the move
  /// constructor does. Never throws. Not thread-safe with calls on either.
  client& operator=(client&&) noexcept;
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// A reentrant, Redisson-compatible lock on `name` (a cheap handle; no I/O).
  /// @throws redlease::error `errc::invalid_argument` if `name` is empty.
  reentrant_lock lock(std::string name);
  /// A non-reentrant `SET NX PX` mutex on `name` (a cheap handle; no I/O).
  /// @throws redlease::error `errc::invalid_argument` if `name` is empty.
  redlease::mutex mutex(std::string name);
  /// A fair (FIFO) lock on `name`, Redisson's `RedissonFairLock` layout (a cheap handle; no I/O).
  /// @throws redlease::error `errc::invalid_argument` if `name` is empty.
  redlease::fair_lock fair_lock(std::string name);
  /// The read side of the read-write lock `name`, Redisson's `RedissonReadWriteLock` layout (a
  /// cheap handle; no I/O). @throws redlease::error `errc::invalid_argument` if `name` is empty.
  redlease::read_lock read_lock(std::string name);
  /// The write side of the read-write lock `name` (see `read_lock`).
  /// @throws redlease::error `errc::invalid_argument` if `name` is empty.
  redlease::write_lock write_lock(std::string name);
  /// Stock split over `segments` keys `<name>:0` .. (flash sales; see `segmented_stock`).
  /// @throws redlease::error `errc::invalid_argument` if `name` is empty or `segments` is 0 or more
  /// than `segmented_stock::max_segments` (1024).
  segmented_stock stock(std::string name, std::size_t segments);
  /// A counting semaphore on `name`, Redisson's `RSemaphore` layout (a cheap handle; no I/O).
  /// @throws redlease::error `errc::invalid_argument` if `name` is empty.
  redlease::semaphore semaphore(std::string name);
  /// A count-down latch on `name`, Redisson's `RCountDownLatch` layout (a cheap handle; no I/O).
  /// @throws redlease::error `errc::invalid_argument` if `name` is empty.
  redlease::count_down_latch count_down_latch(std::string name);
  /// A semaphore on `name` whose permits have ids and leases, Redisson's `RPermitExpirableSemaphore`
  /// layout, permits without a lease kept by the watchdog (a cheap handle; no I/O).
  /// @throws redlease::error `errc::invalid_argument` for an empty name.
  redlease::permit_semaphore permit_semaphore(std::string name);

  /// A fresh owner id for the async lock calls (unique in this process, never a thread's id).
  owner_id new_owner() noexcept;
  /// The random UUID that prefixes this client's Redisson owner fields (`<uuid>:<owner>`).
  const std::string& id() const noexcept;
  /// The configuration the client was made with.
  const config& get_config() const noexcept;
  /// The executor that runs the client's I/O. With the client's own I/O thread, it wraps that
  /// thread's `io_context` executor: what it runs is serialised with a blocking call that sends its
  /// own request (docs/design.md, "Threads and ownership of state"), so work posted to it should be
  /// short, as on any I/O thread. Thread-safe.
  asio::any_io_executor get_executor() const noexcept;

  /// Writes `value` to the resource `key` only if `token` is not lower than the highest fencing
  /// token the resource has seen (a hash with fields `token` and `value`, checked and written by one
  /// script): the resource side of fencing. True if written; false if refused, because a holder
  /// with a newer token wrote first (this writer's lock was lost, e.g. while it was paused).
  /// docs/fencing.md shows the script, to copy into whatever else a holder writes.
  /// @throws redlease::error
  bool fenced_set(std::string_view key, std::uint64_t token, std::string_view value);
  /// As above; on failure sets `ec` and returns false.
  bool fenced_set(std::string_view key, std::uint64_t token, std::string_view value, std::error_code& ec);

  /// Sends one command and waits for its reply. An error reply becomes an error:
  /// `errc::wrong_type`, `errc::auth_failed`, `errc::server_busy`, ... or `errc::server_error`, with
  /// the server's text in the exception message.
  /// Commands share the client's connections with its other work (pipelined with other threads'
  /// commands and the watchdog's renewals; a lone blocking caller's go on the lane, see
  /// `config::sync_lane`): a command that changes the state of its connection (SELECT, MULTI/EXEC,
  /// WATCH, SUBSCRIBE, CLIENT REPLY, AUTH, RESET) is not for this; use a connection of your own.
  /// @throws redlease::error
  reply command(std::initializer_list<std::string_view> args);
  /// As above; on failure sets `ec` (an error reply is also returned, with its text in `str`).
  reply command(std::initializer_list<std::string_view> args, std::error_code& ec);
  /// As above, with owned arguments.
  reply command(const std::vector<std::string>& args);
  /// As above, with owned arguments.
  reply command(const std::vector<std::string>& args, std::error_code& ec);

  /// Sends one command. Completion signature: `void(std::error_code, redlease::reply)`; an error
  /// reply completes with its mapped code and the reply.
  template <class CompletionToken>
  auto async_command(std::vector<std::string> args, CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void(std::error_code, reply)>(
        [this](auto handler, std::vector<std::string> a) {
          async_command_impl(std::move(a),
                             detail::erase_handler<std::error_code, reply>(std::move(handler), get_executor()));
        },
        token, std::move(args));
  }

  /// Waits until the server answers PING (connecting first if needed).
  /// @throws redlease::error (connect_failed, connect_timeout, auth_failed, ...)
  void ping();
  /// As above, reporting through `ec`.
  void ping(std::error_code& ec);

  /// Subscribes to `channel` on the pub/sub connection and waits until the server confirms.
  /// `on_message(channel, payload)` runs on one of the client's two delivery threads, never on its
  /// I/O thread: the messages of one subscription one at a time and in order, the subscriptions
  /// with messages in turn, one message each. So a flood on one channel or a slow callback delays
  /// that subscription only (a callback that blocks holds one of the two threads), and never the
  /// connection's other channels, the confirmations of new subscriptions, or the locks' wake-ups.
  /// The callback may make blocking calls on the client. A subscription whose callback falls
  /// 100,000 messages behind loses the oldest; how many is reported through `config::on_error`.
  /// An exception the callback throws is reported there too (the message is dropped, nothing else
  /// is affected). Subscriptions are reference-counted per channel and restored after a reconnect.
  /// @throws redlease::error if the subscription is not confirmed within the request timeout.
  subscription subscribe(std::string channel, std::function<void(std::string_view, std::string_view)> on_message);
  /// As above, reporting through `ec`.
  subscription subscribe(std::string channel, std::function<void(std::string_view, std::string_view)> on_message,
                         std::error_code& ec);

  /// Traffic counters.
  client_stats stats() const;
  /// A function that reads `stats()` and may outlive this client: it holds the client's state
  /// weakly, keeping no connection, thread or lock alive. It returns the counts while that state
  /// lives (after `close()`, the last ones: a lock handle made from the client keeps it), and
  /// `std::nullopt` once the client and every handle made from it are gone. Thread-safe; for
  /// collectors with a life of their own (redlease/prometheus.hpp). Empty on a moved-from client.
  std::function<std::optional<client_stats>()> stats_reader() const;

  /// Closes the client (as the destructor does). Idempotent. Every acquisition that waits ends with
  /// `errc::client_closed`, and the watchdog stops (held locks expire after their lease). Requests
  /// already sent or queued are answered first, for up to `config::close_timeout` (1 s; none past
  /// its `request_timeout`): an unlock on its way, a fair waiter's give-up of its place in the queue.
  /// An acquisition whose attempt was on the wire ends when its reply comes, with `client_closed`,
  /// and a grant in that reply is given back. Returns once the client's own I/O thread has ended
  /// (with a user executor: at once, and nothing is waited for). It may be called from inside a
  /// callback on that thread, which the destructor then joins.
  /// Operations started after the close complete with `errc::client_closed`: a handler with an
  /// executor of its own is posted there, one without is posted to `asio::system_executor`.
  void close() noexcept;

  /// @private The implementation, shared with lock handles.
  const std::shared_ptr<detail::client_impl>& impl() const noexcept { return impl_; }

 private:
  void async_command_impl(std::vector<std::string> args, detail::unique_function<void(std::error_code, reply)> h);
  std::shared_ptr<detail::client_impl> impl_;
};

}  // namespace redlease
