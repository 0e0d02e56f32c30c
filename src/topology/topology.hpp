// SPDX-License-Identifier: MIT
// The deployment seam. A topology decides which node serves a keyed request and owns the
// connections to its nodes: one server (standalone), a master found through Sentinels, and next a
// Redis Cluster (slot routing) or several independent masters (RedLock). The lock layer hands it
// whole keyed requests (it never holds a node: the topology is the one place that routes, and could
// re-route or follow a redirect), asks it for the subscriber of a channel, and is told when ownership
// of keys may have moved; it never knows which deployment it runs on. Executor only, except
// construction.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <asio/any_io_executor.hpp>

#include "base/channel_listener.hpp"
#include "base/command.hpp"
#include "base/handlers.hpp"
#include "base/script.hpp"
#include "redlease/metrics.hpp"
#include "redlease/config.hpp"

namespace redlease::detail {

class connection;
class node;
class io_guard;
class subscriber;

/// What a topology tells the lock layer (on the executor).
struct topology_events {
  /// A command connection came up (first connect or reconnect).
  std::function<void()> on_up;
  /// The node serving some keys changed role (a failover): whether any hold survived is unknown
  /// until it is checked on the new node. `what` says what happened, for the holders told.
  std::function<void(const std::string& what)> on_failover;
};

/// One request, whole, as the lock layer hands it to the topology: the key that routes it, and what
/// to send. `key` is read during `topology::exec` only (a topology keeps what it needs of it).
struct keyed_request {
  enum class kind : std::uint8_t {
    command,       // `payload`, one encoded command
    script,        // `script` with `args` (EVALSHA, EVAL after NOSCRIPT)
    script_acked,  // as script, then WAIT when replica acknowledgement is on (node::exec_script_acked)
  };
  std::string_view key;  // routes it: a command's key, a script's first key; empty: any node
  kind what = kind::command;
  const lua_script* script = nullptr;
  arg_list args;        // a script's numkeys, keys and arguments
  std::string payload;  // a command's bytes
  bool idempotent = false;  // safe to send again if the connection drops after it was written
  // Goes out as EVAL (no NOSCRIPT round): it must run before what is queued after it (an undo).
  bool always_eval = false;
  // Must reach the node that served the previous request of this key, right behind it (the undo of
  // an attempt whose reply never came): a topology that moves keys never re-routes it to another
  // node on its own, and fails it instead when that node is gone.
  bool follows = false;
  reply_handler handler;

  static keyed_request command(std::string_view key, std::string payload, reply_handler h, bool idempotent = false);
  static keyed_request script_call(std::string_view key, const lua_script& s, arg_list a, reply_handler h,
                                   bool idempotent = false);
};

class topology {
 public:
  virtual ~topology() = default;
  /// Starts connecting. Called once, on the executor.
  virtual void start() = 0;
  /// Fails everything in flight with client_closed and stops for good.
  virtual void close() = 0;
  /// Sends `r` to the node that serves `r.key`; its handler gets (ec, reply) as node::exec says.
  /// The one way the lock layer reaches a node.
  virtual void exec(keyed_request r);
  /// Whether this deployment promotes a replica when a master fails (Sentinel, Cluster): a READONLY
  /// reply then means a demoted master, a passing state, not a configuration.
  virtual bool promotes_replicas() const { return false; }
  /// Keys with equal batch ids may go together in one script call (a cluster: the same slot).
  virtual std::uint64_t batch_id(std::string_view /*key*/) const { return 0; }
  /// How many batch ids there are (a cluster: 16384 slots): above one, the watchdog renews the holds
  /// of one batch id together, at a phase of the interval of its own (watchdog::aligned_due).
  virtual std::uint64_t batch_count() const { return 1; }
  /// The pub/sub connection that carries `channel` (statistics, the client's own subscriptions).
  virtual subscriber& sub_for(std::string_view channel) = 0;
  /// Adds `l` to `channel` on the pub/sub connection that carries it, and returns that connection:
  /// `l` leaves the one it joined (unsubscribe), even if the channel has moved since.
  virtual subscriber* subscribe(const std::string& channel, channel_listener* l);
  /// Takes `l` off `channel`: from `s`, the connection `subscribe` returned, or from wherever the
  /// topology has moved the channel since (a cluster's sharded subscriptions follow their slot).
  virtual void unsubscribe(subscriber* s, const std::string& channel, channel_listener* l);
  /// The command the lock scripts publish with: "publish", or "spublish" where waiters listen on
  /// sharded channels (a Redis 7 cluster, as Redisson's shardedSubscriptionMode decides). Any
  /// thread: the facade encodes its scripts on the caller's.
  virtual std::string_view publish_command() const { return "publish"; }
  /// Calls `f` for every command connection and every pub/sub connection (statistics).
  virtual void for_each_connection(const std::function<void(const connection&, bool pubsub)>& f) const = 0;
  /// Calls `f` for every node (statistics).
  virtual void for_each_node(const std::function<void(const node&)>& f) const = 0;
  /// MOVED and ASK replies per node that answered them (a cluster's; empty elsewhere). Any thread.
  virtual std::vector<node_redirects> redirects() const { return {}; }
  void set_events(topology_events e) { events_ = std::move(e); }

 protected:
  /// The node that serves `key` (every key, in a deployment with one master).
  virtual node& route(std::string_view key) = 0;
  topology_events events_;
};

/// The deployment `cfg` describes: Sentinel when it names Sentinels; one server on a Unix socket or
/// with `cluster.mode` off; else a cluster, detected (and one server when it is not one). `guard`: the
/// client's I/O guard, which its nodes ask for the lanes of a blocking call (null: no lanes).
std::unique_ptr<topology> make_topology(asio::any_io_executor ex, const config& cfg, io_guard* guard);
/// One server: the config's host/port or unix socket.
std::unique_ptr<topology> make_standalone(asio::any_io_executor ex, const config& cfg, io_guard* guard);
/// A Redis Cluster reached through the config's address and `cfg.cluster.seeds`, or the one server
/// there when it is not a cluster (cluster.cpp).
std::unique_ptr<topology> make_cluster(asio::any_io_executor ex, const config& cfg, io_guard* guard);
/// A master found through the Sentinels of `cfg.sentinel`.
std::unique_ptr<topology> make_sentinel(asio::any_io_executor ex, const config& cfg, io_guard* guard);

}  // namespace redlease::detail
