// SPDX-License-Identifier: MIT
// `redlease demo` against the test's server: every step must pass.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <sys/wait.h>

#include "redis_fixture.hpp"

namespace redlease::test {
namespace {

class demo_test : public redis_fixture {};

TEST_F(demo_test, demo_passes_every_step_against_the_test_server) {
  std::string cmd = std::string(REDLEASE_CLI_PATH) + " demo --redis " + server().url() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (auto n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("All steps passed."), std::string::npos) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  for (const char* step : {"[1/5] Watchdog", "[2/5] Mutual exclusion", "[3/5] Lost lock", "[4/5] Fencing", "[5/5] Flash sale"})
    EXPECT_NE(out.find(step), std::string::npos) << step;
}

}  // namespace
}  // namespace redlease::test
