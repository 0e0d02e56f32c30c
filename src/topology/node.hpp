// SPDX-License-Identifier: MIT
// One Redis node as the lock layer uses it: its command connection, scripts sent by SHA1 with the
// EVAL fallback, replica acknowledgement (WAIT pipelined behind a write), and the lane a lone
// blocking caller may use (see lane.hpp). A topology owns its nodes; the lock layer reaches a node
// only through topology::route.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "net/connection.hpp"
#include "net/lane.hpp"
#include "net/resp.hpp"
#include "base/script.hpp"
#include "redlease/config.hpp"
#include "runtime/io_guard.hpp"

namespace redlease::detail {

/// `EVAL body numkeys keys... args...` for `s` with `args` (a script sent where no NOSCRIPT round
/// may follow it: after ASKING).
std::string eval_payload(const lua_script& s, const arg_list& args);

class node {
 public:
  /// `guard`: the client's I/O guard, through which a blocking call hands over its lanes (null for a
  /// client on a user executor: no lanes).
  node(asio::any_io_executor ex, const config& cfg, std::string name_suffix, io_guard* guard);
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  connection& conn() noexcept { return *conn_; }
  const std::shared_ptr<connection>& conn_ptr() const noexcept { return conn_; }

  /// `h` gets (ec, reply); an error reply is mapped to its code (the reply is kept, its words
  /// current while `h` runs).
  void exec(std::string payload, reply_handler h, bool idempotent = false);
  /// EVALSHA with EVAL fallback on NOSCRIPT (this node forgot the script: a restart, a failover, a
  /// SCRIPT FLUSH). The fallback is a new request at the back of the queue: a call that must run
  /// before the requests queued after it (an undo) passes `always_eval` and goes out as EVAL.
  void exec_script(const lua_script& s, arg_list args, reply_handler h, bool idempotent = false,
                   bool always_eval = false);
  /// `ASKING` and `payload` back to back on the command connection (never a lane: the flag ASKING
  /// sets holds for the next command on the same connection only). A cluster's ASK redirect.
  void exec_asking(std::string payload, reply_handler h, bool idempotent = false);
  /// As exec_script, followed in the same write by `WAIT n timeout` when replica acknowledgement is
  /// on for this node (see `replicas_wanted`). Fewer acknowledgements complete `h` with
  /// `errc::not_replicated` and the script's reply (the write did run on the master). A server that
  /// refuses WAIT turns acknowledgement off for the node, said once through config::on_error.
  void exec_script_acked(const lua_script& s, arg_list args, reply_handler h, bool idempotent = false,
                         bool always_eval = false);
  /// The acknowledgements asked of this node's replicas: config::replica_ack, with -1 (auto) meaning
  /// 1 when the topology says replicas are promoted (`auto_ack`) and the master's last ROLE (at the
  /// handshake, then at every `refresh_replicas`) listed one online, or refused to say; else 0.
  int replicas_wanted() const;
  /// Executor only: asks the master's ROLE again, for `replicas_wanted` in auto mode (the topology
  /// calls it on its poll: a replica attaches or leaves while the connection stays up, and after a
  /// failover the old master rejoins as a replica seconds after the client has connected).
  void refresh_replicas();
  /// Set by the topology: whether this node's replicas take over on failure (Sentinel).
  void set_auto_ack(bool on) { auto_ack_ = on; }
  /// Whether this node's replicas take over on failure: its READONLY then means it was demoted, a
  /// passing state the topology ends within a poll.
  bool replicas_promoted() const noexcept { return auto_ack_; }
  /// Executor only: the connection came up (probes WAIT support).
  void on_up();
  /// Executor only: closes the connection and ends the lane (a caller waiting on it wakes).
  void close();
  /// Executor only: the node is no longer the one to talk to (a failover): ends the lane and
  /// reconnects the connection at once (connection::reconnect_now).
  void reconnect_now(std::error_code why) {
    drop_lane();
    conn_->reconnect_now(why);
  }
  /// Executor only: a lane of this node carries a call, or replies still to come (parked).
  bool lane_busy() const noexcept { return (lane_ && lane_->taken()) || parked_lanes_ > 0; }
  /// What this node's lanes carried (any thread).
  const lane_counters& lane_stats() const noexcept { return *lane_counters_; }
  /// Scripts this node answered NOSCRIPT and that were sent again as EVAL (any thread).
  std::uint64_t noscript_fallbacks() const noexcept { return noscript_fallbacks_.load(std::memory_order_relaxed); }

 private:
  void send_acked(const lua_script& s, arg_list args, reply_handler h, bool idempotent, bool eval, int n);
  // Sends `r` on the lane of the blocking call that holds the I/O guard when it may, else on the
  // connection.
  void submit(request r);
  // The lane the blocking call holding the I/O guard (io_guard::call_lanes) may send on now, taken
  // for it; or nullptr (and a lane is opened for next time when there is none).
  lane* lane_for_call();
  void open_lane();
  void adopt_lane(const std::shared_ptr<connection>& c, std::uint64_t generation);
  void drop_lane();
  // Watches a lane whose caller left with requests in flight (lane::park), with the reactor, until
  // they are answered; then gives it back.
  void park_lane(std::shared_ptr<lane> l);
  struct parked;
  void serve_parked(const std::shared_ptr<parked>& p);

  std::atomic<std::uint64_t> noscript_fallbacks_{0};
  asio::any_io_executor ex_;
  std::string name_suffix_;
  std::shared_ptr<connection> conn_;
  const config* cfg_;
  io_guard* guard_;
  std::shared_ptr<lane> lane_;
  std::shared_ptr<connection> lane_conn_;  // the connection whose socket becomes the next lane
  clock::time_point lane_retry_at_{};      // after a failed attempt, no new one before this
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for posted work: the node exists
  bool closed_ = false;
  int parked_lanes_ = 0;  // lanes watched for replies still to come (park_lane)
  std::shared_ptr<lane_counters> lane_counters_ = std::make_shared<lane_counters>();
  bool auto_ack_ = false;
  int replicas_ = -1;          // online replicas in the master's last ROLE (-1: unknown)
  bool role_refused_ = false;  // the last ROLE was refused (an ACL without +role)
  enum class probe { unknown, yes, no } wait_ = probe::unknown;
};

}  // namespace redlease::detail
