// SPDX-License-Identifier: MIT
// Random tokens and ids: format, uniqueness, and no repeats across fork.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>

#include "random.hpp"

namespace redlease::detail {
namespace {

TEST(random_test, tokens_are_128_bit_hex_and_unique) {
  std::set<std::string> seen;
  for (int i = 0; i < 2000; ++i) {  // crosses several refills of the per-thread buffer
    auto t = random_token();
    EXPECT_EQ(t.size(), 32u);
    EXPECT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_TRUE(seen.insert(t).second);
  }
}

TEST(random_test, uuid_is_version_4) {
  auto u = random_uuid();
  ASSERT_EQ(u.size(), 36u);
  EXPECT_EQ(u[14], '4');
  EXPECT_NE(std::string("89ab").find(u[19]), std::string::npos);
  EXPECT_NE(random_uuid(), u);
}

TEST(random_test, forked_child_does_not_repeat_the_parents_next_token) {
  random_token();  // the buffer now holds unused bytes
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto t = random_token();
    (void)!write(fds[1], t.data(), t.size());
    _exit(0);
  }
  close(fds[1]);
  char buf[32];
  ASSERT_EQ(read(fds[0], buf, sizeof buf), 32);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_NE(std::string(buf, 32), random_token());
}

TEST(random_test, random_unit_is_in_the_unit_interval_and_spread_over_it) {
  int buckets[10] = {};
  for (int i = 0; i < 10000; ++i) {
    double u = random_unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ++buckets[static_cast<int>(u * 10)];
  }
  // 1,000 expected per tenth; a CSPRNG falls outside [800, 1200] with a probability below 1e-9.
  for (int b : buckets) {
    EXPECT_GT(b, 800);
    EXPECT_LT(b, 1200);
  }
}

}  // namespace
}  // namespace redlease::detail
