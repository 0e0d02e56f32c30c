// SPDX-License-Identifier: MIT
// What the connection core's tests (core_*_test.cpp: one executable, core_test) share: fast timing,
// helpers and the fixture with its own redis-server.
#pragma once

// Included first on purpose: Asio's choice of allocator once depended on header order (an ODR
// violation ASan reported); ASIO_DISABLE_STD_ALIGNED_ALLOC in cmake/redlease_deps.cmake fixes it,
// and this order keeps the test meaningful without that define too.
#include "redlease/client.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio/post.hpp>
#include <asio/use_future.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "loopback_socket.hpp"
#include "redis_fixture.hpp"
#include "redlease/config.hpp"
#include "redlease/error.hpp"
#include "redlease_lua.hpp"

namespace redlease::test {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using result = std::pair<std::error_code, reply>;

// ---- helpers -------------------------------------------------------------------------------------

// Short timeouts keep the failure tests fast.
inline void set_fast_timing(config& c) {
  c.connect_timeout = 500ms;
  c.request_timeout = 500ms;
  c.reconnect_min_delay = 10ms;
  c.reconnect_max_delay = 100ms;
}

inline config fast_config(const std::string& url) {
  config c = config::from_url(url);
  set_fast_timing(c);
  return c;
}

// Polls `pred` every 10 ms until it holds or `timeout` passes; returns its last value.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = 5000ms) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (steady::now() >= deadline) return pred();
    std::this_thread::sleep_for(10ms);
  }
}

// Issues `args` asynchronously; the future gets (ec, reply). A callback destroyed without being
// called shows as a broken promise (std::future_error from get()).
inline std::future<result> async_cmd(client& c, std::vector<std::string> args) {
  auto p = std::make_shared<std::promise<result>>();
  auto f = p->get_future();
  c.async_command(std::move(args), [p](std::error_code ec, reply r) { p->set_value({ec, std::move(r)}); });
  return f;
}

inline long long elapsed_ms(steady::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - since).count();
}

// The error code a throwing call fails with (clear if it does not throw).
template <class F>
std::error_code thrown_code(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const redlease::error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return {};
}

// Messages received by a subscription callback (which runs on the client's I/O thread).
struct inbox {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> msgs;

  std::function<void(std::string_view, std::string_view)> callback() {
    return [this](std::string_view ch, std::string_view payload) {
      std::lock_guard<std::mutex> g(mu);
      msgs.emplace_back(std::string(ch), std::string(payload));
    };
  }
  std::size_t size() {
    std::lock_guard<std::mutex> g(mu);
    return msgs.size();
  }
  bool has(const std::string& payload) {
    std::lock_guard<std::mutex> g(mu);
    return std::any_of(msgs.begin(), msgs.end(), [&](auto& m) { return m.second == payload; });
  }
};

inline long long numsub(raw_client& rc, const std::string& channel) {
  raw_reply r = rc({"PUBSUB", "NUMSUB", channel});
  if (!r.is_array() || r.elements.size() != 2) return -1;
  return r.elements[1].integer;
}

class core_test : public redis_fixture {
 protected:
  config cfg() { return fast_config(server().url()); }
};

}  // namespace redlease::test
