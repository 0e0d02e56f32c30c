// SPDX-License-Identifier: MIT
/// @file
/// A gtest fixture base that gives each test its own real redis-server.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "redis_server.hpp"

namespace redlease::test {

/// Fixture base: SetUp() starts `server_` (skipping the test when no redis-server binary is
/// available), TearDown() stops it.
///
/// Derived fixtures customise the server by overriding `options()`. A derived SetUp() must call
/// `redis_fixture::SetUp()` first and return early if `IsSkipped()`.
class redis_fixture : public ::testing::Test {
 protected:
  /// The options the server is started with; override to customise.
  virtual server_options options() const { return {}; }

  /// Skips the test if redis-server is not available, otherwise starts `server_`.
  void SetUp() override {
    if (!redis_server::available()) {
      GTEST_SKIP() << "redis-server not found (set REDLEASE_TEST_REDIS_SERVER or put it on PATH)";
    }
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
