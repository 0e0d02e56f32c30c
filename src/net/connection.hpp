// SPDX-License-Identifier: MIT
// One Redis connection (TCP or Unix socket) with automatic pipelining, request timeouts and
// reconnection. All members run on the connection's executor (one thread); only submit() may be
// called from any thread.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/generic/stream_protocol.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ssl/context.hpp>
#include <asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "base/handlers.hpp"
#include "net/resp.hpp"
#include "net/tls.hpp"
#include "redlease/config.hpp"
#include "redlease/detail/unique_function.hpp"
#include "redlease/reply.hpp"

namespace redlease::detail {


/// Counters readable from any thread.
struct conn_stats {
  std::atomic<std::uint64_t> commands{0};       // commands written (handshake included)
  std::atomic<std::uint64_t> writes{0};         // write system calls (write_some operations)
  std::atomic<std::uint64_t> direct_writes{0};  // writes made whole by a blocking caller on its own thread
  std::atomic<std::uint64_t> bytes_written{0};
  std::atomic<std::uint64_t> replies{0};
  std::atomic<std::uint64_t> connects{0};       // successful connections (handshake done)
  std::atomic<std::uint64_t> connection_losses{0};
  std::atomic<std::uint64_t> protocol_errors{0};  // streams that broke RESP (dropped, reconnected)
  std::atomic<std::uint64_t> stalled_drops{0};    // dropped: a request timed out with nothing read
};

/// One command to send: its encoded bytes and what to do with its reply.
struct request {
  std::string payload;   // exactly one RESP-encoded command
  reply_handler handler;  // completes with (ec, reply); a server error reply arrives as a reply of
                          // type error with ec clear; the caller maps it
  bool idempotent = false;  // safe to resend if the connection drops after it was written
};

/// A TCP address a connection is pointed at by its resolver (a Sentinel's answer, a cluster node).
struct node_address {
  std::string host;
  std::uint16_t port = 0;
  bool operator==(const node_address&) const = default;
};

/// "host:port" (IPv6 hosts in brackets), for messages.
std::string to_string(const node_address& a);

/// The server's words without the location Redis adds to an error raised inside a script (Redis 7:
/// a trailing " script: <sha>, on @user_script:18."; Redis 6: a leading "ERR Error running script
/// (call to f_<sha>): @user_script:18: "): the failing command's own words, for messages.
std::string_view without_script_location(std::string_view text);
/// Maps a server error reply's text to redlease's error code (WRONGTYPE, NOAUTH, BUSY, ...).
std::error_code error_from_reply_text(std::string_view text);
/// Whether an error reply to ROLE refuses it for good (NOPERM, an unknown or renamed command), not
/// for the moment (BUSY, LOADING).
bool role_refusal(std::string_view text);
/// The replicas a master lists in its ROLE reply `r` (those online), or -1 when `r` is not a
/// master's ROLE reply.
int role_master_replicas(const reply& r) noexcept;

class connection : public std::enable_shared_from_this<connection> {
 public:
  struct callbacks {
    std::function<void()> on_up;            // connected and handshake done
    std::function<void()> on_down;          // the connection dropped (or a connect attempt failed)
    std::function<void(reply&)> on_push;    // a reply that no request waits for (pub/sub messages)
    // Where to connect, asked before every attempt (a Sentinel-managed master is re-resolved on
    // every reconnect). Empty: the config's host/port or unix socket. The answer may come later; an
    // error fails the attempt with the error and its words.
    using resolved = unique_function<void(std::error_code, std::string text, node_address)>;
    std::function<void(resolved)> resolve;
  };

  connection(asio::any_io_executor ex, const config& cfg, std::string name_suffix);
  ~connection();

  void set_callbacks(callbacks cb) { cb_ = std::move(cb); }
  /// Before start(): asks `r` where to connect before every attempt (see callbacks::resolve).
  void set_resolver(std::function<void(callbacks::resolved)> r) { cb_.resolve = std::move(r); }
  /// Starts connecting (and reconnecting for as long as the connection is not closed).
  void start();
  /// Thread-safe: queues a request; the reply handler runs on the connection's executor.
  void submit(request r);
  /// As submit, called on the executor.
  void submit_here(request r);
  /// Executor only: writes a command that produces no reply of its own (SUBSCRIBE, ...): its
  /// answers come through on_push. Dropped when not connected (resubscription covers that).
  void send_untracked(std::string payload);
  /// Executor only: drops the connection as if the network had (a failed health check); it
  /// reconnects.
  void drop(std::error_code why);
  /// Executor only: drops the connection, or abandons the attempt under way, and connects afresh at
  /// once (re-resolving the address): the node it was on is no longer the one to talk to.
  void reconnect_now(std::error_code why);
  /// Before start(): the handshake sends ROLE and accepts only a master (a replica or a Sentinel
  /// fails the attempt with `errc::server_readonly`). A server that refuses ROLE (ACL) is accepted,
  /// with one warning.
  void require_master() { require_master_ = true; }
  /// The replicas the master listed in its ROLE reply at the last handshake (-1: unknown).
  int replicas_at_handshake() const noexcept { return replicas_; }
  /// Whether the server refused ROLE at the last handshake (an ACL without +role).
  bool role_refused() const noexcept { return role_refused_; }
  /// Executor only: a refused ROLE is reported once for this connection and `other` together (the
  /// connections of one node and its pub/sub connection: one warning per client, not per socket).
  void share_role_report(const connection& other) { role_refusal_reported_ = other.role_refusal_reported_; }
  /// The address of the current (or last) connection attempt; empty host for the config's address.
  const node_address& address() const noexcept { return addr_; }
  /// Executor only: fails everything with client_closed and stops for good.
  void close();
  /// Executor only: hands the socket of a connection that is up, plain (not TLS) and idle over to
  /// the caller (a lane), and stops for good without failing anything. The descriptor, or -1 (and
  /// nothing changes) when the connection is not in that state.
  int release_socket();
  /// Nothing queued, in flight, being written, or read and not yet parsed.
  bool idle() const noexcept {
    return queued_.empty() && inflight_.empty() && !writing_ && wbuf_.empty() && wnext_.empty() && reader_.buffered() == 0;
  }
  /// Something queued, or in flight with someone still waiting for its reply (one that timed out
  /// already is not waited for).
  bool awaits_replies() const noexcept {
    if (!queued_.empty()) return true;
    for (const auto& e : inflight_)
      if (e.handler && !e.internal) return true;
    return false;
  }
  bool is_tls() const noexcept { return sock_.is_tls(); }
  /// Whether the handshake asks ROLE and accepts only a master (require_master()).
  bool requires_master() const noexcept { return require_master_; }
  bool is_up() const noexcept { return state_ == state::up; }
  /// The error of the last failed connection attempt (clear once connected).
  std::error_code last_error() const noexcept { return last_error_; }
  /// The words of the last failure (the server's text, a protocol error), or empty.
  const std::string& last_error_text() const noexcept { return last_error_text_; }
  const conn_stats& stats() const noexcept { return stats_; }
  const config& cfg() const noexcept { return cfg_; }
  const asio::any_io_executor& executor() const noexcept { return ex_; }

 private:
  enum class state { idle, resolving, connecting, tls_handshake, handshake, probing, up, backoff, closed };
  struct inflight {
    reply_handler handler;  // empty for a request that already timed out: its reply is dropped
    std::string payload;    // kept for idempotent requests only, to resend after a reconnect
    clock::time_point deadline;
    bool idempotent = false;
    bool internal = false;  // handshake command: its reply goes to on_handshake_reply
    bool role = false;      // the handshake's ROLE
    bool select = false;    // the handshake's SELECT
    bool batch_end = false;  // the last request of one write (see batches_out_)
  };
  struct queued {
    request req;
    clock::time_point deadline;
  };

  void connect_attempt();
  void connect_to(const node_address& a, std::uint64_t gen);
  void connect_endpoint(std::shared_ptr<std::vector<asio::ip::tcp::endpoint>> eps, std::size_t i, std::uint64_t gen,
                        std::error_code last);
  void on_tcp_connected(std::uint64_t gen);
  void on_connected(std::uint64_t gen);
  void on_attempt_timeout();
  // A read or write failed before the connection was up: says why, as precisely as the evidence allows.
  void handshake_io_failed(std::error_code ec);
  // A plaintext connection was reset before any reply: is the port a TLS port? Ends the attempt.
  void probe_for_tls(std::error_code first);
  // "host:port" (or the socket path), for messages.
  std::string where() const;
  void on_handshake_reply(std::error_code ec, reply& r, bool role, bool select);
  bool check_role(reply& r);
  void attempt_failed(std::error_code ec, std::string text = {});
  void connection_lost(std::error_code ec, bool at_once = false);  // at_once: reconnect without the backoff
  void schedule_reconnect();
  void schedule_flush();
  void flush();
  void start_write();
  void start_read();
  void on_reply(reply& r);
  void arm_timeout();
  void on_timeout();
  void fail_queued(std::error_code ec);
  // Closed for good: no timer, probe or completion of this connection acts any more (close and
  // release_socket; the socket is theirs to close or hand over).
  void stop();
  void protocol_fault(std::string text);
  void check_liveness();
  // Runs a handler; an exception it throws is reported (config::on_error), never propagated.
  void call(reply_handler& h, std::error_code ec, reply r) noexcept;
  // The reply a request fails with: the error's text when there is one (a protocol error's message).
  reply failure_reply(std::error_code ec) const;

  asio::any_io_executor ex_;
  config cfg_;
  std::string client_name_;
  callbacks cb_;
  transport sock_;
  std::unique_ptr<asio::ssl::context> tls_ctx_;  // built at the first attempt with cfg_.tls.enabled
  // The host of the current attempt: resolved, and the name TLS verifies and sends as SNI.
  std::string host_;
  asio::generic::stream_protocol::endpoint peer_;  // the TCP endpoint of the current attempt
  std::shared_ptr<tls_probe> probe_;               // while state_ == probing
  asio::steady_timer attempt_timer_;   // connect timeout, then reconnect backoff
  asio::steady_timer timeout_timer_;   // request deadlines
  asio::steady_timer liveness_timer_;  // a stuck connection's drop
  bool timeout_armed_ = false;
  clock::time_point timeout_at_{};
  state state_ = state::idle;
  std::uint64_t gen_ = 0;              // bumped per connection attempt; stale completions check it
  int attempt_ = 0;
  int handshake_pending_ = 0;
  std::error_code handshake_error_;
  std::string handshake_text_;
  std::error_code last_error_;
  bool require_master_ = false;
  std::shared_ptr<bool> role_refusal_reported_ = std::make_shared<bool>(false);
  bool role_refused_ = false;
  int replicas_ = -1;
  node_address addr_;                  // where the current attempt goes (resolver's answer)
  std::string last_error_text_;        // words of the last failure (server text, protocol error), for the requests it fails
  clock::time_point up_since_{};       // when the handshake of the current connection completed
  clock::time_point last_read_{};      // when the last whole reply arrived (liveness)
  std::uint64_t attempt_bytes_ = 0;    // bytes read on this connection since the Redis handshake began
  std::deque<queued> queued_;
  std::deque<inflight> inflight_;
  std::string wbuf_;
  std::size_t woff_ = 0;
  // Untracked commands (pub/sub) sent while a write is out: that write points into wbuf_, which
  // must not grow (and move) under it. Swapped in when the write completes.
  std::string wnext_;
  bool writing_ = false;
  bool flush_scheduled_ = false;
  // Writes whose replies have not all come back. At most two small ones are out (as in the
  // ceiling's pipeline): what callers ask for meanwhile waits and goes out in one write when the
  // older one is answered, so the depth of a write follows the load instead of collapsing to a
  // command or two whenever the I/O thread happens to be quick.
  static constexpr int max_batches_out = 2;
  // ... unless this many requests wait: a deep pipeline (hundreds of asynchronous operations) keeps
  // the server busy with more writes out.
  static constexpr std::size_t full_batch = 32;
  int batches_out_ = 0;
  std::unique_ptr<char[]> rbuf_;
  resp_reader reader_;
  std::minstd_rand jitter_;
  conn_stats stats_;
};

}  // namespace redlease::detail
