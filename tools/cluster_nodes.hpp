// SPDX-License-Identifier: MIT
// What the CLI learns of a Redis Cluster through the public client: its masters and replicas
// (CLUSTER SLOTS), the slot of a name (CLUSTER KEYSLOT), and a client of one node, for what must
// run on a given node rather than be routed by a key (INFO, CONFIG GET, SCAN, PUBSUB NUMSUB).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlease/redlease.hpp"

namespace redlease::cli {

/// A node of the cluster as CLUSTER SLOTS names it.
struct cluster_node_address {
  std::string host;
  int port = 0;
  /// "host:port" ("[host]:port" for an IPv6 literal).
  std::string name() const;
};

/// A master of the cluster: its address, its slot ranges and its replicas.
struct cluster_master {
  cluster_node_address address;
  std::vector<std::pair<int, int>> ranges;  // first and last slot of each range it serves
  std::vector<cluster_node_address> replicas;
  /// How many slots its ranges hold.
  long long slots() const;
};

/// The cluster a client is connected to, from one CLUSTER SLOTS reply.
struct cluster_layout {
  std::vector<cluster_master> masters;  // in the order of their first range
  /// The slots some master serves (16384 when the cluster covers them all).
  long long covered() const;
  /// The master serving `slot`, or nullptr when none does.
  const cluster_master* master_of(int slot) const;
};

/// The cluster behind `c`, asked with CLUSTER SLOTS; empty when `c` does not route by slot: its
/// config says `?cluster=no`, or the server is not a cluster (or refuses the command, which makes
/// the library use it as one endpoint too).
std::optional<cluster_layout> read_cluster(client& c);

/// The hash slot of `key` (CLUSTER KEYSLOT, answered by any node). Throws for the lock `key` as
/// lock_command() does.
int slot_of(client& c, std::string_view key);

/// A client of the node `a` alone (`?cluster=no`), with `base`'s credentials, TLS and timings.
std::unique_ptr<client> node_client(const config& base, const cluster_node_address& a);

}  // namespace redlease::cli
