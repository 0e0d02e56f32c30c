// SPDX-License-Identifier: MIT
// Shared helpers of the lock tests.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

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

/// What a callback was told (`lost_info`, `multi_lost_info`, ...), from any thread.
template <class Info>
struct callback_log {
  std::mutex mu;
  std::vector<Info> told;
  std::function<void(const Info&)> hook() {
    return [this](const Info& i) {
      std::lock_guard<std::mutex> g(mu);
      told.push_back(i);
    };
  }
  std::size_t count() {
    std::lock_guard<std::mutex> g(mu);
    return told.size();
  }
  /// A copy of the `n`th call's argument.
  Info at(std::size_t n) {
    std::lock_guard<std::mutex> g(mu);
    return told.at(n);
  }
};

/// Starts an async operation with `start(handler)` for a `void(std::error_code, T)` completion and
/// waits for it. `inline_call` tells whether the handler ran inside the initiating call: on this
/// thread before the call returned (the completion may well run on an I/O thread before this thread
/// gets to its next statement, which is no fault).
template <class T, class Start>
std::pair<std::error_code, T> complete_outside_call(Start start, bool& inline_call) {
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> in_call{true};
  std::atomic<bool> inside{false};
  std::promise<std::pair<std::error_code, T>> got;
  start([&](std::error_code ec, T v) {
    if (in_call.load() && std::this_thread::get_id() == caller) inside = true;
    got.set_value({ec, std::move(v)});
  });
  in_call = false;
  auto r = got.get_future().get();
  inline_call = inside.load();
  return r;
}

/// complete_outside_call for a call that must succeed: a test failure if the handler ran inside the
/// initiating call or got an error; the value it got.
template <class T, class Start>
T value_by_callback(Start start) {
  bool inside = true;
  auto [ec, v] = complete_outside_call<T>(std::move(start), inside);
  EXPECT_FALSE(inside) << "the handler ran inside its initiating call";
  EXPECT_FALSE(ec) << ec.message();
  return v;
}

/// complete_outside_call for a call that must fail: a test failure if the handler ran inside the
/// initiating call; the error it got.
template <class T, class Start>
std::error_code error_by_callback(Start start) {
  bool inside = true;
  auto ec = complete_outside_call<T>(std::move(start), inside).first;
  EXPECT_FALSE(inside) << "the handler ran inside its initiating call";
  return ec;
}

/// The error an `asio::use_future` future completed with (empty when it got a value).
template <class T>
std::error_code error_of(std::future<T> f) {
  try {
    f.get();
  } catch (const std::system_error& e) {
    return e.code();
  }
  return {};
}

/// A client configuration for server `s` with short timeouts and the given watchdog timeout.
inline config short_timeouts(redis_server& s, std::chrono::milliseconds watchdog = 30000ms) {
  auto c = config::from_url(s.url());
  c.watchdog_timeout = watchdog;
  c.request_timeout = 1000ms;
  c.connect_timeout = 1000ms;
  c.reconnect_min_delay = 10ms;
  c.reconnect_max_delay = 100ms;
  return c;
}

/// A fixture with a server and a client factory with short timeouts.
class lock_fixture : public redis_fixture {
 protected:
  config cfg(std::chrono::milliseconds watchdog = 30000ms) { return short_timeouts(server(), watchdog); }
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
