// SPDX-License-Identifier: MIT
/// @file
/// A private `redis-server` child process: what `redlease demo` and `redlease bench` run against
/// when no `--redis` is given, and the core of the test harness's `redlease::test::redis_server`
/// (tests/support), which adds a raw client and the `REDLEASE_TEST_REDIS_SERVER` override.
///
/// Each `redis_server` runs its own redis-server on a free loopback port, without persistence, in a
/// private temporary directory, and can stop, kill, restart, pause and resume it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace redlease::local {

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
};

/// A redis-server child process listening on 127.0.0.1 (and optionally a unix socket).
///
/// The process is started by the constructor and stopped by the destructor. It is killed if the
/// thread that started it exits (PR_SET_PDEATHSIG), so start servers from a thread that outlives
/// them (e.g. the main thread), and at process exit (an `atexit` hook). Several objects may exist
/// at once; one object must not be used from several threads at the same time.
class redis_server {
 public:
  /// True if `binary` is found: a path, or a name looked up on PATH (then in /usr/local/bin,
  /// /usr/bin and /usr/sbin); empty means `redis-server`.
  static bool available(const std::string& binary = {});

  /// Starts `binary` (as for `available()`) on a free port and waits until it answers PING.
  /// Throws `std::runtime_error` (with the tail of the server's log) if it cannot be started.
  explicit redis_server(server_options opts = {}, const std::string& binary = {});
  /// Stops the server (SIGTERM, then SIGKILL after 5 s) and removes its temporary directory.
  /// Never throws.
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;
  redis_server(redis_server&&) = delete;
  redis_server& operator=(redis_server&&) = delete;

  /// The TCP port; stays the same across stop()/start().
  std::uint16_t port() const noexcept { return port_; }
  /// The TLS port (0 unless `server_options::tls.cert_file` is set); stays the same across
  /// stop()/start().
  std::uint16_t tls_port() const noexcept { return tls_port_; }
  /// "rediss://127.0.0.1:TLS_PORT" (with the password as in url()); "" without TLS.
  std::string tls_url() const;
  /// The address it listens on: "127.0.0.1".
  std::string host() const { return "127.0.0.1"; }
  /// The unix socket path, or "" if `server_options::unix_socket` is false.
  std::string unix_path() const;
  /// "redis://127.0.0.1:PORT", or "redis://:PASSWORD@127.0.0.1:PORT" with a password (verbatim,
  /// not percent-encoded).
  std::string url() const;
  /// The password it requires ("" for none).
  const std::string& password() const noexcept { return opts_.password; }
  /// The server's temporary directory (log file `redis.log`, stdout/stderr in `redis.out`, and
  /// the config file `redis.conf` if `server_options::config_lines` or `sentinel` is set).
  const std::string& dir() const noexcept { return dir_; }
  /// The child's process id, or -1 when it is not running.
  pid_t pid() const noexcept { return pid_; }
  /// True while the child process is running (also when paused).
  bool running() const noexcept { return pid_ > 0; }
  /// True between pause() and resume().
  bool paused() const noexcept { return paused_; }

  /// Stops the server gracefully: SIGCONT (in case it is paused), SIGTERM, wait; SIGKILL if it is
  /// still there after 5 s. No-op if not running.
  void stop();
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

 private:
  enum class spawn_result { ready, exited, foreign };

  spawn_result spawn(std::string& why);
  spawn_result wait_ready(std::string& why);
  void kill_and_reap() noexcept;
  void forget() noexcept;
  std::string log_tail() const;
  bool uses_config_file() const noexcept;
  std::string config_path() const;

  server_options opts_;
  std::string binary_;
  std::string dir_;
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  pid_t pid_ = -1;
  bool paused_ = false;
};

}  // namespace redlease::local
