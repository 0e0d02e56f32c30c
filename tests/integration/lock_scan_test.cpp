// SPDX-License-Identifier: MIT
// The scan pass of `redlease top` and `redlease exporter` (tools/lock_scan.hpp) against a real
// redis-server: every kind found with its holders, counts and waiters, auxiliary keys folded into
// their lock, an application's keys left out, and force_unlock by kind.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "lock_scan.hpp"
#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

using cli::found_lock;
using cli::lock_scanner;

class lock_scan_test : public lock_fixture {
 protected:
  std::map<std::string, found_lock> scan(lock_scanner& s, const std::string& match = "*",
                                         cli::scan_cost* cost = nullptr) {
    cli::scan_options o;
    o.match = match;
    o.count = 7;  // several SCAN steps and batches even here
    std::map<std::string, found_lock> out;
    for (auto& l : s.scan(o, cost)) {
      EXPECT_FALSE(out.count(l.name)) << l.name << " twice";
      out[l.name] = l;
    }
    return out;
  }
};

TEST_F(lock_scan_test, every_kind_with_its_holders_counts_and_waiters) {
  client c{cfg()};
  client other{cfg()};
  auto re = c.lock("t:re");
  re.lock();
  re.lock();  // hold count 2
  auto fair = c.fair_lock("t:fair");
  fair.lock();
  auto queued_done = std::async(std::launch::async, [&] {
    auto l = other.fair_lock("t:fair");
    bool got = l.try_lock(20s);
    if (got) l.unlock();
    return got;
  });
  auto r1 = c.read_lock("t:rw");
  auto r2 = other.read_lock("t:rw");
  r1.lock();
  r2.lock();
  auto m = c.mutex("t:mutex");
  m.lock();
  auto sem = c.semaphore("t:sem");
  ASSERT_TRUE(sem.try_set_permits(5));
  ASSERT_TRUE(sem.try_acquire(2));
  auto ps = c.permit_semaphore("t:permits");
  ASSERT_TRUE(ps.try_set_permits(3));
  auto permit = ps.try_acquire(1, 0ms);
  ASSERT_TRUE(permit.valid());
  auto latch = c.count_down_latch("t:latch");
  ASSERT_TRUE(latch.try_set_count(4));
  // A waiter of the reentrant lock, blocked on its channel.
  auto blocked_done = std::async(std::launch::async, [&] {
    auto l = other.lock("t:re");
    bool got = l.try_lock(20s);
    if (got) l.unlock();
    return got;
  });
  // An application's keys: a hash that is no lock, a string without expiry, a list.
  raw()({"HSET", "t:user", "name", "ada"});
  raw()({"SET", "t:plain", "text"});
  raw()({"RPUSH", "t:list", "a"});

  lock_scanner s{cfg()};
  ASSERT_TRUE(eventually([&] {
    auto all = scan(s);
    return all.count("t:fair") && all["t:fair"].queue_length == 1 && all.count("t:re") && all["t:re"].waiters >= 1;
  }));
  cli::scan_cost cost;
  auto all = scan(s, "*", &cost);
  EXPECT_FALSE(s.cluster());
  EXPECT_EQ(cost.masters, 1u);
  EXPECT_GT(cost.commands, cost.keys);

  ASSERT_TRUE(all.count("t:re"));
  EXPECT_EQ(all["t:re"].kind, "reentrant");
  EXPECT_EQ(all["t:re"].hold_count, 2);
  EXPECT_EQ(all["t:re"].holder_count, 1);
  ASSERT_EQ(all["t:re"].holders.size(), 1u);
  EXPECT_GT(all["t:re"].ttl_ms, 0);
  EXPECT_EQ(all["t:re"].waiters, 1);

  EXPECT_EQ(all["t:fair"].kind, "fair");
  EXPECT_EQ(all["t:fair"].queue_length, 1);
  ASSERT_EQ(all["t:fair"].queue.size(), 1u);
  EXPECT_EQ(all["t:fair"].waiters, 1);

  EXPECT_EQ(all["t:rw"].kind, "read-write");
  EXPECT_EQ(all["t:rw"].mode, "read");
  EXPECT_EQ(all["t:rw"].holder_count, 2);

  EXPECT_EQ(all["t:mutex"].kind, "mutex");
  ASSERT_EQ(all["t:mutex"].holders.size(), 1u);
  EXPECT_EQ(all["t:mutex"].holders[0], raw()({"GET", "t:mutex"}).str);

  EXPECT_EQ(all["t:sem"].permits, 3);
  EXPECT_EQ(all["t:sem"].kind, "semaphore or latch");  // no waiter tells which
  EXPECT_EQ(all["t:permits"].kind, "permit-semaphore");
  EXPECT_EQ(all["t:permits"].permits, 2);
  EXPECT_EQ(all["t:permits"].permits_out, 1);
  EXPECT_EQ(all["t:latch"].permits, 4);

  // Auxiliary keys (the fair lock's queue and deadlines, token keys, the permits' zset) are no rows,
  // and neither are the application's keys.
  for (const auto& [name, l] : all) {
    EXPECT_EQ(name.rfind("t:", 0), 0u) << "a row for " << name;
  }
  for (const char* k : {"t:user", "t:plain", "t:list"}) EXPECT_FALSE(all.count(k)) << k;
  EXPECT_EQ(all.size(), 7u);

  // The pattern selects by lock name; the auxiliary keys follow their lock.
  auto some = scan(s, "t:f*");
  ASSERT_EQ(some.size(), 1u);
  EXPECT_EQ(some["t:fair"].queue_length, 1);

  // A waiter that the latch's channel holds tells the kind of a whole number.
  auto awaited = std::async(std::launch::async, [&] { return other.count_down_latch("t:latch").await_for(10s); });
  ASSERT_TRUE(eventually([&] { return scan(s, "t:latch")["t:latch"].kind == "latch"; }));

  // force_unlock, by kind.
  EXPECT_TRUE(s.force_unlock(all["t:mutex"]));
  EXPECT_EQ(raw()({"EXISTS", "t:mutex"}).integer, 0);
  EXPECT_TRUE(s.force_unlock(all["t:rw"]));
  EXPECT_EQ(raw()({"EXISTS", "t:rw"}).integer, 0);
  EXPECT_TRUE(s.force_unlock(all["t:permits"]));
  EXPECT_EQ(raw()({"EXISTS", "t:permits"}).integer + raw()({"EXISTS", "{t:permits}:timeout"}).integer, 0);
  EXPECT_TRUE(s.force_unlock(all["t:latch"]));  // deleting a latch opens it
  ASSERT_EQ(awaited.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(awaited.get());
  // The reentrant lock's waiter is woken and takes it.
  re.unlock();
  EXPECT_TRUE(s.force_unlock(scan(s, "t:re")["t:re"]));
  ASSERT_EQ(blocked_done.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(blocked_done.get());
  fair.unlock();
  ASSERT_EQ(queued_done.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(queued_done.get());
}

TEST_F(lock_scan_test, a_hash_of_many_readers_is_counted_not_copied) {
  // Crashed readers grow a read-write lock's hash past one HSCAN step.
  std::vector<std::string> cmd{"HSET", "big", "mode", "read"};
  for (int i = 0; i < 3000; ++i) {
    cmd.push_back("c0ffee00-0000-4000-8000-000000000000:" + std::to_string(i));
    cmd.push_back("1");
  }
  raw().command(cmd);
  raw()({"PEXPIRE", "big", "60000"});
  lock_scanner s{cfg()};
  auto all = scan(s);
  ASSERT_TRUE(all.count("big"));
  EXPECT_EQ(all["big"].kind, "read-write");
  EXPECT_EQ(all["big"].holder_count, 3000);
  EXPECT_LE(all["big"].holders.size(), 3u);
}

TEST_F(lock_scan_test, an_unreachable_server_throws) {
  auto bad = cfg();
  bad.port = 1;
  bad.connect_timeout = 200ms;
  EXPECT_THROW(lock_scanner{bad}, error);
}

}  // namespace
}  // namespace redlease::test
