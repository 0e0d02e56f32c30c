// SPDX-License-Identifier: MIT
// Locks on a Sentinel-managed master (issue 10 §3–§5): the client finds the master through the
// Sentinels, follows a failover, re-checks every hold on the new master at once, tells the holders
// whose key did not make it, serves waiters after the switch, and asks replicas to acknowledge.
// Real processes: 1 master, 1 replica, 3 Sentinels (tests/support/sentinel_rig.hpp).
#include <gtest/gtest.h>

#include <asio/use_future.hpp>

#include <atomic>
#include <cstdio>
#include <future>
#include <thread>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"
#include "sentinel_rig.hpp"

namespace redlease::test {
namespace {

config sentinel_cfg(const sentinel_rig& rig, std::chrono::milliseconds watchdog = 6000ms) {
  config c;
  for (auto p : rig.sentinel_ports()) c.sentinel.nodes.push_back({"127.0.0.1", p});
  c.sentinel.master_name = rig.master_name();
  c.sentinel.password = rig.options().sentinel_password;
  c.password = rig.options().password;
  c.watchdog_timeout = watchdog;
  c.connect_timeout = 1000ms;
  c.request_timeout = 3000ms;
  return c;
}

// The field of a reentrant hold as Redisson writes it.
bool key_exists(raw_client cl, const std::string& key) { return cl({"EXISTS", key}).integer == 1; }

// With every Sentinel gone, a call fails with no_sentinel, its message naming each one tried. The
// second failure's message is returned: by then every Sentinel known has been tried at least once.
// Empty if none came within 10 s.
std::string second_no_sentinel_text(client& c) {
  std::string text;
  int failures = 0;
  bool came = eventually(
      [&] {
        std::error_code ec;
        c.command({"PING"}, ec);
        if (ec == errc::no_sentinel) {
          ++failures;
          text = last_error_text();
        }
        return failures >= 2;
      },
      10000ms);
  EXPECT_TRUE(came) << "no no_sentinel failure twice: " << text;
  return came ? text : std::string();
}

class sentinel_test : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLEASE_REQUIRE(sentinel_rig::available(), no_redis_server);
  }
};

TEST_F(sentinel_test, locks_go_to_the_master_the_sentinels_name) {
  sentinel_rig rig;
  client c(sentinel_cfg(rig));
  auto l = c.lock("sentinel:basic");
  l.lock();
  EXPECT_TRUE(key_exists(rig.master_client(), "sentinel:basic"));
  // The client checked ROLE, and the URL form works the same way.
  l.unlock();
  auto url = "redis-sentinel://127.0.0.1:" + std::to_string(rig.sentinel_ports()[1]) + "?master=" + rig.master_name();
  client by_url(config::from_url(url));
  EXPECT_TRUE(by_url.lock("sentinel:url").try_lock());
  EXPECT_TRUE(key_exists(rig.master_client(), "sentinel:url"));
}

// `redlease top` through the Sentinels scans the master they name (not the replica, where the key
// is too): the lock is listed once, with its holder.
TEST_F(sentinel_test, top_lists_the_locks_of_the_master_the_sentinels_name) {
  sentinel_rig rig;
  client c(sentinel_cfg(rig));
  auto l = c.lock("sentinel:top");
  l.lock();
  const std::string cmd = std::string(REDLEASE_CLI_PATH) + " top 'sentinel:*' --json --redis 'redis-sentinel://127.0.0.1:" +
                          std::to_string(rig.sentinel_ports()[0]) + "?master=" + rig.master_name() + "'";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd;
  EXPECT_EQ(out.find("{\"lock\":\"sentinel:top\",\"kind\":\"reentrant\""), 0u) << out;
  EXPECT_NE(out.find(c.id()), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one row: " << out;
  l.unlock();
}

TEST_F(sentinel_test, a_replicated_hold_survives_a_failover_without_a_gap) {
  sentinel_rig rig;
  error_log log;
  auto cfg = sentinel_cfg(rig, 6000ms);  // renewals every 2 s
  cfg.on_error = log.hook();
  client c(cfg);
  auto l = c.lock("sentinel:kept");
  std::atomic<int> lost{0};
  l.on_lost([&](const lost_info& i) {
    std::printf("lost: reason %d, %s: %s\n", static_cast<int>(i.reason), i.cause.message().c_str(), i.detail.c_str());
    ++lost;
  });
  l.lock();
  rig.wait_replicated();
  auto old_port = rig.current_master_port();
  // valid() is sampled all through the switch: a gap would show.
  std::atomic<bool> stop{false}, gap{false};
  auto me = this_thread_owner();
  std::thread sampler([&] {
    while (!stop) {
      if (!l.valid(me)) gap = true;
      std::this_thread::sleep_for(1ms);
    }
  });
  auto t0 = steady::now();
  auto new_port = rig.failover();
  std::printf("failover: switch seen by the rig after %lld ms\n", ms_since(t0));
  ASSERT_NE(new_port, old_port);
  // The client noticed and re-checked the hold on the new master, which renewed it there.
  EXPECT_TRUE(eventually([&] { return log.has("switched from"); }, 3000ms));
  EXPECT_TRUE(eventually([&] { return rig.client(new_port)({"PTTL", "sentinel:kept"}).integer > 5000; }, 3000ms));
  // Two more renewal intervals on the new master, and still held, never lost.
  std::this_thread::sleep_for(4000ms);
  stop = true;
  sampler.join();
  EXPECT_FALSE(gap.load());
  EXPECT_EQ(lost.load(), 0);
  EXPECT_TRUE(l.valid());
  EXPECT_GT(rig.client(new_port)({"PTTL", "sentinel:kept"}).integer, 3000);
  l.unlock();
  EXPECT_FALSE(key_exists(rig.client(new_port), "sentinel:kept"));
}

TEST_F(sentinel_test, a_hold_whose_key_missed_the_new_master_is_reported_lost_within_one_interval) {
  sentinel_rig rig;
  auto cfg = sentinel_cfg(rig, 6000ms);  // renewal interval 2 s
  client c(cfg);
  auto watchdog = c.lock("sentinel:gone");
  auto fixed = c.mutex("sentinel:gone-fixed");
  std::promise<lost_info> told, told_fixed;
  watchdog.on_lost([&](const lost_info& i) { told.set_value(i); });
  fixed.on_lost([&](const lost_info& i) { told_fixed.set_value(i); });
  watchdog.lock();
  ASSERT_TRUE(fixed.try_lock(0ms, 60000ms));  // a fixed lease, far from its end
  rig.wait_replicated();
  ASSERT_TRUE(rig.drop_key_on_replica("sentinel:gone"));
  ASSERT_TRUE(rig.drop_key_on_replica("sentinel:gone-fixed"));
  auto token = watchdog.lost_token();
  rig.failover();
  auto switched = steady::now();
  auto f = told.get_future();
  ASSERT_EQ(f.wait_for(2000ms), std::future_status::ready) << "not told within one interval of the switch";
  auto info = f.get();
  std::printf("lost after the switch: %lld ms\n", ms_since(switched));
  EXPECT_EQ(info.reason, lost_reason::deleted);
  EXPECT_EQ(info.cause, make_error_code(errc::master_switched));
  EXPECT_NE(info.detail.find("switched from"), std::string::npos) << info.detail;
  EXPECT_TRUE(token.stop_requested());
  EXPECT_FALSE(watchdog.valid());
  // The fixed-lease hold is checked too (not renewed): 59 s left on its lease change nothing.
  auto g = told_fixed.get_future();
  ASSERT_EQ(g.wait_for(2000ms), std::future_status::ready);
  EXPECT_EQ(g.get().cause, make_error_code(errc::master_switched));
  std::error_code ec;
  watchdog.unlock(ec);
  EXPECT_EQ(ec, make_error_code(errc::lock_lost));
}

TEST_F(sentinel_test, waiters_are_served_on_the_new_master_after_the_switch) {
  sentinel_rig rig;
  client holder(sentinel_cfg(rig));
  client waiter_client(sentinel_cfg(rig));
  auto h = holder.lock("sentinel:wait");
  h.lock();
  rig.wait_replicated();
  auto w = waiter_client.lock("sentinel:wait");
  std::promise<void> got;
  auto acquired = std::async(std::launch::async, [&] {
    bool ok = w.try_lock(20000ms);
    got.set_value();
    if (ok) w.unlock();  // by the owner that took it
    return ok;
  });
  // The waiter is subscribed and asleep before the switch.
  ASSERT_TRUE(eventually([&] { return rig.master_client()({"PUBSUB", "NUMSUB", "redisson_lock__channel:{sentinel:wait}"}).elements.at(1).integer == 1; }));
  auto new_port = rig.failover();
  // It re-subscribes on the new master: the unlock published there wakes it.
  ASSERT_TRUE(eventually([&] { return rig.client(new_port)({"PUBSUB", "NUMSUB", "redisson_lock__channel:{sentinel:wait}"}).elements.at(1).integer == 1; }, 5000ms));
  auto t0 = steady::now();
  h.unlock();
  ASSERT_EQ(got.get_future().wait_for(5000ms), std::future_status::ready);
  // Right after the switch the new master has no replica online (the old master rejoins as one
  // seconds later): neither the unlock nor the grant waits for an acknowledgement.
  std::printf("waiter served %lld ms after the unlock on the new master\n", ms_since(t0));
  EXPECT_LT(ms_since(t0), 3000);
  EXPECT_TRUE(acquired.get());
}

TEST_F(sentinel_test, a_lone_callers_lane_moves_to_the_new_master) {
  sentinel_rig rig;
  auto cfg = sentinel_cfg(rig);
  cfg.client_name = "sentinel-laner";
  cfg.sync_lane = true;
  client c(cfg);
  auto lane_on = [&](std::uint16_t port) {
    return rig.client(port)({"CLIENT", "LIST"}).str.find(" name=sentinel-laner:lane ") != std::string::npos;
  };
  auto old_port = rig.current_master_port();
  ASSERT_TRUE(eventually([&] {
    c.ping();
    return lane_on(old_port) && c.stats().lane_requests > 0;
  }));
  auto new_port = rig.failover();
  // Blocking calls go on through the switch; their lane is opened again, on the new master, and the
  // one to the old master is closed.
  ASSERT_TRUE(eventually([&] {
    try {
      auto l = c.lock("sentinel:lane");
      l.lock(2000ms);
      l.unlock();
    } catch (const std::exception&) {
      return false;
    }
    return lane_on(new_port);
  }, 10000ms));
  EXPECT_TRUE(eventually([&] { return !lane_on(old_port); }, 3000ms)) << "the lane to the old master was kept";
  auto before = c.stats().lane_requests;
  auto l = c.lock("sentinel:lane");
  l.lock(2000ms);
  EXPECT_TRUE(key_exists(rig.client(new_port), "sentinel:lane"));
  l.unlock();
  EXPECT_GT(c.stats().lane_requests, before);
}

TEST_F(sentinel_test, a_frozen_master_is_replaced_and_a_replicated_hold_is_kept) {
  sentinel_rig rig;
  auto cfg = sentinel_cfg(rig, 6000ms);  // interval 2 s: the switch (~2.5 s) fits in the lease
  client c(cfg);
  auto l = c.lock("sentinel:frozen");
  std::atomic<int> lost{0};
  l.on_lost([&](const lost_info&) { ++lost; });
  l.lock();
  rig.wait_replicated();
  auto t0 = steady::now();
  auto old_port = rig.pause_master();
  auto new_port = rig.wait_for_switch(old_port, steady::now() + 15s);
  std::printf("SIGSTOP: switch after %lld ms\n", ms_since(t0));
  EXPECT_TRUE(eventually([&] { return rig.client(new_port)({"PTTL", "sentinel:frozen"}).integer > 4000; }, 4000ms));
  EXPECT_EQ(lost.load(), 0);
  EXPECT_TRUE(l.valid());
  rig.resume(old_port);
  l.unlock();
  EXPECT_FALSE(key_exists(rig.client(new_port), "sentinel:frozen"));
}

TEST_F(sentinel_test, sentinels_with_their_own_password) {
  sentinel_rig_options o;
  o.password = "data-secret";
  o.sentinel_password = "sentinel-secret";
  sentinel_rig rig(o);
  {
    client c(sentinel_cfg(rig));
    EXPECT_TRUE(c.lock("sentinel:auth").try_lock());
  }
  // The CLI: the data password in the URL, the Sentinels' from the environment (never on the
  // command line). The command sees the lock held on the master.
  std::string url = "redis-sentinel://:data-secret@127.0.0.1:" + std::to_string(rig.sentinel_ports()[0]) +
                    "?master=" + rig.master_name();
  std::string cmd = "REDLEASE_SENTINEL_PASSWORD=sentinel-secret " + std::string(REDLEASE_CLI_PATH) + " run --redis '" +
                    url + "' sentinel:cli -- sh -c 'test \"$REDLEASE_LOCK_NAME\" = sentinel:cli'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string no_pw = std::string(REDLEASE_CLI_PATH) + " run --redis '" + url + "' sentinel:cli -- true 2>/dev/null";
  int st = std::system(no_pw.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 69) << "no Sentinel password: unavailable";
  // The Sentinels refuse the data password: a typed error naming what each Sentinel said.
  auto wrong = sentinel_cfg(rig);
  wrong.sentinel.password = "data-secret";
  client c(wrong);
  std::error_code ec;
  auto t0 = steady::now();
  c.lock("sentinel:auth2").try_lock(ec);
  EXPECT_EQ(ec, make_error_code(errc::no_sentinel)) << ec.message();
  EXPECT_LT(ms_since(t0), 3000);
  // Each Sentinel's own words (asked in turn, both refuse the password).
  EXPECT_NE(last_error_text().find("WRONGPASS"), std::string::npos) << last_error_text();
  EXPECT_NE(last_error_text().find(std::to_string(rig.sentinel_ports()[1])), std::string::npos) << last_error_text();
}

TEST_F(sentinel_test, an_unknown_master_name_is_a_typed_error_naming_it) {
  sentinel_rig rig;
  auto cfg = sentinel_cfg(rig);
  cfg.sentinel.master_name = "no-such-master";
  client c(cfg);
  std::error_code ec;
  c.lock("sentinel:x").try_lock(ec);
  EXPECT_EQ(ec, make_error_code(errc::no_sentinel));
  EXPECT_NE(last_error_text().find("'no-such-master'"), std::string::npos) << last_error_text();
}

// A Sentinel whose answer is of no use (here a plain Redis server: it has no SENTINEL command) is
// passed over once, for the next one configured. The cursor used to move twice, once for the
// answer and once more for the connection it dropped: with two Sentinels the client asked the bad
// one for ever and never found the master.
TEST_F(sentinel_test, a_sentinel_that_cannot_answer_is_passed_over_for_the_next) {
  sentinel_rig_options o;
  o.sentinels = 1;
  o.quorum = 1;
  sentinel_rig rig(o);
  redis_server not_a_sentinel;
  auto cfg = sentinel_cfg(rig);
  cfg.replica_ack.replicas = 0;  // finding the master is the point here, not the replica's pace
  cfg.sentinel.nodes.insert(cfg.sentinel.nodes.begin(), host_port{"127.0.0.1", not_a_sentinel.port()});
  cfg.reconnect_min_delay = 10ms;
  cfg.reconnect_max_delay = 100ms;
  client c(cfg);
  std::error_code ec;
  std::string last;
  bool up = eventually(
      [&] {
        c.command({"PING"}, ec);
        if (ec) last = ec.message() + ": " + last_error_text();
        return !ec;
      },
      5000ms);
  EXPECT_TRUE(up) << last;
  EXPECT_TRUE(c.lock("sentinel:passed-over").try_lock());
  EXPECT_TRUE(key_exists(rig.master_client(), "sentinel:passed-over"));
}

// The first Sentinel listed is down: a one-shot caller's first request still finds the master
// through the second (each known Sentinel is asked once before a resolution fails). Before, the
// first request failed with no_sentinel and `redlease status` exited 69.
TEST_F(sentinel_test, a_first_sentinel_that_is_down_does_not_fail_the_first_request) {
  sentinel_rig_options o;
  o.sentinels = 1;
  o.quorum = 1;
  sentinel_rig rig(o);
  std::uint16_t dead = 0;
  {
    redis_server gone;  // a loopback port nothing listens on any more
    dead = gone.port();
  }
  auto cfg = sentinel_cfg(rig);
  cfg.replica_ack.replicas = 0;  // finding the master is the point here, not the replica's pace
  cfg.sentinel.nodes.insert(cfg.sentinel.nodes.begin(), host_port{"127.0.0.1", dead});
  client c(cfg);
  std::error_code ec;
  c.command({"PING"}, ec);
  EXPECT_FALSE(ec) << ec.message() << ": " << last_error_text();
  EXPECT_TRUE(c.lock("sentinel:first-down").try_lock());
  EXPECT_TRUE(key_exists(rig.master_client(), "sentinel:first-down"));
}

// A learnt Sentinel that has gone is forgotten once the others no longer list it: it is no longer
// tried, and no longer named, when the configured one fails too. Before, it stayed in the rotation
// for ever (and the list only grew as Sentinels came and went).
TEST_F(sentinel_test, a_learnt_sentinel_that_has_gone_is_forgotten) {
  sentinel_rig_options o;
  o.sentinels = 2;
  o.quorum = 1;
  sentinel_rig rig(o);
  const auto s0 = rig.sentinel_ports()[0], s1 = rig.sentinel_ports()[1];
  auto cfg = sentinel_cfg(rig);
  cfg.sentinel.nodes.resize(1);  // s1 is learnt from s0's SENTINEL SENTINELS
  cfg.replica_ack.replicas = 0;
  cfg.client_name = "sentinel-forgets";
  cfg.sync_lane = false;  // every call on the connection that is killed below
  cfg.reconnect_min_delay = 10ms;
  cfg.reconnect_max_delay = 100ms;
  client c(cfg);
  c.ping();
  const auto master_port = rig.current_master_port();
  // Drops the client's connection to the master (and the Sentinels' links, which come back).
  auto kill_links = [&] {
    return rig.client(master_port)({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}).integer;
  };
  // The client reconnects, asking s0 where the master is.
  auto reconnect = [&] {
    ASSERT_GE(kill_links(), 1);
    std::error_code ec;
    ASSERT_TRUE(eventually([&] {
      c.command({"PING"}, ec);
      return !ec;
    }));
  };

  rig.sentinel(1).stop();
  // s0 stops listing s1: reset, since its s_down flag for a stopped peer comes and goes with a
  // short down-after (the flag itself is sentinel_fsm_test's).
  ASSERT_EQ(rig.sentinel_client(0)({"SENTINEL", "RESET", rig.master_name()}).integer, 1);
  ASSERT_TRUE(eventually([&] { return rig.sentinel_client(0)({"SENTINEL", "SENTINELS", rig.master_name()}).elements.empty(); }));
  // A reconnection asks s0 for the Sentinels along with the master; the next one's question is
  // answered after that answer, on the same connection.
  reconnect();
  reconnect();

  // With s0 gone too, a reconnection finds no Sentinel.
  rig.sentinel(0).stop();
  ASSERT_GE(kill_links(), 1);
  const std::string text = second_no_sentinel_text(c);
  EXPECT_NE(text.find("127.0.0.1:" + std::to_string(s0)), std::string::npos) << text;
  EXPECT_EQ(text.find("127.0.0.1:" + std::to_string(s1)), std::string::npos) << "s1 is still tried: " << text;
}

// The periodic poll refreshes the Sentinels too: one that has gone is forgotten while the master
// stays put, with no reconnection to ask. s1 stops, and s0 is reset so that it lists s1 no more
// (its s_down flag for a stopped peer comes and goes with a short down-after). The client reaches
// s0 through a proxy, whose replies show the polls going on.
TEST_F(sentinel_test, the_poll_forgets_a_sentinel_that_has_gone) {
  sentinel_rig_options o;
  o.sentinels = 2;
  o.quorum = 1;
  sentinel_rig rig(o);
  const auto s1 = rig.sentinel_ports()[1];
  fault_proxy to_s0(rig.sentinel_ports()[0]);
  auto cfg = sentinel_cfg(rig);
  cfg.sentinel.nodes = {{"127.0.0.1", to_s0.port()}};  // s1 is learnt from s0's SENTINEL SENTINELS
  cfg.sentinel.poll_interval = 100ms;
  cfg.replica_ack.replicas = 0;
  cfg.reconnect_min_delay = 10ms;
  cfg.reconnect_max_delay = 100ms;
  client c(cfg);
  c.ping();
  const auto master_port = rig.current_master_port();
  rig.sentinel(1).stop();
  ASSERT_EQ(rig.sentinel_client(0)({"SENTINEL", "RESET", rig.master_name()}).integer, 1);
  ASSERT_TRUE(eventually([&] { return rig.sentinel_client(0)({"SENTINEL", "SENTINELS", rig.master_name()}).elements.empty(); }));
  // Polls answered since: each poll's replies come in one burst (the watch connection may add one
  // when it resubscribes through s0, and a burst may split in two). After six, a poll made after
  // the reset has been answered in full.
  auto seen = to_s0.forwarded_down();
  int bursts = 0;
  ASSERT_TRUE(eventually([&] {
    if (auto now = to_s0.forwarded_down(); now != seen) {
      seen = now;
      ++bursts;
    }
    return bursts >= 6;
  }));

  // With s0 gone too, a reconnection finds no Sentinel.
  rig.sentinel(0).stop();
  ASSERT_GE(rig.client(master_port)({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}).integer, 1);
  const std::string text = second_no_sentinel_text(c);
  EXPECT_NE(text.find("127.0.0.1:" + std::to_string(to_s0.port())), std::string::npos) << text;
  EXPECT_EQ(text.find("127.0.0.1:" + std::to_string(s1)), std::string::npos) << "s1 is still tried: " << text;
}

TEST_F(sentinel_test, acquisitions_wait_for_a_replica_and_roll_back_when_none_acknowledges) {
  sentinel_rig rig;
  auto cfg = sentinel_cfg(rig);
  cfg.replica_ack.timeout = 200ms;
  cfg.replica_ack.retry = false;
  client c(cfg);
  auto l = c.lock("sentinel:ack");
  l.lock();  // replicas: auto → 1, since the master lists one
  l.unlock();
  auto stats = rig.master_client()({"INFO", "commandstats"}).str;
  EXPECT_NE(stats.find("cmdstat_wait:calls="), std::string::npos) << "no WAIT went out";
  // A replica that does not acknowledge: the grant is given back and reported.
  rig.replica().pause();
  std::error_code ec;
  auto t0 = steady::now();
  EXPECT_FALSE(l.try_lock(0ms, ec));
  EXPECT_EQ(ec, make_error_code(errc::not_replicated)) << ec.message();
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_NE(last_error_text().find("0 of 1 replicas"), std::string::npos) << last_error_text();
  EXPECT_FALSE(key_exists(rig.master_client(), "sentinel:ack"));
  rig.replica().resume();
}

// A Sentinel-managed master that answers READONLY has been demoted, and the client moves on within a
// poll: an acquisition with time left waits it out. Before, it failed at once with server_readonly.
// (The master is made a replica for half a second with REPLICAOF, faster than the Sentinels look.)
TEST_F(sentinel_test, an_acquisition_waits_out_a_master_that_answers_readonly) {
  sentinel_rig rig;
  client c(sentinel_cfg(rig));
  auto l = c.lock("sentinel:readonly");
  ASSERT_TRUE(l.try_lock());  // connected, scripts loaded
  l.unlock();
  auto master = rig.master_client();
  ASSERT_FALSE(master({"REPLICAOF", "127.0.0.1", "1"}).is_error());
  ASSERT_TRUE(master({"SET", "sentinel:readonly:probe", "x"}).is_error()) << "the master still takes writes";
  auto got = std::async(std::launch::async, [&] {
    std::error_code ec;
    bool ok = l.try_lock(10000ms, ec);
    std::string words = last_error_text();
    if (ok) l.unlock();  // by the thread that took it
    return std::make_tuple(ok, ec, words);
  });
  EXPECT_EQ(got.wait_for(500ms), std::future_status::timeout) << "it did not wait";
  ASSERT_FALSE(master({"REPLICAOF", "NO", "ONE"}).is_error());
  ASSERT_EQ(got.wait_for(5000ms), std::future_status::ready);
  auto [ok, ec, words] = got.get();
  EXPECT_TRUE(ok) << ec.message() << ": " << words;
}

// WAIT calls the server on `cl` has run.
long long wait_calls(raw_client cl) {
  auto s = cl({"INFO", "commandstats"}).str;
  auto at = s.find("cmdstat_wait:calls=");
  return at == std::string::npos ? 0 : std::stoll(s.substr(at + 19));
}

// Auto acknowledgement follows the master's replicas, not the count at connection time: the client
// reaches the new master seconds before Sentinel makes the old master its replica (ROLE lists none
// then), and the poll's ROLE turns acknowledgement back on once it has. Before, it stayed off for
// the connection's life, and a grant no replica had was reported acquired.
TEST_F(sentinel_test, auto_acknowledgement_comes_back_when_the_old_master_rejoins_as_a_replica) {
  sentinel_rig rig;
  auto cfg = sentinel_cfg(rig);
  cfg.replica_ack.timeout = 200ms;
  cfg.replica_ack.retry = false;
  cfg.sentinel.poll_interval = 200ms;
  client c(cfg);
  auto l = c.lock("sentinel:ack:after");
  l.lock();
  l.unlock();
  ASSERT_GT(wait_calls(rig.master_client()), 0) << "no WAIT before the failover";
  auto new_port = rig.failover();
  // The old master becomes the new master's replica (Sentinel reconfigures it ~10 s later).
  ASSERT_TRUE(eventually(
      [&] {
        try {
          return rig.wait_replicated(200ms) >= 1;
        } catch (const std::exception&) {
          return false;
        }
      },
      30000ms))
      << "the old master never became a replica";
  // Within a few polls a grant asks for the replica's acknowledgement again.
  bool acked = eventually(
      [&] {
        auto before = wait_calls(rig.client(new_port));
        std::error_code ec;  // not_replicated while the replica catches up: WAIT went out
        if (l.try_lock(0ms, ec)) l.unlock();
        return wait_calls(rig.client(new_port)) > before;
      },
      5000ms);
  EXPECT_TRUE(acked) << "no WAIT after the failover: auto acknowledgement stayed off";
  rig.replica().pause();
  std::error_code ec;
  EXPECT_FALSE(l.try_lock(0ms, ec));
  EXPECT_EQ(ec, make_error_code(errc::not_replicated)) << ec.message();
  rig.replica().resume();
}

// Without +role the client cannot see the replicas: auto acknowledgement asks for one rather than
// none (it was silently off), and the refusal is reported once per client, not per connection.
TEST_F(sentinel_test, without_role_auto_acknowledgement_asks_one_replica_and_says_so_once) {
  sentinel_rig rig;
  auto acl = rig.master_client()({"ACL", "SETUSER", "default", "-role"});
  ASSERT_FALSE(acl.is_error()) << acl.str;
  error_log log;
  auto cfg = sentinel_cfg(rig);
  cfg.on_error = log.hook();
  cfg.replica_ack.timeout = 200ms;
  cfg.replica_ack.retry = false;
  client c(cfg);
  auto l = c.lock("sentinel:ack:norole");
  auto before = wait_calls(rig.master_client());
  l.lock();
  l.unlock();
  EXPECT_GE(wait_calls(rig.master_client()), before + 2) << "no WAIT without +role";
  // A waiter brings up the pub/sub connection; the blocking calls have their lane by now.
  auto other = c.new_owner();
  l.async_lock(other, asio::use_future).get();
  EXPECT_FALSE(l.try_lock(300ms));
  l.async_unlock(other, asio::use_future).get();
  EXPECT_EQ(log.count("ROLE refused"), 1u);
  EXPECT_TRUE(log.has("replica_ack asks 1")) << (log.lines.empty() ? "" : log.lines[0]);
  rig.replica().pause();
  std::error_code ec;
  EXPECT_FALSE(l.try_lock(0ms, ec));
  EXPECT_EQ(ec, make_error_code(errc::not_replicated)) << ec.message();
  rig.replica().resume();
}

}  // namespace
}  // namespace redlease::test
