// SPDX-License-Identifier: MIT
// The protocol side of talking to Sentinels, without I/O (unit-tested without a server): which
// Sentinel to try next, what their answers mean, and what a `+switch-master` message says. The
// sentinel topology (sentinel.cpp) drives it from its connections.
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

namespace redlease::detail {

/// The Sentinels a client knows, in the order it tries them: the configured ones first, then those
/// learnt from SENTINEL SENTINELS. One cursor per connection that rotates through them.
///
/// A learnt Sentinel is forgotten when the latest SENTINEL SENTINELS answer no longer lists it (or
/// lists it as down, `s_down`), and when it has failed `forget_after_failures` times in a row with
/// another Sentinel answering in between: every Sentinel that has gone stays out of the rotation,
/// and the list does not grow without bound as Sentinels come and go. A client cut off from every
/// Sentinel keeps what it learnt. Configured Sentinels are never forgotten.
class sentinel_directory {
 public:
  /// Failures in a row after which a learnt Sentinel is forgotten.
  static constexpr int forget_after_failures = 3;

  explicit sentinel_directory(std::vector<node_address> configured);
  /// The Sentinel the connection with cursor `c` tries now.
  const node_address& current(std::size_t c) const { return nodes_[c % nodes_.size()]; }
  /// That Sentinel failed (no connection, no answer): the cursor moves to the next one; `why` is
  /// kept for the message when none answers. A learnt Sentinel that keeps failing is forgotten.
  void failed(std::size_t& c, const std::string& why);
  /// A Sentinel answered: its earlier failures are forgotten.
  void answered(std::size_t c);
  /// The answer of the Sentinel at cursor `c` to SENTINEL SENTINELS (an array of flat field/value
  /// arrays with "ip", "port" and "flags"): adds the Sentinels it lists that are not down and
  /// forgets the learnt ones it does not list (other than itself); `c` keeps naming the Sentinel
  /// that answered. Returns how many were new. Malformed entries are skipped, and an answer with
  /// any forgets nothing; anything but an array changes nothing.
  std::size_t learn(const reply& r, std::size_t& c);
  /// "127.0.0.1:26379: connection refused; 127.0.0.1:26380: ..." for every Sentinel that failed.
  std::string failures() const;
  std::size_t size() const { return nodes_.size(); }
  const std::vector<node_address>& nodes() const { return nodes_; }
  /// Whether the Sentinel at index `i` of nodes() was configured (rather than learnt).
  bool configured(std::size_t i) const { return i < configured_; }

 private:
  struct health {
    std::string why;               // last failure, "" once it answered
    int failures = 0;              // in a row, at most one per answer of another Sentinel
    std::uint64_t answers_at = 0;  // answers_ at the last failure counted
  };
  void forget(std::size_t i, std::size_t& c);

  std::vector<node_address> nodes_;  // the configured ones first
  std::vector<health> health_;
  std::size_t configured_ = 0;
  std::uint64_t answers_ = 0;  // answered() calls so far
};

/// What a Sentinel's answer about the master means.
struct master_answer {
  std::error_code ec;      // clear: `address` is the master
  std::string text;        // the words for ec
  node_address address;
  long long epoch = -1;    // the configuration epoch of that answer (SENTINEL MASTER), -1 unknown
};
/// `SENTINEL GET-MASTER-ADDR-BY-NAME name`: [ip, port] or nil.
master_answer parse_master_addr(const reply& r, std::string_view sentinel, std::string_view master_name);
/// `SENTINEL MASTER name`: a flat field/value array with ip, port and config-epoch. The epoch tells
/// a lagging Sentinel's answer (an older epoch: the master before the last failover) from a current
/// one.
master_answer parse_master_info(const reply& r, std::string_view sentinel, std::string_view master_name);

/// Which master to believe: Sentinels may disagree for a moment after a failover, and a lagging one
/// still names the old master, which stays writable for about ten seconds. Answers of an older
/// configuration epoch than one already seen are stale; a `+switch-master` message (which carries
/// no epoch) outranks every answer of the epoch before it.
class master_tracker {
 public:
  enum class verdict { first, same, switched, stale };
  /// An answer of a Sentinel (epoch -1: unknown, taken at face value).
  verdict answer(const node_address& a, long long epoch);
  /// A `+switch-master` message naming `a`.
  verdict switch_message(const node_address& a);
  const std::optional<node_address>& current() const { return current_; }
  const std::optional<node_address>& previous() const { return previous_; }

 private:
  verdict move_to(const node_address& a);
  std::optional<node_address> current_, previous_;
  long long epoch_ = -1;       // of current_, when known
  long long min_epoch_ = -1;   // answers below this are stale (after a switch message)
};

/// The new master of a `+switch-master` message ("<name> <old-ip> <old-port> <new-ip> <new-port>"),
/// when it is about `master_name`.
std::optional<node_address> parse_switch_master(std::string_view payload, std::string_view master_name);

}  // namespace redlease::detail
