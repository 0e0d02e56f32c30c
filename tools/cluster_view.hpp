// SPDX-License-Identifier: MIT
// A cluster as `status` and the counting subcommands' `status` read it: its layout and a client of
// each node, for what is not routed by a key (the subscribers each node counts, a master's SCAN).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster_nodes.hpp"
#include "redlease/redlease.hpp"

namespace redlease::cli {

/// A Redis Cluster's layout and a client of each of its nodes (`?cluster=no`, `c`'s credentials and
/// TLS). Thread-safety: one thread.
struct cluster_view {
  cluster_layout layout;
  std::vector<std::unique_ptr<client>> masters;  // as layout.masters
  std::vector<std::unique_ptr<client>> replicas;

  /// Clients of every master and replica of `l`, configured from `cfg`.
  cluster_view(const config& cfg, cluster_layout l);
  /// The client of the master `m` (from `layout.masters`), or nullptr for nullptr.
  client* master_client(const cluster_master* m);
};

/// The cluster behind `c` as a view, or nullptr when `c` does not route by slot (read_cluster()).
std::unique_ptr<cluster_view> read_cluster_view(client& c);

/// The subscribers of each of `channels`, in their order. Without a cluster (`cv` nullptr), what
/// `c`'s server counts. On a cluster a classic subscription counts on the node it was made on (any
/// node: a waiter subscribes where its client connects) and a sharded one (Redisson's SSUBSCRIBE,
/// Redis 7) on the slot's master (`home`), so every node is asked and the counts added; a replica
/// that does not answer counts none. Throws as lock_command() does for the lock `name`.
std::vector<long long> count_subscribers(client& c, const std::string& name, const std::vector<std::string>& channels,
                                         cluster_view* cv, const cluster_master* home);

}  // namespace redlease::cli
