// SPDX-License-Identifier: MIT
// One Redis node as the lock layer uses it: its command connection, scripts sent by SHA1 with the
// EVAL fallback, and replica acknowledgement (WAIT pipelined behind a write). A topology owns its
// nodes; the lock layer reaches a node only through topology::route.
#pragma once

#include <memory>
#include <string>

#include "net/connection.hpp"
#include "net/resp.hpp"
#include "net/script.hpp"
#include "redlease/config.hpp"

namespace redlease::detail {

class node {
 public:
  node(asio::any_io_executor ex, const config& cfg, std::string name_suffix);
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
  /// As exec_script, followed in the same write by `WAIT n timeout` when replica acknowledgement is
  /// on for this node (see `replicas_wanted`). Fewer acknowledgements complete `h` with
  /// `errc::not_replicated` and the script's reply (the write did run on the master). A server that
  /// refuses WAIT turns acknowledgement off for the node, said once through config::on_error.
  void exec_script_acked(const lua_script& s, arg_list args, reply_handler h, bool idempotent = false,
                         bool always_eval = false);
  /// The acknowledgements asked of this node's replicas: config::replica_ack, with -1 (auto) meaning
  /// 1 when the topology says replicas are promoted (`auto_ack`) and the master listed one at the
  /// handshake, else 0.
  int replicas_wanted() const;
  /// Set by the topology: whether this node's replicas take over on failure (Sentinel).
  void set_auto_ack(bool on) { auto_ack_ = on; }
  /// Executor only: the connection came up (probes WAIT support).
  void on_up();

 private:
  void send_acked(const lua_script& s, arg_list args, reply_handler h, bool idempotent, bool eval, int n);

  std::shared_ptr<connection> conn_;
  const config* cfg_;
  bool auto_ack_ = false;
  enum class probe { unknown, yes, no } wait_ = probe::unknown;
};

}  // namespace redlease::detail
