// SPDX-License-Identifier: MIT
/// @file
/// Client configuration and URL parsing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "redlease/event.hpp"

namespace redlease {

/// Something went wrong on the client's I/O thread that no caller can be told of: a user callback
/// threw, or the client noticed a fault it handled by itself (a dropped connection, a reply that is
/// not RESP). Passed to `config::on_error`.
struct background_error {
  /// Where: "completion handler", "on_lost callback", "subscribe callback", "connection", ...
  std::string_view source;
  /// The error, when there is one (empty for an exception a callback threw).
  std::error_code code;
  /// What happened, in words: the exception's `what()`, the server's or the parser's text.
  std::string message;
};

/// How a blocking call waits for its reply (`config::sync_wait`).
///
/// Under either policy, a blocking caller that is the client's only one, on a client with its own
/// I/O thread, writes its request itself on its own thread when the I/O thread is idle (counted in
/// `client_stats::direct_writes`), and on a plain (non-TLS) connection reads its reply itself on
/// the lane (`config::sync_lane`). A caller whose fellow blocking callers have no request out (they
/// wait for locks held elsewhere) also writes its own request when the I/O thread is idle, but
/// leaves the reply to the I/O thread. Otherwise the I/O thread writes it with the others, reads
/// the reply and wakes the caller once. Spinning is for a lone caller only: with several blocking
/// callers nobody spins.
enum class sync_wait_policy {
  /// The least latency for a sequential caller. On the lane it spins up to 1.5 times the lane's
  /// round trip (at most 200 us), then sleeps in poll(); without it, up to 1.5 times the recent
  /// round trip of blocking calls (at most 200 us), then sleeps until the I/O thread wakes it.
  latency_first,
  /// The least CPU per call. On the lane it spins up to 1.25 times the lane's round trip (at most
  /// 100 us; on a machine where a sleep and its wake-up cost more CPU than that), and stops spinning
  /// while replies keep coming later than that (a distant server), trying again one wait in eight.
  /// Without the lane it sleeps at once and is woken once by the I/O thread.
  cpu_first,
};

/// TLS settings of one kind of connection (the data nodes, or the Sentinels).
///
/// With `enabled`, every connection of that kind is TLS 1.2 or later and the server's certificate
/// is verified against a CA and the host name; a failure never falls back to plaintext.
/// docs/deployment.md ("TLS") lists the errors and what to change for each.
struct tls_options {
  /// Connect with TLS. `rediss://` sets it; a TLS request on a unix socket fails with
  /// `errc::tls_not_supported`.
  bool enabled = false;
  /// PEM file of the CA certificates to trust. With `ca_file` and `ca_dir` both empty, the
  /// system's default store (OpenSSL's default paths).
  std::string ca_file;
  /// Directory of CA certificates in OpenSSL's hashed layout (`openssl rehash`).
  std::string ca_dir;
  /// Client certificate, PEM, for servers that require one (`tls-auth-clients yes`, mutual TLS).
  std::string cert_file;
  /// The client certificate's private key, PEM (unencrypted).
  std::string key_file;
  /// Server name sent in the handshake (SNI). Empty: the host connected to, when it is a DNS name
  /// (an IP address is never sent as SNI).
  std::string sni;
  /// Verify the server's certificate against this name instead of the host connected to (e.g.
  /// `localhost` when connecting to 127.0.0.1 with a certificate naming only `localhost`).
  std::string verify_name;
  /// Skip certificate and host-name verification. Encrypts but does not authenticate the server:
  /// for tests only. Reported once through `config::on_error` at the first connection attempt.
  bool insecure = false;
};

/// The opt-in `prefix` label of the lock metrics (`config::metrics_prefix`): lock names are
/// unbounded, so the metrics never carry them; a prefix of each (its first `depth` segments) may be
/// counted apart, up to `max_prefixes` of them. A plain value type.
struct metrics_prefix_options {
  /// How many leading segments of a lock's name make its prefix ("orders:eu:42" with depth 1:
  /// "orders"; a name with fewer segments is its own prefix). 0 (the default): no prefix is counted.
  unsigned depth = 0;
  /// What separates the segments.
  char separator = ':';
  /// The most prefixes counted apart, in the order first seen; the later ones are counted together
  /// as `_other` (`lock_metrics::other_prefix`). From 1 to 10,000.
  std::size_t max_prefixes = 100;
};

/// A host and port (a Sentinel's address, a cluster seed). The default port is Sentinel's; set it for a seed.
struct host_port {
  /// Host name or address.
  std::string host;
  /// TCP port.
  std::uint16_t port = 26379;
};

/// Where the Sentinels of a Sentinel-managed master are, and how to talk to them. Their credentials
/// are their own: a Sentinel's `requirepass` is not the data nodes' password.
struct sentinel_options {
  /// The Sentinels to ask, in order; more are learnt from them (SENTINEL SENTINELS). Empty: the
  /// client talks to `config::host` directly (no Sentinel).
  std::vector<host_port> nodes;
  /// The master's name as the Sentinels monitor it (`sentinel monitor NAME ...`).
  std::string master_name;
  /// ACL user for the Sentinels; empty: `AUTH password`.
  std::string username;
  /// The Sentinels' password (their `requirepass`); empty: no AUTH.
  std::string password;
  /// Bound on connecting to one Sentinel and on one question to it: the next Sentinel is tried
  /// after it.
  std::chrono::milliseconds timeout{500};
  /// How often the master's address is asked again, besides listening to `+switch-master`: a
  /// switch that the subscription missed is seen within this interval. The list of Sentinels is
  /// asked for with it (Sentinels that have gone are forgotten, new ones learnt).
  std::chrono::milliseconds poll_interval{1000};
  /// TLS to the Sentinels (`rediss-sentinel://` enables it, and TLS to the data nodes too).
  tls_options tls;
};

/// Whether a client treats its server as a Redis Cluster (`cluster_options::mode`).
enum class cluster_mode : std::uint8_t {
  /// Detected: the client asks the first node it reaches (`CLUSTER SLOTS`); a server that reports
  /// no cluster support (or refuses the command) is used as one endpoint.
  automatic,
  /// Never: every request goes to the one endpoint (a cluster proxy, Envoy, a managed endpoint
  /// that routes by itself). URL: `?cluster=no`.
  off,
};

/// Which pub/sub a client uses for lock wake-ups in a Redis Cluster (`cluster_options::sharded_pubsub`).
enum class sharded_pubsub_mode : std::uint8_t {
  /// As Redisson's AUTO: sharded (`SSUBSCRIBE`/`SPUBLISH`, Redis 7+) when the cluster's nodes
  /// answer `PUBSUB SHARDNUMSUB` within `cluster_options::probe_timeout`, classic otherwise.
  automatic,
  /// Always sharded (Redis 7+). URL: `?sharded_pubsub=yes`.
  on,
  /// Always classic `SUBSCRIBE`/`PUBLISH`. URL: `?sharded_pubsub=no`.
  off,
};

/// How a client uses a Redis Cluster. Outside a cluster only `mode` matters.
struct cluster_options {
  /// Detect a cluster (the default), or never use one.
  cluster_mode mode = cluster_mode::automatic;
  /// More nodes to ask for the slot table, after `config::host`/`config::port` (`redis://h1:p1,h2:p2`
  /// puts h2 here): discovery starts while any one of them answers.
  std::vector<host_port> seeds;
  /// Sharded or classic pub/sub for wake-ups (see `sharded_pubsub_mode`); it must match what the
  /// other clients of the same locks use (Redisson's `shardedSubscriptionMode`).
  sharded_pubsub_mode sharded_pubsub = sharded_pubsub_mode::automatic;
  /// How often the slot table is asked for again without a reason (MOVED, a lost connection and
  /// CLUSTERDOWN ask at once, at most one refresh per 200 ms).
  std::chrono::milliseconds refresh_interval{5000};
  /// Bound on the probe that decides `sharded_pubsub_mode::automatic` (a probe that hung on a
  /// managed cluster: Redisson's #6646).
  std::chrono::milliseconds probe_timeout{1000};
};

/// Replica acknowledgement: every acquisition, renewal and release script is followed, in the same
/// write, by `WAIT replicas timeout` (Redisson's `checkLockSyncedSlaves`).
struct replica_ack_options {
  /// Replicas that must acknowledge. -1 (the default): 1 while a Sentinel-managed master's ROLE
  /// lists a replica online (read at connection and at every `sentinel.poll_interval`, if not 0; 1
  /// when ROLE is refused), none otherwise (a standalone server's replicas are not promoted by
  /// anyone, so waiting for them buys a lock nothing). 0: never WAIT.
  int replicas = -1;
  /// How long WAIT may wait. WAIT holds up the connection's later commands while it waits, so this
  /// is short: healthy replicas acknowledge in well under a millisecond on a LAN. At least 1 ms:
  /// Redis reads `WAIT n 0` as "wait for ever", which would stall the connection while a replica is
  /// down.
  std::chrono::milliseconds timeout{500};
  /// An acquisition that fewer replicas acknowledged is always rolled back. Then: true, retry it
  /// within the acquisition's wait like any transient refusal (the acquisition fails with
  /// `errc::not_replicated` if its wait runs out first); false, fail with `errc::not_replicated`.
  bool retry = true;
};


/// How and where a `client` connects, and the timing of its locks.
///
/// A plain value type; copy it freely. `from_url` fills the address and credentials; the timing
/// fields keep their defaults unless set.
struct config {
  /// Host name or address for TCP (ignored when `unix_socket` is set).
  std::string host = "127.0.0.1";
  /// TCP port.
  std::uint16_t port = 6379;
  /// Path of a Unix-domain socket; when non-empty it is used instead of host/port.
  std::string unix_socket;
  /// ACL user for `AUTH user password`; empty means `AUTH password` (the default user).
  std::string username;
  /// Password; empty means no AUTH.
  std::string password;
  /// Database number to SELECT after connecting (0 is not selected explicitly).
  int database = 0;
  /// Name set with CLIENT SETNAME on every connection (visible in CLIENT LIST); empty: none.
  std::string client_name = "redlease";
  /// Keep a description of this client in Redis, its *card* (`redlease/client_card.hpp`): host,
  /// pid, program, `client_name` and the write locks it waits for, in the hash
  /// `redlease:client:{<client id>}`, expiring, so that `redlease status` can say who a holder is.
  /// It costs one script call before the client's first acquisition and about one per half TTL
  /// while it holds or waits (none per lock). False: no card (its holders show as undescribed).
  bool client_card = true;

  /// Bound on one connection attempt (resolve + connect + TLS handshake + Redis handshake).
  std::chrono::milliseconds connect_timeout{2000};
  /// Bound on every request, from the moment it is issued to its reply.
  std::chrono::milliseconds request_timeout{5000};
  /// How long `client::close()` (and the destructor) lets what the client has already sent or
  /// queued be answered before it closes the connections: an unlock on its way, the give-up of a
  /// fair-lock waiter that the close ends (else it blocks the queue until its deadline, up to
  /// `queue_allowance`), the undo of a grant that the close came too late for. It ends as soon as
  /// nothing is left to answer, and no request waits past its own `request_timeout`. 0: close at
  /// once, failing all of it with `client_closed`. Not used with a user executor, whose client
  /// closes at once.
  std::chrono::milliseconds close_timeout{1000};
  /// First delay before reconnecting; it doubles per failed attempt, with jitter, up to the max.
  std::chrono::milliseconds reconnect_min_delay{50};
  /// Upper bound of the reconnect delay.
  std::chrono::milliseconds reconnect_max_delay{2000};

  /// How often the idle pub/sub connection is PINGed; a PING unanswered within `request_timeout`
  /// drops it, and it reconnects and resubscribes (waiters then retry at once). 0 disables it.
  std::chrono::milliseconds health_check_interval{3000};

  /// Lease of locks taken without an explicit lease; they are renewed every third of it
  /// (Redisson's `lockWatchdogTimeout`, default 30 s).
  std::chrono::milliseconds watchdog_timeout{30000};
  /// Most keys renewed by one script call of the watchdog (Redisson: 100).
  std::size_t watchdog_batch_size = 256;
  /// A mutex waiter whose holder may not publish on release (another library) re-checks at least
  /// this often; of one client's waiters on one mutex, only the longest-waiting does (the others
  /// wait for its release's message). Not used while keyspace notifications deliver the key's
  /// del/expired events. The
  /// head of a fair lock's queue re-checks this often too; a waiter behind it every ten of these,
  /// at most a third of its queue allowance and of its lease (docs/lock-kinds.md). So does a waiter
  /// for either side of a read-write lock (Redisson's downgrade and delete() publish nothing).
  std::chrono::milliseconds mutex_poll_cap{100};
  /// How long a waiter queued for a fair lock keeps its place after each of its calls: the
  /// allowance it declares in the queue (Redisson's `fairLockWaitTimeout`, 300 s), or its own wait
  /// when that is shorter. A live waiter calls again at least three times within it, so this does
  /// not end a live wait; it bounds how long a waiter whose process died (or that lost its server)
  /// blocks the queue once it reaches the head: its holder's remaining lease when it queued, plus
  /// this. Redisson's waiters do not call again, so it must use 300 s. Also the clock skew between
  /// clients that the queue tolerates (its deadlines are client epoch ms). Clamped to
  /// [max(1 s, 3 * mutex_poll_cap), 300 s].
  std::chrono::milliseconds queue_allowance{30000};

  /// How blocking calls wait for their reply (see `sync_wait_policy`).
  sync_wait_policy sync_wait = sync_wait_policy::latency_first;

  /// A client with its own I/O thread keeps a second command connection per node (the *lane*) for
  /// its only blocking caller: that caller writes its request and reads its reply on its own thread,
  /// and the I/O thread is not woken at all. Opened at the first such call, handshaken like the main
  /// connection (same credentials, database and master check), re-opened after a reconnect or a
  /// failover, and counted in `client_stats::lane_requests`. Not used over TLS, with a user
  /// executor, or while several threads make blocking calls. False: no second connection.
  /// Requests on the lane and on the main connection are not ordered against each other: a call
  /// goes on the lane only while the main connection is idle, and a watchdog renewal that runs
  /// after an unlock on the lane (and finds the lock gone) waits for that unlock's verdict.
  bool sync_lane = true;

  /// Most aggregate levels one reply may nest; a deeper reply is a protocol error (the connection is
  /// dropped and re-established, its requests fail with `errc::protocol_error`). At most
  /// `max_reply_depth_limit`.
  std::size_t max_reply_depth = 64;
  /// The largest `max_reply_depth` accepted: nothing Redis sends nests more than a few levels, and a
  /// decoded reply is freed recursively, one stack frame per level.
  static constexpr std::size_t max_reply_depth_limit = 1024;
  /// Most elements one reply may have, all levels together (about 80 bytes each once decoded): a
  /// bound on what a peer can make the client allocate. Memory otherwise follows the bytes received:
  /// a declared length is never allocated before its elements arrive.
  std::size_t max_reply_elements = std::size_t{1} << 22;

  /// Told, on the client's I/O thread, of what went wrong there with no caller to report it to (see
  /// `background_error`). The I/O thread and the connections keep running either way. Empty (the
  /// default): one line on stderr. It must not block; an exception it throws is ignored.
  std::function<void(const background_error&)> on_error;

  /// Told of what happens to this client's locks (acquired, released, a renewal that failed, a
  /// loss, a failover), for logging and tracing. Called on the client's I/O thread, or on a blocking
  /// caller's thread while that caller stands in for it, like `on_lost`; never at the same time as
  /// the client's other handlers. It must not block (blocking calls there fail with
  /// `errc::would_deadlock`); an exception it throws is reported through `on_error` and affects
  /// nothing else. Empty (the default): nothing is built for it.
  std::function<void(const lock_event&)> on_event;

  /// Whether the client counts its lock metrics (`client_stats::locks`): relaxed atomic counters and
  /// fixed-bucket histograms, cheap enough to stay on. False leaves them at zero (a benchmark
  /// measures what they cost with it).
  bool metrics = true;
  /// Also count the lock metrics by name prefix (`lock_metrics::by_prefix`, the Prometheus families
  /// `redlease_lock_prefix_*`), within a cap: off by default (see `metrics_prefix_options`).
  metrics_prefix_options metrics_prefix;

  /// The longest a watchdog hold may last: once this long after its grant, the watchdog stops
  /// renewing it and its holder is told as of a loss (`lost_reason::max_hold`, cause
  /// `errc::max_hold_exceeded`); the key then expires within one watchdog timeout unless released.
  /// Zero (the default): no cap. At most `max_duration`.
  std::chrono::milliseconds max_hold{0};

  /// A Sentinel-managed master (`redis-sentinel://` URLs fill it). With Sentinels set, `host` and
  /// `port` are ignored: the master's address is asked of the Sentinels before every connection.
  sentinel_options sentinel;
  /// Replica acknowledgement of lock writes (see `replica_ack_options`).
  replica_ack_options replica_ack;
  /// Redis Cluster: detection, more seeds, pub/sub mode (see `cluster_options`). Ignored with
  /// Sentinels or a Unix socket.
  cluster_options cluster;

  /// Parses `redis://[user:password@]host[:port][,host[:port]...][/db][?params]`, `rediss://...`
  /// (the same with TLS: sets `tls.enabled`), `unix:///path.sock[?db=N]` or `redis+unix://`, and a
  /// Sentinel-managed master: `redis-sentinel://[user:password@]s1[:port][,s2[:port]...][/db]?master=NAME`
  /// (port 26379 by default; fills `sentinel.nodes` and `sentinel.master_name`, which is required; the
  /// credentials are the data nodes') or `rediss-sentinel://...` (TLS to the Sentinels and the data
  /// nodes). In `redis://` and `rediss://` every port defaults to 6379; the first host fills `host`
  /// and `port`, the others `cluster.seeds` (IPv6 literals in brackets; several hosts require
  /// database 0, a Redis Cluster's only one); `params`, joined with `&`, are `db=N`,
  /// `cluster=auto|yes|no` (`no`: `cluster_mode::off`, with one host only; `yes` is `auto`) and
  /// `sharded_pubsub=auto|yes|no` (`cluster.sharded_pubsub`). User and password are percent-decoded.
  /// A user part without a colon, `redis://app@host`, is the ACL user's name (Redis 6+), as redis-py
  /// and node-redis read it: set `password` yourself then; `redis://:password@host` is a password
  /// alone. Timing and TLS file fields keep their defaults.
  /// @throws redlease::error with `errc::invalid_url`, whose message quotes the URL without its user
  /// and password and says what is wrong with it: `invalid Redis URL "redsi://h": unknown scheme
  /// 'redsi' (the schemes are redis://, ...)`, "missing host", "no scheme", a bad port or database,
  /// an empty host in a list, an unknown query parameter or value.
  static config from_url(std::string_view url);
  /// As above; on failure sets `ec` and `last_error_text()` (what is wrong with the URL) and returns
  /// a default config.
  static config from_url(std::string_view url, std::error_code& ec);

  /// The address as a URL without the password, for messages and logs (`rediss://` with TLS; the
  /// cluster seeds after the host, `cluster=no` and `sharded_pubsub=` when not the defaults).
  /// `from_url` reads it back to the same hosts, ports and cluster modes.
  std::string redacted_url() const;

  /// Empty when every timing and limit is in range; otherwise what is wrong with the first one that
  /// is not, e.g. "reconnect_min_delay must be at least 1 ms (it is -50 ms)". Durations must be
  /// positive (`close_timeout`, `health_check_interval` and `sentinel.poll_interval` may be 0) and
  /// at most 2^40 ms (about 34 years, the longest lease or wait; `mutex_poll_cap` a sixteenth of it), so that
  /// `milliseconds::max()` is refused rather than overflowing the clock; `watchdog_timeout` at least
  /// 100 ms, `reconnect_max_delay` at least `reconnect_min_delay`, the batch and reply limits at
  /// least 1, and `max_reply_depth` at most `max_reply_depth_limit`; every `cluster.seeds` entry
  /// needs a host and a port (e.g. "cluster.seeds[1]: the port must be from 1 to 65535 (it is 0)").
  /// The client constructor checks it. Thread-safe on a config nobody modifies.
  std::string invalid_setting() const;

  /// TLS for the data connections (the command and pub/sub connections). Off unless `rediss://`
  /// or set here.
  tls_options tls;
};

}  // namespace redlease
