// SPDX-License-Identifier: MIT
/// @file
/// A gtest fixture base that gives each test its own real redis-server.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string_view>

#include "redis_server.hpp"

namespace redlease::test {

/// True when the run must not skip for want of a server or tool (REDLEASE_REQUIRE_SERVERS set and
/// not 0; scripts/test.sh sets it): a test without them fails instead, so that a suite that tested
/// nothing cannot pass.
inline bool servers_required() {
  const char* e = std::getenv("REDLEASE_REQUIRE_SERVERS");
  return e != nullptr && *e != '\0' && std::string_view(e) != "0";
}

/// Ends the current test (or fixture SetUp) when `available` is false: skipped, naming `what`, or
/// failed when servers_required().
#define REDLEASE_REQUIRE(available, what)                                                            \
  do {                                                                                               \
    if (!(available)) {                                                                              \
      if (::redlease::test::servers_required())                                                      \
        GTEST_FAIL() << what << " (REDLEASE_REQUIRE_SERVERS is set: a missing server is a failure)"; \
      GTEST_SKIP() << what;                                                                          \
    }                                                                                                \
  } while (false)

/// What the tests say when redis-server is missing.
inline constexpr const char* no_redis_server = "redis-server not found (set REDLEASE_TEST_REDIS_SERVER or put it on PATH)";

/// Fixture base: SetUp() starts `server_` (skipping the test when no redis-server binary is
/// available, or failing it when servers_required()), TearDown() stops it.
///
/// Derived fixtures customise the server by overriding `options()`. A derived SetUp() must call
/// `redis_fixture::SetUp()` first and return early if `IsSkipped() || HasFatalFailure()`.
class redis_fixture : public ::testing::Test {
 protected:
  /// The options the server is started with; override to customise.
  virtual server_options options() const { return {}; }

  /// Skips (or fails) the test if redis-server is not available, otherwise starts `server_`.
  void SetUp() override {
    REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
    server_ = std::make_unique<redis_server>(options());
  }

  /// Stops and removes the server.
  void TearDown() override { server_.reset(); }

  /// The running server (valid after a non-skipped SetUp()).
  redis_server& server() { return *server_; }

  /// The server of this test; null if the test was skipped.
  std::unique_ptr<redis_server> server_;
};

}  // namespace redlease::test
