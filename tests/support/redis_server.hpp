// SPDX-License-Identifier: MIT
/// @file
/// Real `redis-server` child processes for integration tests.
///
/// The process handling (a free loopback port, no persistence, a private temporary directory, the
/// readiness PING, the cleanup at exit) is `redlease::local::redis_server` (tools/local_server.hpp,
/// also what `redlease demo` and redlease-bench use). This rig adds what only tests need: passwords,
/// unix sockets, config files, Sentinel and TLS servers; stopping, killing, restarting, pausing
/// and resuming servers to simulate failures; and a raw client. The binary comes from the
/// environment variable `REDLEASE_TEST_REDIS_SERVER` (a path, or a name looked up on PATH) or else
/// `redis-server` on PATH.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "local_server.hpp"
#include "raw_client.hpp"

namespace redlease::test {

/// How to start a `redis_server`.
struct server_options {
  /// If non-empty, the server requires this password (`--requirepass`).
  std::string password;
  /// Extra command-line arguments appended verbatim, e.g. `{"--notify-keyspace-events", "Kgx"}`.
  std::vector<std::string> extra_args;
  /// Also listen on a unix socket in the server's temporary directory.
  bool unix_socket = true;
  /// If non-empty, these lines are written (once, by the constructor) to `redis.conf` in the
  /// server's temporary directory, and that file is the first argument of redis-server; the
  /// command-line options (port, dir, ...) come after it and override it.
  std::vector<std::string> config_lines;
  /// Run as a Sentinel: `redis-server <dir>/redis.conf --sentinel ...`, with the file written from
  /// `config_lines` as above (e.g. `sentinel monitor ...`). Sentinel rewrites that file, so its
  /// state (known replicas and Sentinels, epochs) survives stop()/start().
  bool sentinel = false;
  /// TLS: with `cert_file` set the server also listens for TLS on `redis_server::tls_port()` (the
  /// plain port stays, for the readiness PING and the raw client). PEM paths.
  struct tls_files {
    std::string cert_file;
    std::string key_file;
    std::string ca_file;        // the CA that client certificates must chain to
    bool auth_clients = false;  // require a client certificate (`--tls-auth-clients yes`)
  } tls{};  // (the initializer keeps `server_options{a, b, c}` free of -Wmissing-field-initializers)
  /// Cluster mode (`--cluster-enabled yes`, `nodes.conf` in the temporary directory, kept across
  /// stop()/start()), with the cluster bus on a second free port (`--cluster-port`, see
  /// `redis_server::bus_port()`), so that any data port works (the default bus port, port + 10000,
  /// does not exist above 55535).
  bool cluster = false;
};

/// A redis-server child process listening on 127.0.0.1 (and optionally a unix socket); see
/// `local::redis_server` for the lifecycle and its rules.
class redis_server : public local::redis_server {
 public:
  /// True if a redis-server binary is found (see the file comment).
  static bool available();

  /// Starts the server on a free port and waits until it answers PING. Throws
  /// `std::runtime_error` (with the tail of the server's log) if it cannot be started.
  explicit redis_server(server_options opts = {});

  /// The TLS port (0 unless `server_options::tls.cert_file` is set); stays the same across
  /// stop()/start().
  std::uint16_t tls_port() const noexcept { return tls_port_; }
  /// The cluster bus port (0 unless `server_options::cluster`); stays the same across stop()/start().
  std::uint16_t bus_port() const noexcept { return bus_port_; }
  /// "rediss://127.0.0.1:TLS_PORT" (with the password as in url()); "" without TLS.
  std::string tls_url() const;
  /// The unix socket path, or "" if `server_options::unix_socket` is false.
  std::string unix_path() const;
  /// The password it requires ("" for none).
  const std::string& password() const noexcept { return password_; }
  /// True between pause() and resume().
  bool paused() const noexcept { return paused_; }

  /// Kills the server with SIGKILL and reaps it (crash simulation). No-op if not running.
  void kill();
  /// Starts the server again on the same port after stop()/kill() and waits until it answers PING.
  /// No-op if running. Throws `std::runtime_error` on failure.
  void start();
  /// stop() then start(): the data is gone (no persistence).
  void restart();
  /// Freezes the server with SIGSTOP; returns once it is stopped. Connections stay open but
  /// nothing is answered. No-op if already paused or not running.
  void pause();
  /// Continues a paused server with SIGCONT. No-op if not paused.
  void resume();
  /// The last `max_bytes` of the server's log file (redis.log in dir()), or "" when it has none.
  /// Thread-safety: reads the file only; safe alongside the server's own writes.
  std::string redis_log_tail(std::size_t max_bytes) const;

  /// A new blocking raw client connected to the server over TCP, authenticated if a password is
  /// set. Throws `std::runtime_error` if it cannot connect.
  raw_client client() const;

 private:
  void pick_ports() override;
  std::vector<std::string> arguments() const override;
  bool uses_config_file() const noexcept;
  std::string config_path() const;

  server_options opts_;
  std::uint16_t tls_port_ = 0;
  std::uint16_t bus_port_ = 0;
};

/// Starts `n` independent servers with the same options.
std::vector<std::unique_ptr<redis_server>> start_servers(int n, server_options opts = {});

}  // namespace redlease::test
