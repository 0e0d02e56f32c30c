// SPDX-License-Identifier: MIT
#include "net/lane.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "background.hpp"
#include "redlease/error.hpp"

namespace redlease::detail {
namespace {

constexpr std::size_t lane_chunk = 16 * 1024;

// Milliseconds for poll() until `t`, rounded up (a timeout that ends early would spin).
int poll_ms(clock::time_point t) {
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(t - clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<long long>((left + 999) / 1000, 60'000));
}

}  // namespace

void run_completions(std::vector<lane_completion>& done, const std::shared_ptr<connection>& home, bool closing,
                     bool closed, const config& cfg) noexcept {
  for (auto& d : done) {
    // Once the client closes, a reply still comes to its handler (close() waits for what is on its
    // way: a grant it brings is given back, an unlock's result is the caller's); only the resend of
    // a failed idempotent request to the node's connection is not made.
    if (d.ec && closed) {
      d.ec = errc::client_closed;
      d.r = reply{};
    } else if (d.resend && home && !closing) {
      home->submit_here(request{std::move(d.payload), std::move(d.handler), true});
      continue;
    }
    try {
      d.handler(d.ec, std::move(d.r));
    } catch (...) {
      report_exception(cfg, "reply handler");
    }
  }
  done.clear();
}

lane::lane(int fd, const config& cfg, std::uint64_t generation, std::weak_ptr<connection> home,
           std::function<void(std::shared_ptr<lane>)> park, std::shared_ptr<lane_counters> counters)
    : fd_(fd),
      timeout_(cfg.request_timeout),
      generation_(generation),
      home_(std::move(home)),
      park_(std::move(park)),
      counters_(std::move(counters)),
      reader_(resp_limits{cfg.max_reply_depth, cfg.max_reply_elements}),
      rbuf_(new char[lane_chunk]) {}

lane::~lane() { ::close(fd_); }

bool lane::take() noexcept {
  if (broken()) return false;
  return !taken_.exchange(true, std::memory_order_acquire);
}

void lane::interrupt() noexcept {
  broken_.store(true, std::memory_order_release);
  // The descriptor stays open until the lane is destroyed, so this never reaches another socket.
  ::shutdown(fd_, SHUT_RDWR);
}

bool lane::usable() noexcept {
  if (broken()) return false;
  if (!inflight_.empty()) return true;
  // An idle lane the server closed (its `timeout`, a restart, CLIENT KILL) shows as end of stream
  // or an error; that costs one system call, and saves a request that would fail.
  char c;
  auto n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) {
    // Bytes nobody asked for (a server that pushes, a confused peer): not a lane to trust.
    broken_.store(true, std::memory_order_release);
    return false;
  }
  if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    broken_.store(true, std::memory_order_release);
    return false;
  }
  return true;
}

bool lane::send(request& r) {
  if (broken()) return false;
  std::size_t off = 0;
  auto now = clock::now();
  auto deadline = now + timeout_;
  while (off < r.payload.size()) {
    auto n = ::send(fd_, r.payload.data() + off, r.payload.size() - off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && clock::now() < deadline) {
      // A full socket buffer (a large EVAL on a slow peer): wait for room, without the reactor.
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, poll_ms(deadline));
      continue;
    }
    broken_.store(true, std::memory_order_release);
    if (off == 0) return false;
    break;
  }
  if (inflight_.empty()) last_read_ = now;  // the silence limit counts from here
  inflight e;
  e.handler = std::move(r.handler);
  e.deadline = deadline;
  e.idempotent = r.idempotent;
  if (e.idempotent) e.payload = std::move(r.payload);
  inflight_.push_back(std::move(e));
  ++waiting_;
  last_write_ = clock::now();
  counters_->requests.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void lane::fail_all(std::error_code ec, std::string text, std::vector<lane_completion>& out) {
  broken_.store(true, std::memory_order_release);
  // After a protocol error nothing is resent: the peer may not be Redis at all (as a connection).
  bool may_resend = ec != errc::protocol_error;
  for (auto& e : inflight_) {
    if (!e.handler) continue;
    lane_completion c;
    c.handler = std::move(e.handler);
    c.ec = ec;
    if (!text.empty()) {
      c.r.type = reply::kind::error;
      c.r.str = text;
    }
    c.resend = may_resend && e.idempotent;
    c.payload = std::move(e.payload);
    out.push_back(std::move(c));
  }
  inflight_.clear();
  waiting_ = 0;
}

void lane::expire(clock::time_point now, std::vector<lane_completion>& out) {
  // A written request keeps its place (replies match by position); its late reply is dropped.
  for (auto& e : inflight_) {
    if (!e.handler || e.deadline > now) continue;
    lane_completion c;
    c.handler = std::move(e.handler);
    c.ec = errc::request_timeout;
    out.push_back(std::move(c));
    --waiting_;
  }
}

bool lane::read_ready(std::vector<lane_completion>& out, bool& got) {
  for (;;) {
    auto n = ::recv(fd_, rbuf_.get(), lane_chunk, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) {
      fail_all(errc::connection_lost, {}, out);
      return false;
    }
    reply r;
    try {
      if (!reader_.feed(rbuf_.get(), static_cast<std::size_t>(n))) {
        fail_all(errc::protocol_error, reader_.error_text(), out);
        return false;
      }
      for (;;) {
        auto st = reader_.next(r);
        if (st == resp_reader::status::incomplete) break;
        if (st == resp_reader::status::error) {
          fail_all(errc::protocol_error, reader_.error_text(), out);
          return false;
        }
        if (inflight_.empty()) {
          // A reply nobody asked for: the stream is not what this lane sent for.
          fail_all(errc::protocol_error, "a reply with no request on the caller's connection", out);
          return false;
        }
        counters_->replies.fetch_add(1, std::memory_order_relaxed);
        last_read_ = clock::now();  // whole replies only: a trickled one does not keep the lane alive
        auto& e = inflight_.front();
        if (e.handler) {
          lane_completion c;
          c.handler = std::move(e.handler);
          c.r = std::move(r);
          out.push_back(std::move(c));
          --waiting_;
          got = true;
        }
        r = reply{};
        inflight_.pop_front();
      }
    } catch (const std::bad_alloc&) {
      fail_all(errc::protocol_error, "a reply larger than the memory available", out);
      return false;
    }
    if (static_cast<std::size_t>(n) < lane_chunk) return true;
  }
}

clock::time_point lane::next_check() const noexcept {
  auto t = last_read_ + 2 * timeout_;
  for (auto& e : inflight_)
    if (e.handler && e.deadline < t) t = e.deadline;
  return t;
}

void lane::collect(std::vector<lane_completion>& out) {
  bool got = false;
  if (broken()) return fail_all(errc::connection_lost, {}, out);
  if (!read_ready(out, got)) return;
  auto now = clock::now();
  expire(now, out);
  if (!inflight_.empty() && now >= last_read_ + 2 * timeout_) {
    fail_all(errc::request_timeout, "no whole reply received for " + std::to_string(2 * timeout_.count()) + " ms", out);
  }
}

bool lane::await(clock::time_point spin_end, std::vector<lane_completion>& out, clock::duration& rtt) {
  bool got = false;
  if (broken()) {
    fail_all(errc::connection_lost, {}, out);
    return false;
  }
  // Spin while the reply is plausibly close: a reply read without sleeping costs no wake-up.
  // Each turn is a recv() already: the clock is read every turn, the budget is kept to the µs.
  for (;;) {
    bool ok = read_ready(out, got);
    auto now = clock::now();
    if (got) {
      rtt = now - last_write_;
      return true;
    }
    if (!ok || now >= spin_end) break;
  }
  while (!got && waiting()) {
    if (broken()) {
      fail_all(errc::connection_lost, {}, out);
      break;
    }
    auto until = next_check();
    auto now = clock::now();
    if (now >= until) {
      auto n = out.size();
      collect(out);
      if (out.size() > n) break;
      continue;
    }
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, poll_ms(until));
    if (rc < 0 && errno != EINTR) {
      fail_all(errc::connection_lost, {}, out);
      break;
    }
    if (!read_ready(out, got)) break;
  }
  return false;
}

}  // namespace redlease::detail
