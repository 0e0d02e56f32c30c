// SPDX-License-Identifier: MIT
// What the tests of the fair and read-write lock scripts share (fair_scripts_test.cpp,
// rw_scripts_test.cpp: one executable, family_scripts_test): redlease's scripts sent as the engine
// sends them, Redisson's played by redisson_peer, and the fixture with its own redis-server.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "redis_fixture.hpp"
#include "redisson_peer.hpp"
#include "redlease_lua.hpp"
#include "slowlog.hpp"

namespace redlease::test {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using peer = redisson_peer;
namespace lua = redlease::detail::lua;

inline std::string str(long long v) { return std::to_string(v); }

inline long long ms_since(steady::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0).count();
}

/// Polls `cond` every 2 ms until true or `limit` passes.
template <class F>
bool eventually(F cond, std::chrono::milliseconds limit = 5000ms) {
  auto end = steady::now() + limit;
  while (steady::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return cond();
}

/// One pub/sub message.
struct message {
  std::string channel, payload;
  bool operator==(const message&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const message& m) { return os << m.channel << "=" << m.payload; }

/// Waits up to `ms` for one message on a subscribed connection.
inline std::optional<message> next_message(raw_client& sub, long long ms) {
  sub.set_timeout(std::chrono::milliseconds(std::max(1LL, ms)));
  try {
    for (;;) {
      auto m = sub.read_reply();
      if (m.is_array() && m.elements.size() == 3 && m.elements[0].str == "message") {
        return message{m.elements[1].str, m.elements[2].str};
      }
    }
  } catch (const timeout_error&) {
    return std::nullopt;
  }
}

/// A busy reply of fair_acquire.lua: the wait as an integer at the head of the queue (or not
/// queued), as {wait} behind another waiter.
inline bool waits_at_head(const raw_reply& r) { return r.is_integer(); }
inline bool waits_behind(const raw_reply& r) {
  return r.is_array() && r.elements.size() == 1 && r.elements[0].is_integer();
}
inline long long wait_of(const raw_reply& r) { return waits_behind(r) ? r.elements[0].integer : r.integer; }

/// redlease's scripts for one lock name, sent with EVAL over a raw connection as the engine would
/// send them (names from Redisson's rules, now from the system clock, PUBLISH).
struct ours {
  raw_client c;
  std::string name;
  std::string queue = peer::prefix_name("redisson_lock_queue", name);
  std::string deadlines = peer::prefix_name("redisson_lock_timeout", name);
  std::string fair_channel = peer::prefix_name("redisson_lock__channel", name);
  std::string rw_channel = peer::prefix_name("redisson_rwlock", name);

  raw_reply eval(const detail::lua_script& s, std::vector<std::string> keys, std::vector<std::string> args) {
    std::vector<std::string> cmd{"EVAL", std::string(s.body), str(static_cast<long long>(keys.size()))};
    cmd.insert(cmd.end(), keys.begin(), keys.end());
    cmd.insert(cmd.end(), args.begin(), args.end());
    auto r = c.command(std::move(cmd));
    EXPECT_FALSE(r.is_error()) << s.name << ": " << r.str;
    return r;
  }
  std::string latch() { return peer::prefix_name("redisson_unlock_latch", name) + ":" + peer::new_client_id(); }

  raw_reply fair_acquire(const std::string& owner, long long lease, long long allowance, bool enqueue = true,
                         long long now = 0) {
    return eval(lua::fair_acquire, {name, queue, deadlines},
                {str(lease), owner, str(allowance), str(now ? now : peer::now_ms()), enqueue ? "1" : "0",
                 fair_channel, "publish"});
  }
  raw_reply fair_release(const std::string& owner, long long expected = 1, bool retry = false,
                         const std::string& latch_key = {}) {
    return eval(lua::fair_release, {name, queue, deadlines, latch_key.empty() ? latch() : latch_key},
                {fair_channel, "publish", "30000", owner, str(expected), retry ? "1" : "0", "20000", str(peer::now_ms())});
  }
  raw_reply fair_cancel(const std::string& owner, long long allowance, long long now = 0) {
    return eval(lua::fair_cancel, {name, queue, deadlines},
                {owner, str(allowance), fair_channel, "publish", str(now ? now : peer::now_ms())});
  }
  raw_reply read_acquire(const std::string& owner, long long lease) {
    return eval(lua::rw_read_acquire, {name}, {str(lease), owner});
  }
  raw_reply write_acquire(const std::string& owner, long long lease) {
    return eval(lua::rw_write_acquire, {name}, {str(lease), owner});
  }
  raw_reply read_release(const std::string& owner, long long expected = 1) {
    return eval(lua::rw_read_release, {name, latch()}, {rw_channel, "publish", owner, str(expected), "0", "20000"});
  }
  raw_reply write_release(const std::string& owner, long long expected = 1, long long lease = 30000) {
    return eval(lua::rw_write_release, {name, latch()},
                {rw_channel, "publish", str(lease), owner, str(expected), "0", "20000"});
  }
  std::string timeout_key(const std::string& owner, int level) {
    return peer::suffix_name(name, owner) + ":rwlock_timeout:" + str(level);
  }
};

class family_scripts_test : public redis_fixture {
 protected:
  void SetUp() override {
    redis_fixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    raw_ = std::make_unique<raw_client>(server().client());
  }
  void TearDown() override {
    raw_.reset();
    redis_fixture::TearDown();
  }
  raw_client& raw() { return *raw_; }
  ours mine(const std::string& name) { return ours{server().client(), name}; }
  peer java(const std::string& client_id = {}) { return peer(server().host(), server().port(), {}, client_id); }
  long long subscribers(const std::string& channel) {
    auto r = raw()({"PUBSUB", "NUMSUB", channel});
    return r.elements.size() == 2 ? r.elements[1].integer : -1;
  }
  /// Subscribes to `channels` plus a marker channel; `drain()` then publishes to the marker and
  /// returns every message that came before it: exactly what was published in between, no timing.
  struct recorder {
    raw_client sub;
    raw_client pub;
    std::string marker = "family_test_marker";
    std::vector<message> drain() {
      pub({"PUBLISH", marker, "x"});
      std::vector<message> got;
      for (;;) {
        auto m = next_message(sub, 5000);
        if (!m || m->channel == marker) return got;
        got.push_back(*m);
      }
    }
  };
  recorder record(std::vector<std::string> channels) {
    recorder r{server().client(), server().client()};
    for (auto& ch : channels) r.sub.command({"SUBSCRIBE", ch});
    r.sub.command({"SUBSCRIBE", r.marker});
    return r;
  }
  std::vector<std::pair<std::string, long long>> scores(const std::string& zset) {
    std::vector<std::pair<std::string, long long>> out;
    auto r = raw()({"ZRANGE", zset, "0", "-1", "WITHSCORES"});
    for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
      out.emplace_back(r.elements[i].str, std::stoll(r.elements[i + 1].str));
    }
    return out;
  }
  long long score(const std::string& zset, const std::string& member) {
    auto r = raw()({"ZSCORE", zset, member});
    return r.is_nil() ? -1 : std::stoll(r.str);
  }

  std::unique_ptr<raw_client> raw_;
};

}  // namespace redlease::test
