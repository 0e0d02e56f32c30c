// SPDX-License-Identifier: MIT
// The RedLock tests' fixture: 3 or 5 real redis-server processes, one client and one raw client on
// each, and what the tests ask of them (a held lock, our value on every node, none of it left).
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lock_test_support.hpp"
#include "raw_client.hpp"
#include "redlease/redlock.hpp"

namespace redlease::test {

using lost_log = callback_log<lost_info>;

class redlock_fixture : public redis_fixture {
 protected:
  // Starts `n` servers in all (the fixture's and n − 1 more) and one client on each.
  void start(int n) {
    extra_ = start_servers(n - 1);
    for (int i = 0; i < n; ++i) {
      auto c = config::from_url(srv(i).url());
      c.watchdog_timeout = 1000ms;
      c.request_timeout = 1000ms;
      c.connect_timeout = 1000ms;
      c.reconnect_min_delay = 10ms;
      c.reconnect_max_delay = 100ms;
      clients_.push_back(std::make_unique<client>(c));
      clients_.back()->ping();
      raws_.push_back(std::make_unique<raw_client>(srv(i).client()));
    }
  }
  void TearDown() override {
    raws_.clear();
    clients_.clear();
    extra_.clear();
    redis_fixture::TearDown();
  }
  redis_server& srv(int i) { return i == 0 ? server() : *extra_.at(i - 1); }
  raw_client& raw(int i) { return *raws_.at(i); }
  int size() const { return static_cast<int>(clients_.size()); }
  std::vector<std::reference_wrapper<client>> nodes() {
    std::vector<std::reference_wrapper<client>> v;
    for (auto& c : clients_) v.emplace_back(*c);
    return v;
  }
  redlock make(const std::string& name, std::chrono::milliseconds ttl = 1000ms) {
    redlock_options o;
    o.ttl = ttl;
    return redlock(nodes(), name, o);
  }
  // A RedLock on `name` acquired (or the test failed), on_lost told to `lost`, our value on every
  // node (the last grants may land after the majority's).
  redlock held(const std::string& name, lost_log& lost, redlock_options o = ttl_1s()) {
    redlock rl(nodes(), name, o);
    rl.on_lost(lost.hook());
    EXPECT_TRUE(rl.try_lock());
    EXPECT_TRUE(all_hold(name, rl.value()));
    return rl;
  }
  static redlock_options ttl_1s() {
    redlock_options o;
    o.ttl = 1000ms;
    return o;
  }
  // True once every node in `which` (all by default) holds `value` under `name` (within `limit`):
  // the lock is granted at a majority's answers, the other nodes' grants may land just after.
  bool all_hold(const std::string& name, const std::string& value, unsigned which = ~0u,
                std::chrono::milliseconds limit = 3000ms) {
    return eventually(
        [&] {
          for (int i = 0; i < size(); ++i)
            if ((which & (1u << i)) && raw(i)({"GET", name}).str != value) return false;
          return true;
        },
        limit);
  }
  // True once no node holds `value` under `name` (within `limit`, well below the TTLs: released,
  // not expired).
  bool none_left(const std::string& name, const std::string& value, std::chrono::milliseconds limit = 500ms) {
    return eventually(
        [&] {
          for (int i = 0; i < size(); ++i)
            if (raw(i)({"GET", name}).str == value) return false;
          return true;
        },
        limit);
  }

  // redsync's TestMutexQuorum over `n` servers: every mask of nodes pre-filled with a foreign value;
  // granted iff the free nodes are a majority, and nothing of ours left after a refusal.
  void check_every_mask(int n) {
    start(n);
    for (unsigned mask = 0; mask < (1u << n); ++mask) {
      SCOPED_TRACE("mask " + std::to_string(mask));
      const std::string name = "quorum:" + std::to_string(mask);
      for (int i = 0; i < n; ++i)
        if (mask & (1u << i)) {
          ASSERT_TRUE(raw(i)({"SET", name, "foreign", "PX", "10000"}).is_ok());
        }
      auto rl = make(name, 5000ms);
      const bool expected = n - std::popcount(mask) >= n / 2 + 1;
      std::error_code ec;
      const bool ok = rl.try_lock(ec);
      EXPECT_FALSE(ec) << ec.message();
      EXPECT_EQ(ok, expected);
      const std::string value = rl.value();
      ASSERT_EQ(value.size(), 32u);
      for (int i = 0; i < n; ++i)
        if (mask & (1u << i)) {
          EXPECT_EQ(raw(i)({"GET", name}).str, "foreign") << "node " << i;
        }
      if (ok) {
        EXPECT_TRUE(rl.valid());
        EXPECT_TRUE(all_hold(name, value, ~mask)) << "our value on every free node";
        rl.unlock();
      }
      EXPECT_TRUE(none_left(name, value)) << "a key of ours was left";
    }
  }

  std::vector<std::unique_ptr<redis_server>> extra_;
  std::vector<std::unique_ptr<client>> clients_;
  std::vector<std::unique_ptr<raw_client>> raws_;
};

}  // namespace redlease::test
