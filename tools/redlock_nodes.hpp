// SPDX-License-Identifier: MIT
// The masters of a RedLock, for `run --redlock` and `status --redlock`: their URLs, one client
// each, and which of them answer.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "redlease/client.hpp"
#include "redlease/config.hpp"

namespace redlease::cli {

/// The fewest masters `--redlock` takes: with fewer, a majority is all of them, or one.
inline constexpr std::size_t redlock_min_nodes = 3;

/// The URLs of a RedLock's masters: `given` (one per --redis), else $REDLEASE_URL split at spaces.
/// Empty with `problem` set (a usage error, said in one sentence) when there are fewer than 3.
std::vector<std::string> redlock_urls(const std::vector<std::string>& given, std::string& problem);

/// One client per master, each with its own config (make_config's rules: TLS flags, passwords
/// from the environment), and the node's name for messages: its URL without the password.
struct redlock_nodes {
  std::vector<std::unique_ptr<client>> clients;
  std::vector<std::string> labels;
  /// A majority of the nodes: size() / 2 + 1.
  std::size_t quorum() const noexcept { return clients.size() / 2 + 1; }
  std::size_t size() const noexcept { return clients.size(); }
  /// The clients, as redlease::redlock takes them.
  std::vector<std::reference_wrapper<client>> refs() const;
};

/// What a PING of one node said.
struct node_ping {
  bool answered = false;   // PONG
  std::error_code ec;      // set when it failed
  std::string message;     // the failure in the CLI's words: "<url>: connection refused: ..."
};

/// PINGs every node at once. Returns when every node answered or failed; with `grace`, also when a
/// quorum answered and the others had `grace` more to do so, or when so many failed that a quorum
/// cannot answer. A node that said nothing by then is neither answered nor failed.
std::vector<node_ping> ping_nodes(const redlock_nodes& nodes, std::optional<std::chrono::milliseconds> grace);

/// Throws a redlease::error with the first failure's code (unreachable: 69) when fewer than a
/// quorum of `pings` answered: `<what>: 2 of 3 masters cannot be reached (RedLock needs 2): <url>:
/// ...; <url>: ...`.
void require_quorum(const redlock_nodes& nodes, const std::vector<node_ping>& pings, const std::string& what);

}  // namespace redlease::cli
