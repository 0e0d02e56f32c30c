// SPDX-License-Identifier: MIT
/// @file
/// Real `redis-server` child processes for integration tests.
///
/// The process handling is `redlease::local::redis_server` (tools/local_server.hpp, also what
/// `redlease demo` and `redlease bench` use): each server runs on a free loopback port, without
/// persistence, in a private temporary directory, and tests can stop, kill, restart, pause and
/// resume it to simulate failures. This layer adds the raw client and takes the binary from the
/// environment variable `REDLEASE_TEST_REDIS_SERVER` (a path, or a name looked up on PATH) or else
/// `redis-server` on PATH.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "local_server.hpp"
#include "raw_client.hpp"

namespace redlease::test {

/// How to start a `redis_server`.
using server_options = local::server_options;

/// A redis-server child process listening on 127.0.0.1 (and optionally a unix socket); see
/// `local::redis_server` for the lifecycle and its rules.
class redis_server : public local::redis_server {
 public:
  /// True if a redis-server binary is found (see the file comment).
  static bool available();

  /// Starts the server on a free port and waits until it answers PING. Throws
  /// `std::runtime_error` (with the tail of the server's log) if it cannot be started.
  explicit redis_server(server_options opts = {});

  /// A new blocking raw client connected to the server over TCP, authenticated if a password is
  /// set. Throws `std::runtime_error` if it cannot connect.
  raw_client client() const;
};

/// Starts `n` independent servers with the same options.
std::vector<std::unique_ptr<redis_server>> start_servers(int n, server_options opts = {});

}  // namespace redlease::test
