// SPDX-License-Identifier: MIT
// The deployment seam. A topology decides which node serves a keyed request and owns the
// connections to its nodes: one server (standalone), a master found through Sentinels, and next a
// Redis Cluster (slot routing) or several independent masters (RedLock). The lock layer asks it for
// the node of a key and the subscriber of a channel, and is told when ownership of keys may have
// moved; it never knows which deployment it runs on. Executor only, except construction.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "net/subscriber.hpp"
#include "topology/node.hpp"

namespace redlease::detail {

/// What a topology tells the lock layer (on the executor).
struct topology_events {
  /// A command connection came up (first connect or reconnect).
  std::function<void()> on_up;
  /// The node serving some keys changed role (a failover): whether any hold survived is unknown
  /// until it is checked on the new node. `what` says what happened, for the holders told.
  std::function<void(const std::string& what)> on_failover;
};

class topology {
 public:
  virtual ~topology() = default;
  /// Starts connecting. Called once, on the executor.
  virtual void start() = 0;
  /// Fails everything in flight with client_closed and stops for good.
  virtual void close() = 0;
  /// The node that serves `key` (every key, in a deployment with one master).
  virtual node& route(std::string_view key) = 0;
  /// Keys with equal batch ids may go together in one script call (a cluster: the same slot).
  virtual std::uint64_t batch_id(std::string_view /*key*/) const { return 0; }
  /// The pub/sub connection that carries `channel`.
  virtual subscriber& sub_for(std::string_view channel) = 0;
  /// Calls `f` for every command connection and every pub/sub connection (statistics).
  virtual void for_each_connection(const std::function<void(const connection&, bool pubsub)>& f) const = 0;
  /// Calls `f` for every node (statistics).
  virtual void for_each_node(const std::function<void(const node&)>& f) const = 0;
  void set_events(topology_events e) { events_ = std::move(e); }

 protected:
  topology_events events_;
};

/// One server: the config's host/port or unix socket.
std::unique_ptr<topology> make_standalone(asio::any_io_executor ex, const config& cfg);
/// A master found through the Sentinels of `cfg.sentinel`.
std::unique_ptr<topology> make_sentinel(asio::any_io_executor ex, const config& cfg);

}  // namespace redlease::detail
