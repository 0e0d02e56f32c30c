// SPDX-License-Identifier: MIT
/// @file
/// A Redis Sentinel deployment for integration tests: one master, one replica and N Sentinels
/// (default 3, quorum 2) monitoring the master, all `redis_server` children on loopback ports
/// (docs: /work/shared/reference/topologies.md §4.3, §4.5).
///
/// Measured on redis 7.0.15 with down-after 1000 ms and failover-timeout 5000 ms: the rig starts
/// in about 2.1 s (mostly Sentinels finding each other through their hello messages, sent every
/// 2 s), `SENTINEL FAILOVER` switches the master in about 1.1-1.2 s, a SIGSTOP'd master is
/// replaced after 2.2-3.3 s. Sentinel demotes the old master only about 10 s after the switch (or after SIGCONT):
/// until then it still answers `ROLE master` and accepts writes (a dual-master window).
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

/// How to start a `sentinel_rig`.
struct sentinel_rig_options {
  /// The name the Sentinels monitor the master under (`sentinel monitor <name> ...`).
  std::string master_name = "mymaster";
  /// The number of Sentinels (at least 1).
  int sentinels = 3;
  /// The quorum of `sentinel monitor`.
  int quorum = 2;
  /// `sentinel down-after-milliseconds`.
  std::chrono::milliseconds down_after{1000};
  /// `sentinel failover-timeout`.
  std::chrono::milliseconds failover_timeout{5000};
  /// If non-empty, the data nodes require this password (`requirepass`), use it to replicate
  /// (`masterauth`) and the Sentinels use it to talk to them (`sentinel auth-pass`).
  std::string password;
  /// If non-empty, the Sentinels require this password of their clients (`requirepass` in the
  /// Sentinel config; Sentinels also use it to authenticate to each other).
  std::string sentinel_password;
  /// Extra command-line arguments for both data nodes, appended verbatim.
  std::vector<std::string> extra_args;
  /// How long the constructor waits for the deployment to be ready.
  std::chrono::milliseconds start_timeout{15000};
};

/// One master, one replica (`--replicaof`) and `sentinels` Sentinels, ready for failovers.
///
/// The constructor returns once every Sentinel reports `SENTINEL CKQUORUM` OK, knows all the other
/// Sentinels and the replica (`SENTINEL REPLICAS` non-empty), and the replica reports
/// `master_link_status:up`. The destructor stops the Sentinels first, then the data nodes, and
/// never throws. Same threading rules as `redis_server`: create it on a thread that outlives it
/// and use it from one thread at a time.
///
/// "Master" and "replica" below are the Sentinels' view (`SENTINEL GET-MASTER-ADDR-BY-NAME`), not
/// the nodes' own `ROLE`: right after a switch the old master still claims to be master.
class sentinel_rig {
 public:
  /// The clock of the deadlines.
  using clock = std::chrono::steady_clock;

  /// True if a redis-server binary is found (see `redis_server::available()`).
  static bool available();

  /// Starts the master, the replica, waits for the replication link, starts the Sentinels and
  /// waits until they are ready (see the class comment), polling up to
  /// `sentinel_rig_options::start_timeout`. Throws `std::runtime_error` with what is missing and
  /// the tails of the servers' logs if that does not happen; everything started is stopped.
  explicit sentinel_rig(sentinel_rig_options opts = {});
  /// Stops the Sentinels, then the data nodes (paused ones too). Never throws.
  ~sentinel_rig();
  sentinel_rig(const sentinel_rig&) = delete;
  sentinel_rig& operator=(const sentinel_rig&) = delete;
  sentinel_rig(sentinel_rig&&) = delete;
  sentinel_rig& operator=(sentinel_rig&&) = delete;

  /// The options it was started with.
  const sentinel_rig_options& options() const noexcept { return opts_; }
  /// The monitored master's name.
  const std::string& master_name() const noexcept { return opts_.master_name; }
  /// The Sentinels' ports, in start order.
  std::vector<std::uint16_t> sentinel_ports() const;
  /// The two data nodes' ports: the initial master first, then the initial replica.
  std::vector<std::uint16_t> data_ports() const;

  /// The master's port according to the first Sentinel that answers `SENTINEL
  /// GET-MASTER-ADDR-BY-NAME` with an address. Throws `std::runtime_error` if none does.
  std::uint16_t current_master_port() const;
  /// The port each Sentinel reports for the master, in Sentinel order (0 where a Sentinel does
  /// not answer or has no address).
  std::vector<std::uint16_t> master_ports_by_sentinel() const;

  /// The data node listening on `port`. Throws `std::out_of_range` for any other port.
  redis_server& node(std::uint16_t port);
  /// The current master's data node (`node(current_master_port())`).
  redis_server& master();
  /// The data node that is not the current master.
  redis_server& replica();
  /// The `i`-th Sentinel's server. Throws `std::out_of_range`.
  redis_server& sentinel(std::size_t i);

  /// A raw client connected to the data node or Sentinel on `port`, authenticated with the
  /// matching password. Throws `std::out_of_range` for a port that is not part of the rig,
  /// `std::runtime_error` if it cannot connect.
  raw_client client(std::uint16_t port) const;
  /// A raw client of the `i`-th Sentinel (authenticated with the Sentinel password).
  raw_client sentinel_client(std::size_t i = 0) const;
  /// A raw client of the current master.
  raw_client master_client() const;
  /// A raw client of the data node that is not the current master.
  raw_client replica_client() const;

  /// Sends `SENTINEL FAILOVER <name>` (to the first Sentinel, retried while it answers an error
  /// such as INPROG or NOGOODSLAVE), then waits until every Sentinel reports the new master.
  /// Returns the new master's port. Throws `std::runtime_error` after `timeout`.
  std::uint16_t failover(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// Polls until every Sentinel reports the same master and it is not `old_port`; returns its
  /// port. Throws `std::runtime_error` (with each Sentinel's answer and log tails) at `deadline`.
  std::uint16_t wait_for_switch(std::uint16_t old_port, clock::time_point deadline) const;

  /// Freezes the current master with SIGSTOP (`redis_server::pause()`); returns its port.
  std::uint16_t pause_master();
  /// Continues the data node on `port` with SIGCONT (`redis_server::resume()`).
  void resume(std::uint16_t port);

  /// Runs `WAIT 1 <timeout>` on the current master; returns the number of replicas that
  /// acknowledged. Throws `std::runtime_error` if fewer than one did. Right after a switch the
  /// new master has no replica until Sentinel demotes the old master (~10 s), so this fails then.
  long long wait_replicated(std::chrono::milliseconds timeout = std::chrono::seconds(1)) const;

  /// Deletes `key` on the replica only, so that it is "not replicated": `CONFIG SET
  /// replica-read-only no`, `DEL key`, `CONFIG SET replica-read-only yes`. Returns true if the key
  /// existed on the replica. Call `wait_replicated()` first so the key reached the replica.
  bool drop_key_on_replica(std::string_view key);

  /// The tails of every server's log (Sentinels and data nodes), for failure messages.
  std::string log_tails() const;

 private:
  const redis_server* find(std::uint16_t port, bool& is_sentinel) const;
  std::uint16_t master_port_from(std::size_t sentinel) const;

  sentinel_rig_options opts_;
  // Declared before the Sentinels: members are destroyed in reverse order, so the Sentinels are
  // stopped first also when the constructor throws.
  std::vector<std::unique_ptr<redis_server>> data_;
  std::vector<std::unique_ptr<redis_server>> sentinels_;
};

}  // namespace redlease::test
