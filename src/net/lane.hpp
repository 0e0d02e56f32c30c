// SPDX-License-Identifier: MIT
// A lane: a lone blocking caller's own connection to a node. Its socket is outside the I/O thread's
// reactor, so the caller writes its request and reads its reply on its own thread, spinning while
// the reply is plausibly close and then sleeping in poll(): the I/O thread is not woken at all.
// The handshake was done by a `connection` (AUTH, SELECT, SETNAME, ROLE), which then handed its
// socket over (connection::release_socket). Plain TCP and Unix sockets only: a TLS stream stays
// with its connection.
//
// Ownership: the node keeps the current lane; a caller takes it (take(), under the I/O guard) for
// one blocking call and gives it back. All I/O on a lane is its taker's. Any thread holding a
// reference may interrupt() it (a failover, a close): the taker's next wait ends, and its requests
// fail as on a dropped connection.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "net/connection.hpp"
#include "net/resp.hpp"
#include "redlease/config.hpp"
#include "redlease/reply.hpp"

namespace redlease::detail {

/// A request's end as a lane saw it: its reply, or why there is none. `resend` (an idempotent
/// request on a dropped lane): the request may go again on the node's connection, with `payload`.
struct lane_completion {
  reply_handler handler;
  std::error_code ec;
  reply r;
  std::string payload;
  bool resend = false;
};

/// What a node's lanes carried, all of them together (any thread).
struct lane_counters {
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> replies{0};
};

class lane {
 public:
  /// Takes ownership of `fd`: a connected socket whose handshake is done, with nothing in flight.
  /// `generation`: the node's connection count when the lane was made (a reconnect of the node's
  /// connection, perhaps to another master, makes the lane stale). `home`: the node's connection,
  /// where idempotent requests of a dropped lane are resent.
  /// `park`: takes over a lane whose taker leaves with requests in flight (on the executor).
  lane(int fd, const config& cfg, std::uint64_t generation, std::weak_ptr<connection> home,
       std::function<void(std::shared_ptr<lane>)> park, std::shared_ptr<lane_counters> counters);
  ~lane();
  lane(const lane&) = delete;
  lane& operator=(const lane&) = delete;

  /// Any thread: takes the lane for one caller; false when another has it or it is broken.
  bool take() noexcept;
  /// The taker: gives the lane back (it must have nothing in flight).
  void give_back() noexcept { taken_.store(false, std::memory_order_release); }
  /// Any thread: a caller has the lane, or the node watches it for replies still to come (parked).
  bool taken() const noexcept { return taken_.load(std::memory_order_acquire); }
  std::uint64_t generation() const noexcept { return generation_; }
  const std::weak_ptr<connection>& home() const noexcept { return home_; }
  /// Executor (or under the I/O guard): hands a lane whose taker leaves with requests in flight to
  /// the node, which watches it with the reactor until they are answered and then gives it back.
  void park(std::shared_ptr<lane> self) { park_(std::move(self)); }
  /// Whether the lane can carry requests (not dropped, not interrupted, the peer has not closed).
  /// The taker only; the peer check is one non-blocking recv(MSG_PEEK).
  bool usable() noexcept;
  bool broken() const noexcept { return broken_.load(std::memory_order_acquire); }
  /// Any thread holding a reference: ends the lane (shutdown of the socket). A taker waiting in
  /// poll() wakes; its requests fail as on a dropped connection (idempotent ones are resent).
  void interrupt() noexcept;

  /// The taker: writes the request at once. False when the lane broke before any byte of it was
  /// written (the request is untouched and may go another way); after a partial write the request
  /// is the lane's, and fails or is resent with the others.
  bool send(request& r);
  /// The taker: requests written whose replies have not come (some may have timed out already).
  bool pending() const noexcept { return !inflight_.empty(); }
  /// The taker: a request in flight whose handler still waits for its reply.
  bool waiting() const noexcept { return waiting_ > 0; }
  /// The taker, without the I/O guard: waits for at least one reply, spinning on the socket until
  /// `spin_end`, then sleeping in poll(), until a waiting request's deadline. Appends what ended to
  /// `out`: replies; a request past its deadline (request_timeout: it keeps its place, and its late
  /// reply is dropped, so what is sent after it stays in order); or, when the lane drops, everything.
  /// True when a reply came while it spun: `rtt` is then the time from the last request's write to
  /// that reply (a round trip with no sleep in it, for the next spin budget).
  bool await(clock::time_point spin_end, std::vector<lane_completion>& out, clock::duration& rtt);
  /// The taker, without blocking: what has arrived, requests past their deadline, and a drop of the
  /// lane when nothing has arrived for twice the request timeout with requests in flight (as a
  /// connection's liveness check). For a lane the I/O thread watches (node::park_lane).
  void collect(std::vector<lane_completion>& out);
  /// When collect() next has something to do without a reply: the first deadline of a waiting
  /// request, or the silence limit.
  clock::time_point next_check() const noexcept;
  /// The socket (for the I/O thread's reactor while it watches the lane).
  int fd() const noexcept { return fd_; }


 private:
  struct inflight {
    reply_handler handler;  // empty once timed out: the reply is dropped
    std::string payload;  // idempotent requests only, to resend after a drop
    clock::time_point deadline;
    bool idempotent = false;
  };
  // Reads what has arrived; replies go to `out`. False when the lane broke (everything is in `out`).
  bool read_ready(std::vector<lane_completion>& out, bool& got);
  void fail_all(std::error_code ec, std::string text, std::vector<lane_completion>& out);
  void expire(clock::time_point now, std::vector<lane_completion>& out);

  int fd_;
  std::chrono::milliseconds timeout_;
  std::uint64_t generation_;
  std::weak_ptr<connection> home_;
  std::function<void(std::shared_ptr<lane>)> park_;
  std::shared_ptr<lane_counters> counters_;
  std::atomic<bool> taken_{false};
  std::atomic<bool> broken_{false};
  std::deque<inflight> inflight_;
  clock::time_point last_write_{};
  clock::time_point last_read_{};  // the last whole reply, or the first write into an empty lane
  std::size_t waiting_ = 0;
  resp_reader reader_;
  std::unique_ptr<char[]> rbuf_;
};

/// Runs what ended on a lane (on the executor, or under the I/O guard): each handler with its
/// reply or error, an exception it throws reported and swallowed. `resend` requests go again on
/// `home` when it exists, unless the client is `closing` (a reply still reaches its handler: the
/// close waits for what is on its way). Once the connections are `closed`, a request that got no
/// reply fails with client_closed, as a closed connection's requests do.
void run_completions(std::vector<lane_completion>& done, const std::shared_ptr<connection>& home, bool closing,
                     bool closed, const config& cfg) noexcept;

/// The lanes one blocking call has taken. sync_call hands it to the client's I/O guard
/// (io_guard::call_lanes) while it runs the call's code under the guard and while it runs the
/// handlers of the replies that came on the lane; a node asked for a request then may send it on
/// the session's lane (see node).
class lane_session {
 public:
  lane_session() = default;
  lane_session(const lane_session&) = delete;
  lane_session& operator=(const lane_session&) = delete;
  ~lane_session() { end(); }

  /// The lane this session holds (one at most), if any.
  const std::shared_ptr<lane>& held() const noexcept { return lane_; }
  /// Holds `l` (taken by the caller) until end().
  void hold(std::shared_ptr<lane> l) noexcept { lane_ = std::move(l); }
  /// Gives the lane back (nothing of the call may be in flight on it).
  void end() noexcept {
    if (auto l = std::exchange(lane_, nullptr)) l->give_back();
  }
  /// Lets go of the lane without giving it back (it was handed over, still taken, to the node).
  std::shared_ptr<lane> release() noexcept { return std::exchange(lane_, nullptr); }
  bool pending() const noexcept { return lane_ && lane_->pending(); }

 private:
  std::shared_ptr<lane> lane_;
};

}  // namespace redlease::detail
