// SPDX-License-Identifier: MIT
/// @file
/// A private `redis-server` child process: what `redlease demo` and redlease-bench run against when
/// no `--redis` is given. It starts a redis-server on a free loopback port, without persistence, in
/// a private temporary directory, and stops it. That is all the installed CLI links.
///
/// The test harness's `redlease::test::redis_server` (tests/support/redis_server.hpp) builds on it
/// through the protected interface: passwords, unix sockets, config files, Sentinel, TLS, and
/// killing, pausing and restarting servers to simulate failures.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace redlease::local {

/// A redis-server child process listening on 127.0.0.1.
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
  explicit redis_server(const std::string& binary = {});
  /// Stops the server (SIGTERM, then SIGKILL after 5 s) and removes its temporary directory.
  /// Never throws.
  virtual ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;
  redis_server(redis_server&&) = delete;
  redis_server& operator=(redis_server&&) = delete;

  /// The TCP port.
  std::uint16_t port() const noexcept { return port_; }
  /// The address it listens on: "127.0.0.1".
  std::string host() const { return "127.0.0.1"; }
  /// "redis://127.0.0.1:PORT", or "redis://:PASSWORD@127.0.0.1:PORT" with a password (one a
  /// derived class sets; verbatim, not percent-encoded).
  std::string url() const;
  /// The server's temporary directory (log file `redis.log`, stdout/stderr in `redis.out`).
  const std::string& dir() const noexcept { return dir_; }
  /// The child's process id, or -1 when it is not running.
  pid_t pid() const noexcept { return pid_; }
  /// True while the child process is running.
  bool running() const noexcept { return pid_ > 0; }

  /// Stops the server gracefully: SIGCONT (in case it is paused), SIGTERM, wait; SIGKILL if it is
  /// still there after 5 s. No-op if not running.
  void stop();

 protected:
  /// For derived classes: finds the binary and makes the temporary directory, starts nothing; the
  /// derived constructor then calls `launch()`. Throws `std::runtime_error` if there is no binary.
  struct deferred {};
  redis_server(deferred, const std::string& binary);

  /// Starts the server with `arguments()` and waits until it answers PING (after AUTH with
  /// `password_`, if set), on a port picked by `pick_ports()` before each attempt (another process
  /// may take a free port before redis binds it); up to 10 attempts. On failure, removes the
  /// temporary directory and throws `std::runtime_error`.
  void launch();
  /// Picks the ports of the next attempt: `port_`, a free one. Derived classes may add theirs.
  virtual void pick_ports();
  /// The command line (without the binary): `base_arguments()` by default. Called at each start.
  virtual std::vector<std::string> arguments() const;
  /// The options every server gets: port, bind, no persistence, dir, log file, debug command on,
  /// protected mode off.
  std::vector<std::string> base_arguments() const;

  enum class spawn_result { ready, exited, foreign };
  /// One start on the current ports; `why` says why it is not ready.
  spawn_result spawn(std::string& why);
  /// SIGKILL and reap the child (no-op if not running). Never throws.
  void kill_and_reap() noexcept;
  /// The tails of the log and early output, for error messages ("" when empty).
  std::string log_tail() const;
  /// The last `max_bytes` of the file `name` in dir() ("" when there is none).
  std::string file_tail(const std::string& name, std::size_t max_bytes) const;
  /// Forgets the child (it ended): pid -1, not paused. Never throws.
  void forget() noexcept;

  std::string binary_;
  std::string dir_;
  std::string password_;  // AUTH before the readiness PING, and in url()
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool paused_ = false;   // the child is stopped (SIGSTOP): a derived class's pause()

 private:
  spawn_result wait_ready(std::string& why);
};

}  // namespace redlease::local
