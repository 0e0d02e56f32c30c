// SPDX-License-Identifier: MIT
// Shared helpers of the lock tests.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>
#include <thread>

#include "redis_fixture.hpp"
#include "redlease/redlease.hpp"

namespace redlease::test {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

/// The lock named `name` of kind `kind`: "mutex", "fair", "read", "write", else the reentrant lock.
inline detail::lock_handle lock_of_kind(client& c, const std::string& kind, const std::string& name) {
  if (kind == "mutex") return c.mutex(name);
  if (kind == "fair") return c.fair_lock(name);
  if (kind == "read") return c.read_lock(name);
  if (kind == "write") return c.write_lock(name);
  return c.lock(name);
}

/// Polls `cond` until true or `limit` passes; true if it became true.
inline bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds limit = 5000ms) {
  auto end = steady::now() + limit;
  while (steady::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return cond();
}

/// Milliseconds elapsed since `t0`.
inline long long ms_since(steady::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0).count();
}

/// Collects what `config::on_error` is told, from any thread.
struct error_log {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(const background_error&)> hook() {
    return [this](const background_error& e) {
      std::lock_guard<std::mutex> g(mu);
      lines.push_back(std::string(e.source) + ": " + e.message);
    };
  }
  /// How many lines contain `text`.
  std::size_t count(const std::string& text) {
    std::lock_guard<std::mutex> g(mu);
    std::size_t n = 0;
    for (auto& l : lines) n += l.find(text) != std::string::npos;
    return n;
  }
  bool has(const std::string& text) { return count(text) > 0; }
};

/// A fixture with a server and a client factory with short timeouts.
class lock_fixture : public redis_fixture {
 protected:
  config cfg(std::chrono::milliseconds watchdog = 30000ms) {
    auto c = config::from_url(server().url());
    c.watchdog_timeout = watchdog;
    c.request_timeout = 1000ms;
    c.connect_timeout = 1000ms;
    c.reconnect_min_delay = 10ms;
    c.reconnect_max_delay = 100ms;
    return c;
  }
  raw_client& raw() {
    if (!raw_) raw_ = std::make_unique<raw_client>(server().client());
    return *raw_;
  }
  void TearDown() override {
    raw_.reset();
    redis_fixture::TearDown();
  }
  std::unique_ptr<raw_client> raw_;
};

}  // namespace redlease::test
