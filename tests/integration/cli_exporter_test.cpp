// SPDX-License-Identifier: MIT
// `redlease exporter`, the built binary run as a child process against a real redis-server and
// scraped over HTTP as Prometheus would: every kind counted, held, with its holders and waiters;
// prefix labels and their cap; no lock name in the output; up 0 (and no lock samples) while Redis is
// down, 1 again when it is back; scrapes that send Redis nothing; SIGTERM exits 0; the usage and
// unavailable statuses.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_process.hpp"
#include "exporter_scrape.hpp"
#include "lock_test_support.hpp"
#include "loopback_socket.hpp"

namespace redlease::test {
namespace {

// A waiter for the lock `name` (of lock_of_kind's `kind`) on a thread of its own: whether it got the
// lock (and let it go) within 20 s.
std::future<bool> waiter(client& c, const std::string& kind, const std::string& name) {
  return std::async(std::launch::async, [&c, kind, name] {
    auto l = lock_of_kind(c, kind, name);
    const bool got = l.try_lock(20s);
    if (got) l.unlock();
    return got;
  });
}

class cli_exporter_test : public lock_fixture {
 protected:
  // SIGTERM's clean stop waits for civetweb's listener (about 1.5 s a process): one test checks it,
  // the others do not wait for it.
  void TearDown() override {
    for (auto& p : procs_)
      if (p->running()) ::kill(p->pid(), SIGKILL);
    procs_.clear();
    lock_fixture::TearDown();
  }
  // Starts `redlease exporter ARGS --redis URL --listen 127.0.0.1:0 --interval INTERVAL` and returns
  // the port it printed (0, a test failure, if it printed none).
  int start(std::vector<std::string> args, const std::string& interval = "1s") {
    args.insert(args.begin(), "exporter");
    for (const char* a : {"--listen", "127.0.0.1:0", "--interval"}) args.emplace_back(a);
    args.push_back(interval);
    args.push_back("--redis");
    args.push_back(server().url());
    const auto n = std::to_string(procs_.size());
    procs_.push_back(std::make_unique<cli_process>(REDLEASE_CLI_PATH, args, std::vector<std::string>{},
                                                   dir_.path("out" + n), dir_.path("err" + n)));
    auto& p = *procs_.back();
    const std::string marker = "listening on http://127.0.0.1:";
    int port = 0;
    EXPECT_TRUE(eventually(
        [&] {
          const auto out = p.out();
          const auto at = out.find(marker);
          if (at != std::string::npos) port = std::atoi(out.c_str() + at + marker.size());
          return port != 0 || !p.running();
        },
        10000ms))
        << p.err();
    EXPECT_NE(port, 0) << p.out() << p.err();
    return port;
  }
  // Runs `redlease exporter ARGS` to its end; its status.
  int run(std::vector<std::string> args) {
    args.insert(args.begin(), "exporter");
    const auto n = std::to_string(procs_.size());
    procs_.push_back(std::make_unique<cli_process>(REDLEASE_CLI_PATH, args, std::vector<std::string>{},
                                                   dir_.path("out" + n), dir_.path("err" + n)));
    return procs_.back()->wait(10000ms);
  }
  // Scrapes until `cond` holds of the body (a fresh pass each second); the last body.
  std::string scrape_until(int port, const std::function<bool(const std::string&)>& cond) {
    std::string body;
    EXPECT_TRUE(eventually([&] { return cond(body = scrape(port)); }, 15000ms)) << body;
    return body;
  }

  scratch_dir dir_{"redlease-exporter-test"};
  std::vector<std::unique_ptr<cli_process>> procs_;
};

TEST_F(cli_exporter_test, every_kind_is_counted_with_its_holders_and_waiters_and_no_name_shows) {
  client c{cfg()};
  client other{cfg()};
  auto re = c.lock("app:orders:re");
  re.lock();
  auto blocked = waiter(other, "reentrant", "app:orders:re");
  auto fair = c.fair_lock("app:orders:fair");
  fair.lock();
  auto queued = waiter(other, "fair", "app:orders:fair");
  auto r1 = c.read_lock("app:orders:rw");
  auto r2 = other.read_lock("app:orders:rw");
  r1.lock();
  r2.lock();
  auto m = c.mutex("app:orders:mutex");
  m.lock();
  auto sem = c.semaphore("app:orders:sem");
  ASSERT_TRUE(sem.try_set_permits(1));
  ASSERT_TRUE(sem.try_acquire(1));
  auto sem_waiter = std::async(std::launch::async, [&] { return other.semaphore("app:orders:sem").try_acquire(1, 20s); });
  auto ps = c.permit_semaphore("app:orders:permits");
  ASSERT_TRUE(ps.try_set_permits(3));
  auto permit = ps.try_acquire(1, 0ms);
  ASSERT_TRUE(permit.valid());
  auto latch = c.count_down_latch("app:orders:latch");
  ASSERT_TRUE(latch.try_set_count(2));
  auto latch_waiter =
      std::async(std::launch::async, [&] { return other.count_down_latch("app:orders:latch").await_for(20s); });
  // A holder that crashed with a lock of no expiry (an incident the exporter points out).
  raw()({"HSET", "app:orders:stuck", "c0ffee00-0000-4000-8000-000000000000:1", "1"});

  const int port = start({});
  ASSERT_NE(port, 0);
  const auto body = scrape_until(port, [](const std::string& b) {
    return sample(b, R"(redlease_redis_lock_waiters{kind="reentrant"})") == 1 &&
           sample(b, R"(redlease_redis_lock_waiters{kind="fair"})") == 1 &&
           sample(b, R"(redlease_redis_lock_waiters{kind="semaphore"})") == 1 &&
           sample(b, R"(redlease_redis_lock_waiters{kind="latch"})") == 1;
  });
  const std::vector<std::pair<std::string, double>> expected{
      {R"(redlease_redis_locks{kind="reentrant"})", 2},
      {R"(redlease_redis_locks{kind="fair"})", 1},
      {R"(redlease_redis_locks{kind="read_write"})", 1},
      {R"(redlease_redis_locks{kind="mutex"})", 1},
      {R"(redlease_redis_locks{kind="semaphore"})", 1},
      {R"(redlease_redis_locks{kind="permit_semaphore"})", 1},
      {R"(redlease_redis_locks{kind="latch"})", 1},
      {R"(redlease_redis_locks{kind="semaphore_or_latch"})", 0},
      {R"(redlease_redis_locks_held{kind="reentrant"})", 2},
      {R"(redlease_redis_locks_held{kind="fair"})", 1},
      {R"(redlease_redis_locks_held{kind="read_write"})", 1},
      {R"(redlease_redis_locks_held{kind="mutex"})", 1},
      {R"(redlease_redis_locks_held{kind="permit_semaphore"})", 1},
      {R"(redlease_redis_locks_held{kind="semaphore"})", 0},
      {R"(redlease_redis_locks_held{kind="latch"})", 0},
      {R"(redlease_redis_lock_holders{kind="read_write"})", 2},
      {R"(redlease_redis_lock_holders{kind="reentrant"})", 2},
      {R"(redlease_redis_lock_waiters{kind="read_write"})", 0},
      {R"(redlease_redis_lock_waiters{kind="mutex"})", 0},
      {R"(redlease_redis_lock_without_expiry{kind="reentrant"})", 1},
      {R"(redlease_redis_lock_without_expiry{kind="mutex"})", 0},
      {R"(redlease_redis_semaphore_permits_available{kind="semaphore"})", 0},
      {R"(redlease_redis_semaphore_permits_available{kind="permit_semaphore"})", 2},
      {"redlease_redis_semaphore_permits_out", 1},
      {"redlease_redis_latch_count", 2},
      {"redlease_exporter_up", 1},
      {"redlease_exporter_scan_errors_total", 0},
  };
  for (const auto& [series, value] : expected) EXPECT_EQ(sample(body, series), value) << series << "\n" << body;
  EXPECT_GT(sample(body, R"(redlease_redis_lock_oldest_hold_seconds{kind="reentrant"})").value_or(0), 0) << body;
  EXPECT_GT(sample(body, R"(redlease_redis_lock_oldest_hold_seconds{kind="mutex"})").value_or(0), 0) << body;
  EXPECT_GE(sample(body, "redlease_exporter_scan_keys").value_or(0), 8);
  EXPECT_TRUE(sample(body, "redlease_exporter_last_scan_timestamp_seconds"));
  EXPECT_EQ(body.find("app:"), std::string::npos) << "a lock name in the output";
  EXPECT_EQ(body.find("orders"), std::string::npos) << "a lock name in the output";
  EXPECT_EQ(body.find("prefix="), std::string::npos) << "no prefix label unless asked";

  // PATTERN selects by lock name; the fair lock's queue, whose key the pattern does not match,
  // still makes it a fair lock with a waiter.
  const int fair_only = start({"app:orders:f*"});
  ASSERT_NE(fair_only, 0);
  const auto some = scrape(fair_only);
  EXPECT_EQ(sample(some, R"(redlease_redis_locks{kind="fair"})"), 1) << some;
  EXPECT_EQ(sample(some, R"(redlease_redis_lock_waiters{kind="fair"})"), 1) << some;
  EXPECT_EQ(sample(some, R"(redlease_redis_locks{kind="reentrant"})"), 0) << some;
  EXPECT_EQ(sample(some, R"(redlease_redis_locks{kind="mutex"})"), 0) << some;

  // The oldest hold ages from one pass to the next: it is the same hold.
  const double first = sample(body, R"(redlease_redis_lock_oldest_hold_seconds{kind="mutex"})").value_or(0);
  scrape_until(port, [&](const std::string& b) {
    return sample(b, R"(redlease_redis_lock_oldest_hold_seconds{kind="mutex"})").value_or(0) > first + 1;
  });

  re.unlock();
  fair.unlock();
  sem.release(1);
  latch.count_down();
  latch.count_down();
  EXPECT_TRUE(blocked.get());
  EXPECT_TRUE(queued.get());
  EXPECT_TRUE(sem_waiter.get());
  EXPECT_TRUE(latch_waiter.get());
}

TEST_F(cli_exporter_test, prefixes_label_the_samples_and_the_cap_folds_the_rest_into_other) {
  client c{cfg()};
  std::vector<detail::lock_handle> held;
  for (const char* name : {"billing:a", "billing:b", "billing:c", "orders:x", "orders:y", "solo"}) {
    held.emplace_back(c.lock(name));
    held.back().lock();
  }
  const int all = start({"--prefix-separator", ":", "--prefix-depth", "1"});
  const int capped = start({"--prefix-depth", "1", "--max-prefixes", "1"});
  ASSERT_NE(all, 0);
  ASSERT_NE(capped, 0);
  const auto body = scrape_until(all, [](const std::string& b) { return sample(b, "redlease_exporter_up") == 1; });
  EXPECT_EQ(sample(body, R"(redlease_redis_locks{kind="reentrant",prefix="billing"})"), 3) << body;
  EXPECT_EQ(sample(body, R"(redlease_redis_locks{kind="reentrant",prefix="orders"})"), 2) << body;
  // A name with nothing after its prefix would be the whole name.
  EXPECT_EQ(sample(body, R"(redlease_redis_locks{kind="reentrant",prefix="_none"})"), 1) << body;
  EXPECT_EQ(sample(body, R"(redlease_redis_locks_held{kind="reentrant",prefix="billing"})"), 3) << body;
  EXPECT_EQ(sample(body, "redlease_exporter_prefixes_folded"), 0) << body;
  EXPECT_EQ(body.find("solo"), std::string::npos);

  const auto folded = scrape_until(capped, [](const std::string& b) { return sample(b, "redlease_exporter_up") == 1; });
  EXPECT_EQ(sample(folded, R"(redlease_redis_locks{kind="reentrant",prefix="billing"})"), 3) << folded;
  EXPECT_EQ(sample(folded, R"(redlease_redis_locks{kind="reentrant",prefix="_other"})"), 3) << folded;
  EXPECT_FALSE(sample(folded, R"(redlease_redis_locks{kind="reentrant",prefix="orders"})")) << folded;
  EXPECT_EQ(sample(folded, "redlease_exporter_prefixes_folded"), 2) << folded;
  // A label once given is kept, though orders now has more locks (series do not flap).
  for (const char* name : {"orders:z1", "orders:z2", "orders:z3", "orders:z4"}) {
    held.emplace_back(c.lock(name));
    held.back().lock();
  }
  const auto later = scrape_until(capped, [](const std::string& b) {
    return sample(b, R"(redlease_redis_locks{kind="reentrant",prefix="_other"})") == 7;
  });
  EXPECT_EQ(sample(later, R"(redlease_redis_locks{kind="reentrant",prefix="billing"})"), 3) << later;

  const int by_node = start({"--by-node"});
  ASSERT_NE(by_node, 0);
  const auto nodes = scrape(by_node);
  // Outside a cluster the scan names no node (lock_scan.hpp).
  EXPECT_EQ(sample(nodes, R"(redlease_redis_locks{kind="reentrant",node=""})"), 10) << nodes;
  EXPECT_EQ(sample(nodes, R"(redlease_redis_locks_held{kind="reentrant"})"), 10) << "the node on one family only";
  for (auto& l : held) l.unlock();
}

TEST_F(cli_exporter_test, a_redis_that_stops_turns_up_to_0_and_drops_the_lock_samples_until_it_is_back) {
  const int port = start({});
  ASSERT_NE(port, 0);
  auto body = scrape_until(port, [](const std::string& b) { return sample(b, "redlease_exporter_up") == 1; });
  EXPECT_TRUE(sample(body, R"(redlease_redis_locks{kind="mutex"})"));

  server().stop();
  body = scrape_until(port, [](const std::string& b) { return sample(b, "redlease_exporter_up") == 0; });
  EXPECT_EQ(body.find("redlease_redis_"), std::string::npos) << "stale lock samples:\n" << body;
  EXPECT_GE(sample(body, "redlease_exporter_scan_errors_total").value_or(0), 1);
  EXPECT_TRUE(sample(body, "redlease_exporter_last_scan_timestamp_seconds"));
  // More failed passes, not a report each: one per change of the error (the first pass to fail
  // may fail at another step than the next ones).
  const double errors = sample(body, "redlease_exporter_scan_errors_total").value_or(0);
  scrape_until(port, [&](const std::string& b) {
    return sample(b, "redlease_exporter_scan_errors_total").value_or(0) >= errors + 2;
  });
  auto& p = *procs_.back();
  std::istringstream err(p.err());
  std::vector<std::string> reports;
  for (std::string line; std::getline(err, line);)
    if (line.find("scan pass failed") != std::string::npos) {
      EXPECT_TRUE(reports.empty() || reports.back() != line) << "reported twice: " << line;
      reports.push_back(line);
    }
  EXPECT_GE(reports.size(), 1u) << p.err();
  EXPECT_LE(reports.size(), 2u) << p.err();

  server().start();
  body = scrape_until(port, [](const std::string& b) { return sample(b, "redlease_exporter_up") == 1; });
  EXPECT_TRUE(sample(body, R"(redlease_redis_locks{kind="mutex"})")) << body;
  EXPECT_NE(p.err().find("scan passes succeed again"), std::string::npos) << p.err();

  ASSERT_EQ(::kill(p.pid(), SIGTERM), 0);
  EXPECT_EQ(p.wait(10000ms), 0) << p.err();
}

// Bounded cost: scrapes are served from the last pass and never cause one.
TEST_F(cli_exporter_test, scrapes_send_no_command_to_redis) {
  const auto scans = [&] {
    const auto info = raw()({"INFO", "commandstats"}).str;
    const auto at = info.find("cmdstat_scan:calls=");
    return at == std::string::npos ? 0 : std::atoll(info.c_str() + at + 19);
  };
  // The long interval: the first pass (before the listener opens) is the only one in this test.
  const int port = start({}, "1h");
  ASSERT_NE(port, 0);
  const auto after_first_pass = scans();
  EXPECT_GE(after_first_pass, 1);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(sample(scrape(port), "redlease_exporter_up"), 1);
  EXPECT_EQ(scans(), after_first_pass);
}

TEST_F(cli_exporter_test, usage_errors_exit_64_and_an_unavailable_redis_or_port_69) {
  const std::string url = server().url();
  for (const char* bad : {"localhost:9716", "127.0.0.1", "127.0.0.1:99999", "[::1]9716", ":9716"})
    EXPECT_EQ(run({"--listen", bad, "--redis", url}), 64) << bad;
  EXPECT_EQ(run({"--listen", "127.0.0.1:0", "--interval", "500ms", "--redis", url}), 64);
  EXPECT_EQ(run({"--listen", "127.0.0.1:0", "--prefix-separator", "::", "--redis", url}), 64);
  loopback_socket taken(true);
  EXPECT_EQ(run({"--listen", "127.0.0.1:" + std::to_string(taken.port()), "--redis", url}), 69);
  EXPECT_NE(procs_.back()->err().find("cannot listen on"), std::string::npos) << procs_.back()->err();
  loopback_socket refused(false);
  EXPECT_EQ(run({"--listen", "127.0.0.1:0", "--redis", "redis://127.0.0.1:" + std::to_string(refused.port())}), 69);
}

}  // namespace
}  // namespace redlease::test
