// SPDX-License-Identifier: MIT
// The cluster topology's pub/sub (docs/cluster.md, "Pub/sub"): where each of the lock layer's
// channels is subscribed, and moving it when its slot moves. Sharded channels (SSUBSCRIBE) live on
// their slot's master, keyspace-event channels on their key's master, the others on one classic
// connection to any master. Runs on the client's executor only, except publish_command().
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>

#include "net/subscriber.hpp"
#include "redlease/config.hpp"

namespace redlease::detail {

class cluster_pubsub {
 public:
  /// What it asks of the topology.
  struct hooks {
    /// The master that serves `slot` now (while the slot is unknown: a seed that is up).
    std::function<node_address(std::uint16_t slot)> master_of;
    /// A refusal named the slot's new master (MOVED): the table may learn it at once.
    std::function<void(std::uint16_t slot, const node_address& to)> moved;
    /// A subscriber connection went down, or a channel moved: the table may be stale.
    std::function<void()> want_refresh;
  };

  cluster_pubsub(asio::any_io_executor ex, const config& cfg, hooks h);
  cluster_pubsub(const cluster_pubsub&) = delete;
  cluster_pubsub& operator=(const cluster_pubsub&) = delete;

  /// The classic connection (the client's own subscriptions, and every channel until the cluster is
  /// known, or in classic mode).
  subscriber& classic() noexcept { return sub_; }
  /// Adds `l` to `channel` where the channel should live now, and remembers where.
  subscriber* subscribe(const std::string& channel, channel_listener* l);
  /// Takes `l` off `channel` wherever it lives now. False if the channel is not one of the lock
  /// layer's (the caller removes it from `s` itself).
  bool unsubscribe(const std::string& channel, channel_listener* l);
  /// The cluster was detected: channels move to their masters from now on. `resolve` picks the
  /// classic connection's node at each connect.
  void on_cluster(std::function<void(connection::callbacks::resolved)> resolve);
  /// AUTO: probes `at` with PUBSUB SHARDNUMSUB within `cluster.probe_timeout` and goes sharded when
  /// it answers; on and off as configured. Once, when the cluster is first detected.
  void decide_sharded(connection& at);
  /// Moves every channel to where it should live now (after a new slot table).
  void rehome_all();
  /// "spublish" when the waiters listen on sharded channels, else "publish".
  /// Any thread: the facade encodes scripts on the caller's thread while the I/O thread decides.
  std::string_view publish_command() const noexcept {
    return sharded_.load(std::memory_order_relaxed) ? "spublish" : "publish";
  }
  void for_each_connection(const std::function<void(const connection&, bool)>& f) const;
  void close();

 private:
  struct home {
    subscriber* s = nullptr;
    std::vector<channel_listener*> listeners;
  };
  subscriber* wanted_sub(const std::string& channel);
  subscriber& node_sub(const node_address& a, bool sharded);
  void channel_moved(const std::string& channel, const std::string& why);
  void rehome(const std::string& channel, bool retry);

  asio::any_io_executor ex_;
  const config& cfg_;
  hooks hooks_;
  subscriber sub_;  // classic pub/sub (and the client's own subscriptions)
  std::unordered_map<std::string, std::unique_ptr<subscriber>> shard_subs_;     // by node, sharded mode
  std::unordered_map<std::string, std::unique_ptr<subscriber>> keyspace_subs_;  // by node, keyspace events
  std::unordered_map<std::string, home> homes_;  // the lock layer's channels, and where each lives
  asio::steady_timer probe_timer_;
  bool cluster_ = false;
  bool probed_ = false;
  std::atomic<bool> sharded_{false};
  bool closed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace redlease::detail
