// SPDX-License-Identifier: MIT
// What both soak contenders do once they hold the lock (soak_test's threads and soak_worker's), and
// the record each appends for the checker: one definition, so the two cannot drift apart.
//
// Record: S <lock> <holder> <start_ns> <end_ns> <valid_until_ns> <valid 0|1> <unlock result> <depth>
//           <1 if an unlock failed with request_timeout and was retried, else 0>
// on CLOCK_MONOTONIC (steady_clock), which every process shares.
//
// The fencing soak (fencing_soak_test, soak_worker's "fenced" mode) appends one record per grant
// and the write its holder then made through the resource's token check (`fenced_write`):
//   W <lock> <holder> <token> <requested_ns> <acquired_ns> <write_sent_ns> <write_done_ns>
//     <accepted|refused|err:<code>> <late 0|1>
#pragma once

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>

#include "redlease/redlease.hpp"

namespace redlease::soak {

using steady = std::chrono::steady_clock;

/// Writes `s` and a newline; one write(2) in practice, so that O_APPEND keeps records whole.
inline void write_line(int fd, const std::string& s) {
  std::string line = s + "\n";
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

/// ok, lock_lost, not_owner, or err:<code>.
inline std::string result_name(std::error_code ec) {
  if (!ec) return "ok";
  if (ec == errc::lock_lost) return "lock_lost";
  if (ec == errc::not_owner) return "not_owner";
  return "err:" + std::to_string(ec.value());
}

/// Errors after which a contender tries again.
inline bool transient(std::error_code ec) {
  return ec == errc::request_timeout || ec == errc::connection_lost || ec == errc::connect_failed ||
         ec == errc::connect_timeout || ec == errc::server_busy;
}

inline long long ns(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

/// One critical section as its holder saw it.
struct held_section {
  steady::time_point start, stop, valid_until;
  bool valid = false;
  std::error_code unlock;  // the outer unlock's result
  int depth = 1;
  bool unlock_timed_out = false;  // an unlock was retried after request_timeout
  bool told() const { return !valid || unlock == errc::lock_lost; }
};

/// Right after a successful try_lock: a short section (a quarter of the reentrant ones re-entered),
/// valid() and valid_until(), then unlock, each unlock retried up to three times on transient errors,
/// and on until `patience` has passed since the first try (a cluster is down, and its masters answer
/// CLUSTERDOWN, until a frozen master's replica is elected: seconds under the sanitizers).
inline held_section critical_section(detail::lock_handle& l, bool reentrant, std::minstd_rand& rng,
                                     std::chrono::milliseconds patience = {}) {
  using std::chrono::milliseconds;
  held_section s;
  // Retries an unlock while its error is transient, at least three tries, then until `patience`.
  auto unlock = [&](std::error_code& out) {
    const auto first = steady::now();
    for (int i = 0;; ++i) {
      l.unlock(out);
      if (!transient(out)) return;
      if (out == errc::request_timeout) s.unlock_timed_out = true;
      if (i >= 2 && steady::now() - first >= patience) return;
    }
  };
  s.start = steady::now();
  std::error_code ec;
  if (reentrant && rng() % 4 == 0) {
    l.lock(ec);
    if (!ec) s.depth = 2;
  }
  std::this_thread::sleep_for(milliseconds(rng() % 15));  // the section's work
  std::error_code inner;
  if (s.depth == 2) unlock(inner);
  std::this_thread::sleep_for(milliseconds(rng() % 5));
  s.stop = steady::now();
  s.valid_until = l.valid_until();
  s.valid = l.valid();
  unlock(s.unlock);
  // A lost hold is dropped whole at its first unlock: the outer unlock then reports not_owner.
  if (inner == errc::lock_lost && s.unlock == errc::not_owner) s.unlock = inner;
  return s;
}

/// The checker's record of `s`.
inline std::string record(const std::string& lock, const std::string& holder, const held_section& s) {
  return "S " + lock + " " + holder + " " + std::to_string(ns(s.start)) + " " + std::to_string(ns(s.stop)) + " " +
         std::to_string(ns(s.valid_until)) + " " + (s.valid ? "1" : "0") + " " + result_name(s.unlock) + " " +
         std::to_string(s.depth) + (s.unlock_timed_out ? " 1" : " 0");
}

/// One grant of the fencing soak and the write its holder made with the grant's token. Times on
/// CLOCK_MONOTONIC: `requested` before the acquisition was asked for, `acquired` when it returned,
/// `write_sent` before the write was sent, `write_done` when its reply came. `late`: the holder
/// worked before writing (a pause could land between grant and write) instead of writing at once.
struct fenced_write {
  std::string lock, holder;  // holder: <process tag>.<thread>
  std::uint64_t token = 0;
  long long requested = 0, acquired = 0, write_sent = 0, write_done = 0;
  std::string result;  // accepted, refused, or err:<code>
  bool late = false;

  std::string process() const { return holder.substr(0, holder.find('.')); }

  /// The log line (without its newline).
  std::string record() const {
    return "W " + lock + " " + holder + " " + std::to_string(token) + " " + std::to_string(requested) + " " +
           std::to_string(acquired) + " " + std::to_string(write_sent) + " " + std::to_string(write_done) + " " +
           result + (late ? " 1" : " 0");
  }

  /// The record `line` holds; empty if it is not a whole W record.
  static std::optional<fenced_write> parse(const std::string& line) {
    std::istringstream in(line);
    std::string tag;
    fenced_write w;
    int late = 0;
    in >> tag >> w.lock >> w.holder >> w.token >> w.requested >> w.acquired >> w.write_sent >> w.write_done >>
        w.result >> late;
    if (tag != "W" || in.fail()) return std::nullopt;
    w.late = late != 0;
    return w;
  }
};

}  // namespace redlease::soak
