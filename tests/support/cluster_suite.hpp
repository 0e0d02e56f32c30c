// SPDX-License-Identifier: MIT
/// @file
/// A gtest fixture for a test binary whose tests share one `cluster_rig` (3 masters + 3 replicas):
/// started in SetUpTestSuite (a start failure fails every test with its message), made ready again
/// after each test, stopped at the end. One rig per binary: register such a binary with
/// `redlease_add_test(... WHOLE ...)`, one ctest test, one process.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <memory>
#include <string>

#include "cluster_rig.hpp"
#include "redis_fixture.hpp"

namespace redlease::test {

/// Derive a test's fixture from it and reach the rig as `rig_`. Not thread-safe (gtest's thread).
class cluster_suite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cluster_rig::available()) return;
    try {
      rig_ = std::make_unique<cluster_rig>();
    } catch (const std::exception& e) {
      start_error_ = e.what();
    }
  }
  static void TearDownTestSuite() { rig_.reset(); }
  void SetUp() override {
    REDLEASE_REQUIRE(cluster_rig::available(), no_redis_server);
    ASSERT_NE(rig_, nullptr) << start_error_;
  }
  // The next test finds the cluster ready again (every master with an attached replica).
  void TearDown() override {
    if (rig_ != nullptr) rig_->wait_ready(std::chrono::seconds(20));
  }

  /// The suite's rig (null when it did not start).
  inline static std::unique_ptr<cluster_rig> rig_;
  /// Why it did not start.
  inline static std::string start_error_;
};

}  // namespace redlease::test
