// SPDX-License-Identifier: MIT
// The cluster's slot table and the words of its nodes, without I/O (unit-tested without a server):
// the table built from a CLUSTER SLOTS reply, the rule for replacing it, MOVED/ASK redirects and the
// other cluster error replies. The cluster topology (not built yet, docs/cluster.md) will drive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "net/connection.hpp"
#include "redlease/reply.hpp"
#include "topology/cluster_slot.hpp"

namespace redlease::detail {

/// A node of the cluster as CLUSTER SLOTS names it. Its identity is `address` (host:port, the host
/// kept as given: an IPv4 or IPv6 literal without brackets, or a hostname); `id` is the node id
/// (40 hex digits; empty when the server did not send one). A plain value; not synchronised.
struct cluster_node {
  /// Where to connect: the host as announced (or the answering node's, for `""`/`"?"`), and the port.
  node_address address;
  /// The node id, or empty.
  std::string id;
};

/// One slot range of a CLUSTER SLOTS reply: `first`…`last` (inclusive) served by the master at
/// index `master` of `cluster_map::nodes()`, with its replicas (indexes too; recorded for later,
/// never used for routing). A plain value; not synchronised.
struct cluster_slot_range {
  /// The first slot of the range.
  std::uint16_t first = 0;
  /// The last slot of the range (inclusive).
  std::uint16_t last = 0;
  /// The master's index in `cluster_map::nodes()`.
  std::size_t master = 0;
  /// The replicas' indexes in `cluster_map::nodes()` (those with port 0 left out).
  std::vector<std::size_t> replicas;
};

/// The slot table: which master serves each of the 16384 slots. Built from CLUSTER SLOTS
/// (`parse_cluster_slots`), patched one slot at a time by MOVED (`patch`). A value type (copying it
/// copies the 32 KiB table); not synchronised: one owner (the topology's executor) uses it.
class cluster_map {
 public:
  /// The table entry of a slot no master serves.
  static constexpr std::uint16_t no_node = 0xFFFF;
  /// At most this many distinct nodes (masters and replicas) in one map; more is a malformed reply.
  static constexpr std::size_t max_nodes = 4096;

  /// An empty map: no node, no slot covered.
  cluster_map();

  /// The master serving `slot` (< 16384), or null when none does (uncovered, or out of range).
  const cluster_node* owner(std::uint16_t slot) const noexcept;
  /// The nodes the map knows (masters and replicas), each once.
  const std::vector<cluster_node>& nodes() const noexcept { return nodes_; }
  /// The slot ranges as CLUSTER SLOTS gave them (ranges whose master has no usable port left out;
  /// `patch` does not update them).
  const std::vector<cluster_slot_range>& ranges() const noexcept { return ranges_; }
  /// How many slots have a master.
  std::size_t covered() const noexcept { return covered_; }
  /// Whether every slot has a master.
  bool covers_all() const noexcept { return covered_ == cluster_slot_count; }
  /// Index in nodes() of the node at `a`, if the map knows it.
  std::optional<std::size_t> find(const node_address& a) const noexcept;
  /// MOVED: `slot` is now served by the node at `a` (added to nodes() when new, unless the map
  /// already holds max_nodes). Returns false, changing nothing, for a slot ≥ 16384, a port 0, or a
  /// full node list.
  bool patch(std::uint16_t slot, const node_address& a);

 private:
  friend struct cluster_map_builder;
  std::size_t add(const node_address& a, std::string_view id);

  std::vector<cluster_node> nodes_;
  std::vector<std::uint16_t> table_;  // cluster_slot_count entries: index in nodes_, or no_node
  std::vector<cluster_slot_range> ranges_;
  std::size_t covered_ = 0;
};

/// What `parse_cluster_slots` made of a reply.
struct cluster_map_result {
  /// Clear: `map` holds the table (which may still cover few or no slots). `errc::bad_reply` for a malformed reply (wrong types, start >
  /// end, a slot ≥ 16384, a negative number, a port > 65535, overlapping ranges, more than
  /// cluster_map::max_nodes nodes); the server's code (`error_from_reply_text`) for an error reply.
  std::error_code ec;
  /// What was wrong (for messages), or notes about a usable reply ("slots 0-5460: master
  /// 10.0.0.1 has port 0"); empty otherwise.
  std::string text;
  /// The table; empty when `ec` is set.
  cluster_map map;
};

/// Builds the slot table from a CLUSTER SLOTS reply: `[[start, end, [host, port, id, {meta}],
/// replica…]…]`. Fields after the third of a node, and after the master of a range only replicas,
/// are ignored. A host `""` or `"?"` (the node does not know its address, or announces "unknown
/// endpoint") means the host the reply came from: `from_host`. A node with port 0 has no usable
/// port for us (a TLS-only cluster answering a plaintext client): as a master its slots stay
/// uncovered, as a replica it is left out. Never allocates by a size the peer states (only by the
/// number of elements it sent, which the RESP reader bounds). Pure, thread-safe.
cluster_map_result parse_cluster_slots(const reply& r, std::string_view from_host);

/// Whether a freshly loaded map may replace the current one. It may, except when the current map
/// covers every slot and the new one covers fewer (a node that answered while it lost track of part
/// of the cluster: Redisson/Lettuce `checkSlotsCoverage`), or the new one covers no slot while the
/// current one covers some. The caller keeps the current map and tries another node. Pure.
bool accept_cluster_map(const cluster_map& current, const cluster_map& candidate) noexcept;

/// A redirect error reply: `MOVED <slot> <host>:<port>` or `ASK <slot> <host>:<port>`.
/// A plain value; not synchronised.
struct cluster_redirect {
  /// MOVED (the slot has moved for good) or ASK (ask that node, once, during a migration).
  enum class kind : std::uint8_t { moved, ask };
  /// Which of the two.
  kind type = kind::moved;
  /// The slot the server named (< 16384).
  std::uint16_t slot = 0;
  /// The node to ask (host without brackets).
  node_address node;
  /// Equal when every field is.
  bool operator==(const cluster_redirect&) const = default;
};

/// Parses a redirect error reply's text. The port follows the last colon (`MOVED 1 ::1:30001` is
/// host `::1`); `[::1]:30001` is accepted too (brackets dropped). An empty host (`MOVED 1 :30001`)
/// or `?` means the host of the node that answered: `from_host`. Nothing for any other error, or
/// a malformed redirect (slot ≥ 16384, port 0 or > 65535, trailing words). Pure, thread-safe.
std::optional<cluster_redirect> parse_cluster_redirect(std::string_view text, std::string_view from_host);

/// The cluster error replies a router acts on, by their first word.
enum class cluster_error : std::uint8_t {
  none,         ///< not one of these (hand the reply to the caller)
  moved,        ///< MOVED: the slot has another master
  ask,          ///< ASK: the key is being migrated; ask the target once
  tryagain,     ///< TRYAGAIN: multi-key request during a slot migration; retry the same node
  clusterdown,  ///< CLUSTERDOWN: the cluster is down or the slot unserved; refresh and retry
  loading,      ///< LOADING: the node is loading its dataset; retry later
  readonly,     ///< READONLY: a write reached a replica (a demoted master); refresh and retry
  masterdown,   ///< MASTERDOWN: a replica lost its master (replica-serve-stale-data no); retry
};
/// Classifies an error reply's text by its first word (`CLUSTERDOWN The cluster is down` →
/// clusterdown). Pure, thread-safe.
cluster_error classify_cluster_error(std::string_view text) noexcept;

}  // namespace redlease::detail
