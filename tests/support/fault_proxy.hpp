// SPDX-License-Identifier: MIT
/// @file
/// Fault injection for the chaos and soak tests.
///
/// - `fault_proxy`: a TCP proxy on 127.0.0.1 between a client and a redis-server that adds latency,
///   stalls traffic, resets connections, loses a reply, and blackholes or refuses new connections.
/// - `child_process`: a child process with pipes on stdin/stdout that a test can read line by line
///   (with a timeout), freeze (SIGSTOP), continue and kill.
///
/// Loopback only: the proxy binds and connects 127.0.0.1 and nothing else.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace redlease::test {

/// A TCP proxy on 127.0.0.1:<ephemeral port> forwarding to 127.0.0.1:<upstream port>.
///
/// One thread runs a poll() loop over every connection pair. Every control call is synchronous:
/// when it returns, the proxy loop has applied it (e.g. after `drop_all()` every connection that
/// existed is reset; after `stall(true)` not one more byte is forwarded). All members are
/// thread-safe.
class fault_proxy {
 public:
  using ms = std::chrono::milliseconds;

  /// Starts listening and the proxy thread. Throws `std::runtime_error` if it cannot listen.
  explicit fault_proxy(std::uint16_t upstream_port);
  /// Resets every connection and joins the thread. Never throws.
  ~fault_proxy();
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;

  /// The port clients connect to.
  std::uint16_t port() const noexcept { return port_; }
  /// The port it forwards to.
  std::uint16_t upstream_port() const noexcept { return upstream_; }

  /// Delays every chunk by `to_server` on its way up (client -> server) and `to_client` on its way
  /// down. Applies to bytes read from now on.
  void set_latency(ms to_server, ms to_client);
  /// The same latency both ways.
  void set_latency(ms both) { set_latency(both, both); }

  /// While stalled, bytes are still read from both sides (the peers see their writes succeed) and
  /// buffered, but nothing is forwarded in either direction. Un-stalling forwards the buffer.
  void stall(bool on);
  /// While on, the server's bytes for one connection (numbered from 0 in the order the proxy
  /// accepted them; see `accepted()`) are read and buffered but not passed to the client: its
  /// commands run, and their replies wait. Off forwards the buffer. Other connections go on.
  void hold_replies(std::uint64_t connection, bool on);
  /// Resets every current connection pair (SO_LINGER 0 then close: both peers see RST); bytes still
  /// buffered in the proxy are discarded. New connections are accepted as usual.
  void drop_all();
  /// Resets the client side of every current connection pair (the client sees RST) and keeps the
  /// server side until what the client had sent, still buffered or delayed here, is delivered: a
  /// middlebox that drops the client's connection while a request is on its way. The server runs it;
  /// its reply is discarded.
  void reset_clients();
  /// Arms a one-shot fault: the next chunk read from the server, on any connection, is discarded
  /// and that connection pair is reset. The command that produced it ran; its reply is lost.
  void lose_next_reply();
  /// While on, new connections are accepted but never connected upstream: their bytes are read and
  /// discarded and nothing ever comes back (a blackholed route). They stay open until `drop_all()`.
  void blackhole(bool on);
  /// While on, new connections are accepted and reset at once (a refused route).
  void refuse(bool on);

  /// Connection pairs currently forwarding.
  std::size_t connections() const noexcept { return live_.load(); }
  /// Blackholed connections currently held open.
  std::size_t blackholed() const noexcept { return holes_.load(); }
  /// Connections accepted so far (all modes).
  std::uint64_t accepted() const noexcept { return accepted_.load(); }
  /// Connection pairs reset by `drop_all()` or `lose_next_reply()`.
  std::uint64_t resets() const noexcept { return resets_.load(); }
  /// Replies discarded by `lose_next_reply()` (0 or 1 per call).
  std::uint64_t replies_lost() const noexcept { return replies_lost_.load(); }
  /// Bytes read from clients / from the server.
  std::uint64_t bytes_up() const noexcept { return bytes_up_.load(); }
  std::uint64_t bytes_down() const noexcept { return bytes_down_.load(); }
  /// Bytes forwarded to the server / to clients.
  std::uint64_t forwarded_up() const noexcept { return fwd_up_.load(); }
  std::uint64_t forwarded_down() const noexcept { return fwd_down_.load(); }

  /// Waits until `pred()` is true, re-evaluating it whenever the proxy loop changes a counter;
  /// false if `limit` passes first.
  bool wait_for(const std::function<bool()>& pred, ms limit);

 private:
  struct pair;
  struct command {
    enum kind { latency, stall, hold_replies, drop_all, reset_clients, lose_reply, blackhole, refuse, stop } what;
    long long a = 0, b = 0;
  };

  void run() noexcept;
  void apply(const command& c);
  void post(command c);
  void notify_changed();

  std::uint16_t upstream_ = 0;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<command> inbox_;
  std::uint64_t posted_ = 0, applied_ = 0;
  std::uint64_t changes_ = 0;
  bool exited_ = false;  // the loop has ended (under mu_)

  std::atomic<std::size_t> live_{0}, holes_{0};
  std::atomic<std::uint64_t> accepted_{0}, resets_{0}, replies_lost_{0};
  std::atomic<std::uint64_t> bytes_up_{0}, bytes_down_{0}, fwd_up_{0}, fwd_down_{0};

  // Loop thread only.
  std::vector<std::unique_ptr<pair>> pairs_;
  std::vector<int> holes_fds_;
  ms lat_up_{0}, lat_down_{0};
  std::set<std::uint64_t> held_;  // connections whose replies are held (hold_replies)
  bool stalled_ = false, lose_reply_ = false, blackhole_ = false, refuse_ = false, stop_ = false;

  std::thread thread_;
};

/// A child process (posix_spawn) with its stdin and stdout on pipes. The destructor kills
/// (SIGKILL, after SIGCONT) and reaps it if it is still running. Not thread-safe.
class child_process {
 public:
  using ms = std::chrono::milliseconds;

  /// Starts `argv[0]` with `argv`. Throws `std::runtime_error` if it cannot.
  explicit child_process(const std::vector<std::string>& argv);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  /// Writes `line` and a newline to its stdin. False if the pipe is closed.
  bool send(const std::string& line);
  /// Closes its stdin (EOF).
  void close_stdin();
  /// The next line of its stdout (without the newline), or nothing on timeout or EOF.
  std::optional<std::string> read_line(ms timeout);
  /// The first line starting with `prefix`: taken from the lines passed over earlier, else read
  /// (lines passed over are kept in `skipped()`); nothing on timeout or EOF.
  std::optional<std::string> read_line_starting(const std::string& prefix, ms timeout);
  /// Lines passed over by `read_line_starting`.
  const std::vector<std::string>& skipped() const noexcept { return skipped_; }

  /// SIGSTOP, and waits until the kernel reports it stopped. True on success.
  bool freeze();
  /// SIGCONT, and waits until the kernel reports it continued. True on success.
  bool thaw();
  /// SIGKILL and reap. Returns the wait status.
  int kill_now();
  /// Waits up to `timeout` for it to exit; its wait status, or nothing on timeout.
  std::optional<int> wait_exit(ms timeout);
  /// True until reaped.
  bool running() const noexcept { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buf_;
  bool eof_ = false;
  std::vector<std::string> skipped_;
};

}  // namespace redlease::test
