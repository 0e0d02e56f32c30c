// SPDX-License-Identifier: MIT
/// @file
/// A Redis Cluster for integration tests: 3 masters and 3 replicas, six `redis_server` children
/// (`server_options::cluster`) on free loopback ports, each in its own temporary directory with
/// its `nodes.conf`, `--save '' --appendonly no`, `--enable-debug-command local`,
/// `--cluster-node-timeout` 2000 ms by default, the cluster bus on a second free port
/// (`--cluster-port`). Recipes: the reference notes' topologies.md, §4.2, §4.5, §4.6.
///
/// The rig builds the cluster itself over raw connections, as `redis-cli --cluster create` does but
/// without its fixed sleeps: `CLUSTER ADDSLOTSRANGE` on the masters (0-5460, 5461-10922,
/// 10923-16383, like redis-cli), `CLUSTER SET-CONFIG-EPOCH` 1..6, `CLUSTER MEET` from the first
/// node to all the others and from each replica to its master, `CLUSTER REPLICATE` (node i+3
/// replicates master i), then, while a replica is missing from `CLUSTER SLOTS`, one write per
/// shard (a replica whose replication offset is 0 is left out of it: the gotcha of §4.2).
///
/// Two settings besides: `--repl-diskless-sync-delay 0` (no 5 s wait before a replica's first
/// sync) and `--repl-ping-replica-period 1` (a master PINGs its replicas every second instead of
/// every 10 s, so their offsets leave 0 before the cluster is even ok).
///
/// Measured on this machine (redis 7.0.15, 2 shared cores under load, node timeout 2000 ms;
/// cluster_rig_test prints them):
/// - start-up: 2.05-2.3 s, of which 2 s is redis' own: a master does not report
///   `cluster_state:ok` (and refuses writes) until 2 s after it started (CLUSTER_WRITABLE_DELAY),
///   however fast it was given its slots. (3.0 s when only the first node sent MEETs: a replica
///   then learnt of its master by gossip, ~1 s, before it could REPLICATE it.)
/// - `failover(replica)` (`CLUSTER FAILOVER`, the old master reachable): promoted and the cluster
///   ok everywhere in 45-80 ms; the old master is an attached replica 0.07-1 s later.
/// - `kill(master)` then `failover(replica, force)`: 60-160 ms; `restart(old master)`: back as an
///   attached replica of its successor in 0.1-1.1 s.
/// - `pause(master)` with no command: the replica is elected and the cluster ok everywhere after
///   3.6-4.9 s (node timeout 2 s, then the failure report and the election's random delay);
///   `resume()`: the old master turns replica and is attached within 0.02-1.1 s.
/// - The slot migration steps and the MOVED/ASK checks: a few ms each.
/// - cluster_rig_test (one rig, 7 tests): 8-10 s. It is one ctest test (`redlease_add_test(...
///   WHOLE ...)`): per-test processes would start a rig each (about 20 s in all).
///
/// TLS and hostnames (`cluster_rig_options::tls`, `announce_hostname`; cluster_tls_test prints
/// what it measures). Every node keeps its plaintext port, which the rig's raw clients use. Measured
/// with redis 7.0.15, a certificate with SAN DNS:localhost only, `announce_hostname` "localhost":
/// - `tls-cluster yes`: CLUSTER SLOTS names every node "localhost" with its TLS port to a TLS
///   client, and "localhost" with its plaintext port to a plaintext client (7.0 reports the other
///   port to a non-TLS client of a TLS cluster). A MOVED over TLS names the TLS port too
///   ("MOVED 3451 localhost:<TLS port>").
/// - `tls-cluster no`: every client, TLS or not, gets the plaintext ports, so a TLS-only client
///   cannot use such a cluster (redlease then fails with `errc::tls_not_offered_by_server`).
/// - `tls-cluster yes` needs `tls-replication yes`: a replica dials its master's announced port,
///   the TLS one; in plaintext it never attaches ("Master did not respond to command during SYNC
///   handshake", `master_link_status:down`).
/// - `tls-cluster yes` makes MIGRATE dial over TLS: to the plaintext port it answers "-IOERR error
///   or timeout connecting to the client" after its timeout, with the source node blocked
///   meanwhile; `migrate_keys()` gives it the TLS port.
/// - Start-up is as without TLS (the binary with its certificates: 2.5 s). A node whose hostname
///   has not reached another yet would be "?" in its CLUSTER SLOTS; `not_ready()` waits for that,
///   but it was never seen (the hostnames arrive with the handshakes, before `cluster_state:ok`).
/// - A TLS handshake the client aborts (a name mismatch) is not counted in the node's
///   `total_connections_received`.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "raw_client.hpp"
#include "redis_server.hpp"

namespace redlease::test {

/// How to start a `cluster_rig`.
struct cluster_rig_options {
  /// The number of masters (at least 1; 16384 slots split evenly, in port order).
  int masters = 3;
  /// The number of replicas of each master.
  int replicas_per_master = 1;
  /// `--cluster-node-timeout`.
  std::chrono::milliseconds node_timeout{2000};
  /// Extra command-line arguments for every node, appended verbatim.
  std::vector<std::string> extra_args;
  /// How long the constructor waits for the cluster to be ready.
  std::chrono::milliseconds start_timeout{20000};
  /// TLS on every node (off while `cert_file` is empty): each node also listens for TLS on
  /// `cluster_rig::tls_port()`, presenting `cert_file`; its plaintext port stays (the rig's raw
  /// clients use it). No client certificate is required (`--tls-auth-clients no`). PEM paths.
  struct tls_settings {
    std::string cert_file;
    std::string key_file;
    /// The CA the nodes trust (`--tls-ca-cert-file`), for the bus and replication links.
    std::string ca_file;
    /// `--tls-cluster`: the cluster bus and MIGRATE over TLS, and the node's TLS port as its
    /// announced port (see the file comment for what CLUSTER SLOTS then says to whom).
    bool cluster = true;
    /// `--tls-replication`: replicas connect to their master over TLS. Needed with `cluster`, since
    /// a replica then dials its master's announced (TLS) port.
    bool replication = true;
  } tls{};
  /// When non-empty: `--cluster-announce-hostname` this name and
  /// `--cluster-preferred-endpoint-type hostname` on every node, so that CLUSTER SLOTS (and
  /// MOVED/ASK) name the nodes by it; the rig is ready only once every node's CLUSTER SLOTS names
  /// every node by it (a node whose hostname has not arrived by gossip yet is "?").
  std::string announce_hostname;
};

/// A node as the cluster sees it (`CLUSTER NODES` of a live node).
struct cluster_node {
  std::uint16_t port = 0;
  /// "redis://127.0.0.1:PORT".
  std::string url;
  /// The 40-character node ID.
  std::string id;
  /// True for a master, false for a replica.
  bool master = false;
  /// A replica's master (0 for a master, or when its master is unknown).
  std::uint16_t master_port = 0;
  /// The flags column, e.g. "myself,master", "slave,fail".
  std::string flags;
};

/// A Redis Cluster ready for routing tests and failovers.
///
/// The constructor returns once the cluster is ready (see `wait_ready()`). The destructor stops
/// every node (paused ones too) and never throws. Nodes are named by their port everywhere. The
/// topology accessors ask a live node (running, not paused) each time, so they follow failovers and
/// migrations. Same threading rules as `redis_server`: create it on a thread that outlives it and
/// use it from one thread at a time.
class cluster_rig {
 public:
  /// The clock of the deadlines.
  using clock = std::chrono::steady_clock;

  /// True if a redis-server binary is found (see `redis_server::available()`).
  static bool available();

  /// Starts the nodes, builds the cluster and waits until it is ready, up to
  /// `cluster_rig_options::start_timeout`. Throws `std::runtime_error` with what is missing and
  /// the tails of the nodes' logs if that does not happen; everything started is stopped.
  explicit cluster_rig(cluster_rig_options opts = {});
  /// Stops every node. Never throws.
  ~cluster_rig();
  cluster_rig(const cluster_rig&) = delete;
  cluster_rig& operator=(const cluster_rig&) = delete;
  cluster_rig(cluster_rig&&) = delete;
  cluster_rig& operator=(cluster_rig&&) = delete;

  /// The options it was started with.
  const cluster_rig_options& options() const noexcept { return opts_; }
  /// Every node's port, in start order: the initial masters first, then their replicas (node
  /// `masters + i` replicates node `i % masters` at start).
  std::vector<std::uint16_t> ports() const;
  /// "redis://127.0.0.1:P1,redis://127.0.0.1:P2,..." for every node, in start order.
  std::string seed_urls() const;
  /// The node on `port`. Throws `std::out_of_range` for any other port.
  redis_server& node(std::uint16_t port);
  const redis_server& node(std::uint16_t port) const;
  /// The node ID of the node on `port` (fixed at start). Throws `std::out_of_range`.
  const std::string& id(std::uint16_t port) const;
  /// The port of the node with this ID. Throws `std::out_of_range`.
  std::uint16_t port_of_id(std::string_view id) const;
  /// True if the node is running and not paused.
  bool live(std::uint16_t port) const;
  /// The TLS port of the node on `port` (0 without `cluster_rig_options::tls`). Throws
  /// `std::out_of_range` for a port that is not part of the rig.
  std::uint16_t tls_port(std::uint16_t port) const;
  /// "rediss://HOST:TLS_PORT" of the node on `port` ("" without TLS).
  std::string tls_url(std::uint16_t port, std::string_view host = "localhost") const;
  /// The CA that signed the nodes' certificate (`cluster_rig_options::tls.ca_file`), for a
  /// client's `tls.ca_file`.
  const std::string& ca_file() const noexcept { return opts_.tls.ca_file; }

  /// Every node as a live node sees it (`CLUSTER NODES`), in start order. Throws
  /// `std::runtime_error` if no node answers.
  std::vector<cluster_node> nodes() const;
  /// The masters' ports according to `CLUSTER SLOTS` of a live node (those that own slots),
  /// in slot order.
  std::vector<std::uint16_t> masters() const;
  /// The node's own `ROLE` ("master" or "slave"). Throws `std::runtime_error` if it does not answer.
  std::string role(std::uint16_t port) const;

  /// The hash slot of `key`, as `CLUSTER KEYSLOT` on a live node computes it.
  int slot_of(std::string_view key) const;
  /// The port of the master owning `slot` in `CLUSTER SLOTS` of a live node. Throws
  /// `std::runtime_error` if none reports an owner.
  std::uint16_t master_of_slot(int slot) const;
  /// `master_of_slot(slot_of(key))`.
  std::uint16_t master_of(std::string_view key) const;
  /// The first replica listed for `master_port`'s slots in `CLUSTER SLOTS` of a live node, else
  /// the first node whose `CLUSTER NODES` line says it replicates it. Throws `std::runtime_error`
  /// if it has none.
  std::uint16_t replica_of(std::uint16_t master_port) const;
  /// A master that does not own `slot` (for MOVED tests).
  std::uint16_t other_master(int slot) const;

  /// A raw client of the node on `port`. Throws `std::out_of_range` for a port that is not part of
  /// the rig, `std::runtime_error` if it cannot connect.
  raw_client client(std::uint16_t port) const;

  /// Freezes the node with SIGSTOP.
  void pause(std::uint16_t port);
  /// Continues it with SIGCONT.
  void resume(std::uint16_t port);
  /// Kills the node with SIGKILL (a crash: its data is gone, its nodes.conf stays).
  void kill(std::uint16_t port);
  /// Starts a stopped or killed node again on the same port with the same nodes.conf (and stops it
  /// first if it runs). It rejoins with its old view; a master that was replaced turns replica of
  /// its successor. Does not wait for that: see `wait_ready()`.
  void restart(std::uint16_t port);

  /// How `failover()` asks.
  enum class failover_mode { graceful, force, takeover };
  /// Sends `CLUSTER FAILOVER [FORCE|TAKEOVER]` to the replica on `replica_port` (retried while it
  /// answers an error), then waits until its `ROLE` is master and every live node reports
  /// `cluster_state:ok` and agrees that it owns its slots. Returns the port of its old master.
  /// A graceful one first waits for the replica's link to its master, and is asked again when an
  /// attempt lapsed (6 s). Throws `std::runtime_error` after `timeout`.
  std::uint16_t failover(std::uint16_t replica_port, failover_mode mode = failover_mode::graceful,
                         std::chrono::milliseconds timeout = std::chrono::seconds(20));
  /// Polls until `port`'s `ROLE` is master, every live node reports `cluster_state:ok` and the
  /// same masters of all 16384 slots, and `port` is one of them; throws at `deadline`.
  void wait_promoted(std::uint16_t port, clock::time_point deadline) const;

  /// Steps of a slot migration (§4.6), so that a test can stop in between:
  /// `CLUSTER SETSLOT <slot> IMPORTING <from-id>` on `to`, then `MIGRATING <to-id>` on `from`.
  /// From here a missing key of the slot gets `ASK` on `from`.
  void migrate_begin(int slot, std::uint16_t from, std::uint16_t to);
  /// `MIGRATE 127.0.0.1 <to> "" 0 5000 KEYS ...` of these keys on `from` (`to`'s TLS port with
  /// `tls.cluster`: MIGRATE then dials over TLS). Throws on an error reply.
  void migrate_keys(std::uint16_t from, std::uint16_t to, const std::vector<std::string>& keys);
  /// Moves every key of `slot` (`CLUSTER GETKEYSINSLOT`) from `from` to `to`; returns how many.
  std::size_t migrate_all_keys(int slot, std::uint16_t from, std::uint16_t to);
  /// `CLUSTER SETSLOT <slot> NODE <to-id>` on `to`, `from`, then every other live master, and waits
  /// until every live node's `CLUSTER SLOTS` names `to` as the owner. From here `from` answers
  /// `MOVED`.
  void migrate_end(int slot, std::uint16_t from, std::uint16_t to,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// All three steps.
  void migrate_slot(int slot, std::uint16_t from, std::uint16_t to);

  /// What keeps the cluster from being ready, or "" when it is: every live node answers, reports
  /// `cluster_state:ok` and the same `CLUSTER SLOTS` covering all 16384 slots, every live replica
  /// reports `master_link_status:up`, and every live node appears in every live node's
  /// `CLUSTER SLOTS` (every live replica is attached and has replicated something), which, with
  /// `cluster_rig_options::announce_hostname`, names every node by that hostname.
  std::string not_ready() const;
  /// Polls `not_ready()` until it is "", writing one key per master (`cluster-rig-warm-up-<n>`,
  /// value "1", at most every 100 ms) whenever a replica is missing (the §4.2 gotcha). Throws `std::runtime_error` with what is missing and the log tails after
  /// `timeout`.
  void wait_ready(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  /// The tails of every node's log, for failure messages.
  std::string log_tails() const;

 private:
  std::size_t index(std::uint16_t port) const;
  // A live node's client, trying each in start order; throws if none answers.
  raw_client any_live_client() const;
  // `CLUSTER SLOTS` of a live node.
  raw_reply slots() const;
  void warm_up() const;
  std::string views(bool with_replicas, bool& agreed) const;

  cluster_rig_options opts_;
  std::vector<std::unique_ptr<redis_server>> nodes_;
  std::vector<std::string> ids_;
};

}  // namespace redlease::test
