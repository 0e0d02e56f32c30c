// SPDX-License-Identifier: MIT
// Built against an installed redlease by tests/cmake/{consumer,pkgconfig_consumer}_test.cmake.
// With clang, the README's define for Debian 12's Asio (before any of its headers), which otherwise
// leaves use_awaitable out.
#if defined(__clang__) && !defined(ASIO_HAS_CO_AWAIT)
#define ASIO_HAS_CO_AWAIT 1
#endif
#include <redlease/redlease.hpp>
#include <redlease/version.hpp>

// The README's async snippets, with the includes it shows (compiled, not run).
#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>

#include <chrono>
#include <cstring>
#include <iostream>

static_assert(__cplusplus >= 202002L, "the consumer must be compiled as C++20");
static_assert(REDLEASE_VERSION ==
              REDLEASE_VERSION_MAJOR * 10000 + REDLEASE_VERSION_MINOR * 100 + REDLEASE_VERSION_PATCH);

[[maybe_unused]] asio::awaitable<void> readme_snippets(redlease::client& c, redlease::lock& l) {
  using namespace std::chrono_literals;
  auto owner = c.new_owner();
  co_await l.async_lock(owner, asio::use_awaitable);
  co_await l.async_unlock(owner, asio::use_awaitable);
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer t(co_await asio::this_coro::executor, 200ms);
  auto r = co_await (l.async_lock(owner, asio::use_awaitable) || t.async_wait(asio::use_awaitable));
  if (r.index() == 0) co_await l.async_unlock(owner, asio::use_awaitable);
}

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
