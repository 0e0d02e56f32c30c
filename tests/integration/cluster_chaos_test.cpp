// SPDX-License-Identifier: MIT
// Locks on a Redis Cluster under faults, with the soak's rules (soak_section.hpp): contenders in
// two clients loop try_lock / a short section / valid() / unlock on three locks (one per master)
// while the test fails masters over, freezes one until its replica is elected, and moves the
// locks' slots back and forth. The checker then asserts what the design promises: the known-valid
// windows [start, min(end, valid_until)] of two holders of one lock never overlap; an overlap of
// whole sections only where one side was told it lost the lock; every unlock succeeds or says
// lock_lost; every contender keeps acquiring. One rig for the binary; the fault sequence is fixed.
// REDLEASE_CLUSTER_ROUNDS=N repeats the freeze and the resharding N times (1 by default;
// scripts/test.sh's Release section runs a longer pass).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cluster_suite.hpp"
#include "lock_test_support.hpp"
#include "redis_fixture.hpp"
#include "redlease/client.hpp"
#include "soak_section.hpp"

namespace redlease::test {
namespace {

using namespace std::chrono_literals;

int rounds() {
  if (const char* s = std::getenv("REDLEASE_CLUSTER_ROUNDS")) {
    const int n = std::atoi(s);
    if (n > 0) return n;
  }
  return 1;
}

struct record {
  std::string lock;
  int holder = 0;
  soak::held_section s;
};

// Contenders on `names`: `clients` clients with `threads` threads each, every thread on every lock
// in turn, until stop().
class contenders {
 public:
  contenders(std::vector<std::string> names, config cfg, int clients = 2, int threads = 2)
      : names_(std::move(names)) {
    for (int c = 0; c < clients; ++c) clients_.push_back(std::make_unique<client>(cfg));
    // Sized before the first thread starts: a running contender indexes it under mu_, and a
    // push_back here would move it under that contender's feet.
    acquired_.assign(static_cast<std::size_t>(clients * threads), 0);
    for (int c = 0; c < clients; ++c)
      for (int t = 0; t < threads; ++t) {
        const int holder = c * threads + t;
        threads_.emplace_back([this, c, holder] { run(*clients_[static_cast<std::size_t>(c)], holder); });
      }
  }
  ~contenders() { stop(); }

  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  // Waits until every contender has acquired `n` more times than when it was called.
  bool progress(int n, std::chrono::milliseconds limit) {
    std::vector<long long> base;
    {
      std::lock_guard<std::mutex> g(mu_);
      base = acquired_;
    }
    return eventually([&] {
      std::lock_guard<std::mutex> g(mu_);
      for (std::size_t i = 0; i < base.size(); ++i)
        if (acquired_[i] < base[i] + n) return false;
      return true;
    }, limit);
  }

  // A section for a failure message, its times in ms from `base`.
  static std::string describe(const record& r, steady::time_point base) {
    auto at = [&](steady::time_point t) { return std::to_string(std::chrono::duration<double, std::milli>(t - base).count()); };
    return "holder " + std::to_string(r.holder) + " [" + at(r.s.start) + ", " + at(r.s.stop) + "] valid until " +
           at(r.s.valid_until) + (r.s.valid ? " valid" : " not valid") + ", unlock " + soak::result_name(r.s.unlock) +
           ", depth " + std::to_string(r.s.depth);
  }

  // The checker (soak_test's rules). Returns the number of sections checked.
  std::size_t check() {
    std::lock_guard<std::mutex> g(mu_);
    auto all = records_;
    std::sort(all.begin(), all.end(), [](const record& a, const record& b) { return a.s.start < b.s.start; });
    const auto base = all.empty() ? steady::now() : all.front().s.start;
    std::size_t told = 0;
    for (auto& r : all) {
      told += r.s.told();
      const bool lost_reentered = r.s.unlock == errc::not_owner && r.s.depth == 2 && !r.s.valid;
      EXPECT_TRUE(!r.s.unlock || r.s.unlock == errc::lock_lost || lost_reentered)
          << "holder " << r.holder << " on " << r.lock << ": unlock " << soak::result_name(r.s.unlock);
    }
    for (std::size_t i = 0; i < all.size(); ++i)
      for (std::size_t j = i + 1; j < all.size() && all[j].s.start < all[i].s.stop; ++j) {
        const auto& a = all[i];
        const auto& b = all[j];
        if (a.lock != b.lock || a.holder == b.holder) continue;
        const auto a_until = std::min(a.s.stop, a.s.valid_until);
        const auto b_until = std::min(b.s.stop, b.s.valid_until);
        EXPECT_FALSE(b.s.start < std::min(a_until, b_until))
            << "the valid windows of holders " << a.holder << " and " << b.holder << " on " << a.lock << " overlap: "
            << describe(a, base) << " / " << describe(b, base);
        EXPECT_TRUE(a.s.told() || b.s.told()) << "holders " << a.holder << " and " << b.holder << " overlap on " << a.lock
                                              << " and neither was told: " << describe(a, base) << " / "
                                              << describe(b, base);
      }
    std::printf("sections %zu, told %zu, try_lock errors %lld (unexpected %lld)\n", all.size(), told,
                errors_.load(), unexpected_.load());
    for (auto& [k, n] : error_kinds_) std::printf("  %s: %lld\n", k.c_str(), n);
    EXPECT_EQ(unexpected_.load(), 0);
    return all.size();
  }

 private:
  void run(client& c, int holder) {
    std::minstd_rand rng(static_cast<unsigned>(holder + 1));  // fixed: the run is repeatable
    std::vector<lock> locks;
    for (auto& n : names_) locks.push_back(c.lock(n));
    for (std::size_t round = 0; !stop_; ++round) {
      auto& l = locks[(round + static_cast<std::size_t>(holder)) % locks.size()];
      std::error_code ec;
      if (!l.try_lock(1000ms, ec)) {
        if (ec) note_error(ec);
        continue;
      }
      auto s = soak::critical_section(l, true, rng, 15s);
      std::lock_guard<std::mutex> g(mu_);
      records_.push_back({l.name(), holder, s});
      ++acquired_[static_cast<std::size_t>(holder)];
    }
  }
  void note_error(std::error_code ec) {
    ++errors_;
    // What a failover or a frozen master may cause: the request timed out or its connection went,
    // the cluster was down for a moment, a demoted master answered.
    const bool expected = soak::transient(ec) || ec == errc::server_readonly || ec == errc::server_error;
    if (!expected) ++unexpected_;
    std::lock_guard<std::mutex> g(mu_);
    ++error_kinds_[ec.message()];
  }

  std::vector<std::string> names_;
  std::vector<std::unique_ptr<client>> clients_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<record> records_;
  std::vector<long long> acquired_;
  std::atomic<long long> errors_{0}, unexpected_{0};
  std::map<std::string, long long> error_kinds_;
};

class cluster_chaos_test : public cluster_suite {
 protected:
  static config cfg() {
    config c;
    c.host = "127.0.0.1";
    c.port = rig_->masters().front();
    c.watchdog_timeout = 3000ms;
    c.connect_timeout = 500ms;
    c.request_timeout = 500ms;
    c.health_check_interval = 500ms;
    c.replica_ack.timeout = 100ms;
    return c;
  }
  // One lock name per master, in the masters' order.
  static std::vector<std::string> names(const std::string& stem) {
    std::vector<std::string> out;
    for (auto m : rig_->masters())
      for (int i = 0;; ++i) {
        auto n = stem + ":" + std::to_string(i);
        if (rig_->master_of(n) == m) {
          out.push_back(n);
          break;
        }
      }
    return out;
  }

};


TEST_F(cluster_chaos_test, failovers_under_load) {
  contenders load(names("chaos:failover"), cfg());
  ASSERT_TRUE(load.progress(3, 10s));
  // One round even in the long soak: a second graceful CLUSTER FAILOVER back to a master that has
  // just re-attached as a replica timed out (redis' manual failover gives up silently after 5 s).
  for (auto m : rig_->masters()) {
    rig_->failover(rig_->replica_of(m));
    EXPECT_TRUE(load.progress(3, 10s)) << "after the failover of " << m;
  }
  load.stop();
  EXPECT_GT(load.check(), 0u);
}

TEST_F(cluster_chaos_test, a_frozen_master_is_replaced_under_load) {
  contenders load(names("chaos:frozen"), cfg());
  ASSERT_TRUE(load.progress(3, 10s));
  for (int round = 0; round < rounds(); ++round) {
    const auto frozen = rig_->masters()[static_cast<std::size_t>(1 + round) % 3];
    const auto replica = rig_->replica_of(frozen);
    const auto t0 = steady::now();
    rig_->pause(frozen);
    rig_->wait_promoted(replica, steady::now() + 20s);
    std::printf("replica elected %lld ms after the freeze\n", ms_since(t0));
    EXPECT_TRUE(load.progress(3, 10s)) << "after the election";
    rig_->resume(frozen);
    rig_->wait_ready(20s);
  }
  load.stop();
  EXPECT_GT(load.check(), 0u);
}

TEST_F(cluster_chaos_test, resharding_under_load) {
  const auto lock_names = names("chaos:reshard");
  contenders load(lock_names, cfg());
  ASSERT_TRUE(load.progress(3, 10s));
  // Every lock's slot goes to the next master and back, three times, keys and all, while the
  // contenders hold and wait.
  for (int round = 0; round < 3 * rounds(); ++round)
    for (const auto& n : lock_names) {
      const int slot = rig_->slot_of(n);
      const auto from = rig_->master_of_slot(slot);
      const auto to = rig_->other_master(slot);
      rig_->migrate_slot(slot, from, to);
      EXPECT_TRUE(load.progress(1, 10s)) << "after moving " << n << " to " << to;
      rig_->migrate_slot(slot, to, from);
    }
  EXPECT_TRUE(load.progress(3, 10s));
  load.stop();
  EXPECT_GT(load.check(), 0u);
}

}  // namespace
}  // namespace redlease::test
