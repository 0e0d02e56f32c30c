// SPDX-License-Identifier: MIT
// Built against an installed redlease by tests/cmake/{consumer,pkgconfig_consumer}_test.cmake.
#include <redlease/redlease.hpp>
#include <redlease/version.hpp>

#include <cstring>
#include <iostream>

static_assert(__cplusplus >= 202002L, "the consumer must be compiled as C++20");
static_assert(REDLEASE_VERSION ==
              REDLEASE_VERSION_MAJOR * 10000 + REDLEASE_VERSION_MINOR * 100 + REDLEASE_VERSION_PATCH);

int main(int argc, char** argv) {
  std::error_code ec;
  auto c = redlease::config::from_url("redis://127.0.0.1:1", ec);
  if (std::strcmp(redlease::version, REDLEASE_VERSION_STRING) != 0) return 2;
  std::cout << "redlease " << REDLEASE_VERSION_STRING << " " << c.redacted_url() << "\n";
  // Only with an argument (the tests give none): makes the program link the whole client (connection
  // core, CSPRNG) as a real one does, without needing a server to run.
  if (argc > 1) {
    redlease::client cl{redlease::config::from_url(argv[1])};
    cl.ping();
  }
  return ec ? 1 : 0;
}
