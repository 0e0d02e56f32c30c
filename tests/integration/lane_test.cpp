// SPDX-License-Identifier: MIT
// The lane (config::sync_lane): a lone blocking caller's own connection to the node, written and
// read on the caller's thread. Against a real redis-server, and through the fault proxy for the
// failures.
#include "redlease/client.hpp"

#include <gtest/gtest.h>

#include <asio/use_future.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"
#include "redlease/config.hpp"
#include "redlease/error.hpp"
#include "redlease/lock.hpp"

namespace redlease::test {
namespace {

class lane_test : public redis_fixture {
 protected:
  config cfg(std::uint16_t port = 0) {
    config c = config::from_url("redis://127.0.0.1:" + std::to_string(port ? port : server().port()));
    c.connect_timeout = 500ms;
    c.request_timeout = 500ms;
    c.reconnect_min_delay = 10ms;
    c.reconnect_max_delay = 100ms;
    c.client_name = "laner";
    c.sync_lane = true;
    return c;
  }
  // Sync PINGs until one goes on the lane (it is opened in the background at the first call).
  static bool lane_in_use(client& c) {
    auto before = c.stats().lane_requests;
    return eventually([&] {
      c.ping();
      return c.stats().lane_requests > before;
    });
  }
  // The server's id of the connection named `name` (0: none).
  long long client_id(const std::string& name) {
    auto list = server().client()({"CLIENT", "LIST"}).str;
    auto at = list.find(" name=" + name + " ");
    if (at == std::string::npos) return 0;
    auto line = list.rfind('\n', at);
    line = line == std::string::npos ? 0 : line + 1;
    return std::stoll(list.substr(line + 3, list.find(' ', line) - line - 3));
  }
};

TEST_F(lane_test, a_lone_blocking_caller_writes_and_reads_on_its_own_connection) {
  for (auto policy : {sync_wait_policy::latency_first, sync_wait_policy::cpu_first}) {
    SCOPED_TRACE(policy == sync_wait_policy::latency_first ? "latency_first" : "cpu_first");
    config conf = cfg();
    conf.sync_wait = policy;
    client c(conf);
    ASSERT_TRUE(lane_in_use(c));
    EXPECT_NE(client_id("laner:lane"), 0) << "the lane is a connection of its own, named after the client";
    auto l = c.lock("lane-lock");
    auto before = c.stats();
    for (int i = 0; i < 100; ++i) {
      l.lock();
      l.unlock();
    }
    auto after = c.stats();
    // Every request of the loop went on the lane: the command connection carried none of them.
    EXPECT_GE(after.lane_requests - before.lane_requests, 200u);
    EXPECT_EQ(after.commands - after.lane_requests, before.commands - before.lane_requests);
    // A thread's asynchronous request is never overtaken by its next blocking one on the lane.
    for (int i = 0; i < 200; ++i) {
      c.async_command({"SET", "lane-order", std::to_string(i)}, [](std::error_code, reply) {});
      ASSERT_EQ(c.command({"GET", "lane-order"}).str, std::to_string(i));
    }
  }
}

// A request a reply's handler sends (the EVAL after NOSCRIPT) belongs to the same blocking call: it
// goes on the call's lane too, handed over through the I/O guard while the call reads its replies
// there, and the call's thread reads its reply. Before the hand-over was explicit, a thread-local did
// this; a hand-over that ended with the call's own code would send the fallback on the command
// connection.
TEST_F(lane_test, the_noscript_fallback_of_a_call_on_the_lane_goes_on_the_lane) {
  client c(cfg());
  ASSERT_TRUE(lane_in_use(c));
  auto l = c.lock("lane-noscript");
  l.lock();
  l.unlock();
  for (int i = 0; i < 20; ++i) {
    server().client()({"SCRIPT", "FLUSH"});
    auto before = c.stats();
    l.lock();
    auto after = c.stats();
    l.unlock();
    // EVALSHA refused, then EVAL: two requests of the call, both on the lane.
    EXPECT_EQ(after.lane_requests - before.lane_requests, 2u) << i;
    EXPECT_EQ(after.commands - after.lane_requests, before.commands - before.lane_requests) << i;
  }
}

TEST_F(lane_test, sync_lane_false_opens_no_second_connection) {
  config conf = cfg();
  conf.sync_lane = false;
  client c(conf);
  for (int i = 0; i < 50; ++i) c.ping();
  EXPECT_EQ(c.stats().lane_requests, 0u);
  EXPECT_EQ(client_id("laner:lane"), 0);
}

TEST_F(lane_test, several_blocking_callers_share_the_pipelined_connection) {
  client c(cfg());
  ASSERT_TRUE(lane_in_use(c));
  // While four threads call at once, at most one of them is alone at any moment: most requests go
  // through the I/O thread's pipeline, and every reply reaches its own caller.
  std::atomic<int> wrong{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        auto v = std::to_string(t) + ":" + std::to_string(i);
        if (c.command({"ECHO", v}).str != v) ++wrong;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong, 0);
}

TEST_F(lane_test, a_lane_the_server_closed_is_replaced_and_no_call_fails) {
  client c(cfg());
  ASSERT_TRUE(lane_in_use(c));
  auto id = client_id("laner:lane");
  ASSERT_NE(id, 0);
  EXPECT_EQ(server().client()({"CLIENT", "KILL", "ID", std::to_string(id)}).integer, 1);
  // The next calls see the closed lane before writing on it and go the usual way; a new lane
  // follows.
  for (int i = 0; i < 20; ++i) EXPECT_EQ(c.command({"ECHO", "after-kill"}).str, "after-kill");
  ASSERT_TRUE(lane_in_use(c));
  auto again = client_id("laner:lane");
  EXPECT_NE(again, 0);
  EXPECT_NE(again, id);
}

TEST_F(lane_test, a_lane_refused_by_maxclients_is_not_an_error) {
  error_log log;
  config conf = cfg();
  conf.on_error = log.hook();
  client c(conf);
  // An asynchronous call opens no lane.
  EXPECT_EQ(c.async_command({"PING"}, asio::use_future).get().str, "PONG");
  // The server is full: every connection it has now, this one included, and no more.
  auto rc = server().client();
  auto list = rc({"CLIENT", "LIST"}).str;
  auto clients = std::count(list.begin(), list.end(), '\n');
  rc({"CONFIG", "SET", "maxclients", std::to_string(clients)});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(c.command({"ECHO", "no-lane"}).str, "no-lane");
  EXPECT_EQ(c.stats().lane_requests, 0u);
  // Room again: the lane is tried again (no sooner than a second later) and used.
  rc({"CONFIG", "SET", "maxclients", "10000"});
  EXPECT_TRUE(lane_in_use(c));
  EXPECT_EQ(log.count(""), 0u) << "a refused lane is not worth a report";
}

TEST_F(lane_test, a_timed_out_request_keeps_its_place_and_its_late_reply_is_dropped) {
  config conf = cfg();
  conf.request_timeout = 300ms;
  client c(conf);
  ASSERT_TRUE(lane_in_use(c));
  server().pause();
  auto start = steady::now();
  std::error_code ec;
  c.command({"ECHO", "late"}, ec);
  auto took = ms_since(start);
  EXPECT_EQ(ec, errc::request_timeout) << ec.message();
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 300 + 1000) << "the caller waits for its own request only";
  server().resume();
  // The late reply is the I/O thread's to read and drop; every later call gets its own reply.
  for (int i = 0; i < 50; ++i) {
    auto v = "after-" + std::to_string(i);
    ASSERT_EQ(c.command({"ECHO", v}).str, v);
  }
  ASSERT_TRUE(lane_in_use(c));
}

TEST_F(lane_test, a_reply_lost_with_the_lane_fails_the_request_that_ran) {
  fault_proxy proxy(server().port());
  client c(cfg(proxy.port()));
  ASSERT_TRUE(lane_in_use(c));
  proxy.lose_next_reply();
  std::error_code ec;
  c.command({"INCR", "lane-lost"}, ec);
  EXPECT_EQ(ec, errc::connection_lost) << ec.message();
  // It ran once, and was not sent again.
  EXPECT_EQ(server().client()({"GET", "lane-lost"}).str, "1");
  EXPECT_EQ(c.command({"INCR", "lane-lost"}).integer, 2);
  ASSERT_TRUE(lane_in_use(c));
}

// A lone blocking caller's acquisition is on the lane when another thread closes the client: close()
// waits for its reply (config::close_timeout), the call ends with client_closed, and the grant in
// the reply is given back. Before, close() did not count the lane, and the reply read on it after
// the close was turned into client_closed: the grant was held by nobody for a lease.
TEST_F(lane_test, a_grant_read_on_the_lane_after_close_is_given_back) {
  fault_proxy proxy(server().port());
  config conf = cfg(proxy.port());
  conf.request_timeout = 5000ms;
  conf.close_timeout = 5000ms;
  conf.health_check_interval = 0ms;
  client c(conf);
  ASSERT_TRUE(lane_in_use(c));
  ASSERT_EQ(proxy.accepted(), 2u);  // the node's connection (0), then the lane (1)
  auto rc = server().client();
  // Another owner waits for a lock held elsewhere: close() ends it, which tells when close() ran.
  rc({"HSET", "lane-blocker", "elsewhere:1", "1"});
  rc({"PEXPIRE", "lane-blocker", "30000"});
  std::promise<std::error_code> blocked;
  c.lock("lane-blocker").async_lock(c.new_owner(), [&](std::error_code ec) { blocked.set_value(ec); });
  ASSERT_TRUE(eventually([&] {
    auto r = rc({"PUBSUB", "NUMSUB", "redisson_lock__channel:{lane-blocker}"});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  }));
  ASSERT_TRUE(eventually([&] { return c.stats().commands == c.stats().replies; }));  // it sleeps
  // Both connections' replies are held: a caller that finds the I/O thread busy at that moment goes
  // the usual way (a slow build), and the test then checks the node's connection.
  proxy.hold_replies(0, true);
  proxy.hold_replies(1, true);
  auto l = c.lock("lane-grant");
  const auto lane_before = c.stats().lane_requests;
  std::error_code ec;
  std::thread caller([&] { l.lock(ec); });
  ASSERT_TRUE(eventually([&] { return rc({"EXISTS", "lane-grant"}).integer == 1; })) << "the attempt did not run";
  std::cout << "[ lane ] the attempt went on "
            << (c.stats().lane_requests > lane_before ? "the lane" : "the node's connection") << "\n";
  std::thread closer([&] { c.close(); });
  auto b = blocked.get_future();
  ASSERT_EQ(b.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(b.get(), errc::client_closed);
  proxy.hold_replies(0, false);  // the grant's reply comes after the close began
  proxy.hold_replies(1, false);
  caller.join();
  closer.join();
  EXPECT_EQ(ec, errc::client_closed) << ec.message();
  EXPECT_EQ(rc({"EXISTS", "lane-grant"}).integer, 0) << "the grant was left held by nobody";
}

TEST_F(lane_test, a_lock_taken_on_the_lane_is_renewed_and_released_as_any_other) {
  config conf = cfg();
  conf.watchdog_timeout = 1500ms;  // renewed every 500 ms
  client c(conf);
  ASSERT_TRUE(lane_in_use(c));
  auto l = c.lock("lane-renewed");
  l.lock();  // with the watchdog
  auto ttl0 = server().client()({"PTTL", "lane-renewed"}).integer;
  ASSERT_GT(ttl0, 0);
  // The watchdog renews it on the I/O thread's connection, while the caller holds it.
  auto renewed = c.stats().renewed_locks;
  ASSERT_TRUE(eventually([&] { return c.stats().renewed_locks > renewed; }));
  EXPECT_TRUE(l.valid());
  l.unlock();
  EXPECT_EQ(server().client()({"EXISTS", "lane-renewed"}).integer, 0);
}

// The watchdog renews on the I/O thread's connection while the caller's unlock is on the lane, so
// the server can run the unlock first and the renewal then finds the lock gone. The proxy makes that
// order certain: the unlock runs but its reply is held while a renewal sent after it is answered.
struct held_unlock {
  bool renewal_after_unlock_sent = false;  // no renewal went out between the deletion and the unlock
  std::size_t lost_while_held = 0;         // on_lost calls before the unlock's reply came
  std::error_code unlock;
  std::vector<lost_reason> lost;
  std::uint64_t watched_after = 0;
};

class lane_race_test : public lane_test {
 protected:
  // `delete_first`: the key is deleted (a real loss) before the unlock is sent.
  held_unlock unlock_while_a_renewal_runs(const std::string& name, bool delete_first) {
    held_unlock out;
    fault_proxy proxy(server().port());
    config conf = cfg(proxy.port());
    conf.watchdog_timeout = 1500ms;  // renewed every 500 ms: the steps below take a few ms
    conf.request_timeout = 5s;       // the held reply must not time out
    client c(conf);
    EXPECT_TRUE(lane_in_use(c));
    EXPECT_EQ(proxy.accepted(), 2u) << "the command connection (0) and the lane (1)";
    const std::uint64_t lane = 1;

    auto l = c.lock(name);
    l.lock();  // the server caches the scripts: then an unlock is one request and one reply
    l.unlock();
    std::mutex mu;
    l.on_lost([&](const lost_info& i) {
      std::lock_guard<std::mutex> g(mu);
      out.lost.push_back(i.reason);
    });
    auto lost_count = [&] {
      std::lock_guard<std::mutex> g(mu);
      return out.lost.size();
    };
    std::promise<void> locked, go;
    std::promise<std::error_code> unlocked;
    auto go_f = go.get_future();
    auto result = unlocked.get_future();
    std::thread t([&] {
      l.lock();  // with the watchdog
      locked.set_value();
      go_f.wait();
      std::error_code ec;
      l.unlock(ec);
      unlocked.set_value(ec);
    });
    locked.get_future().wait();
    auto renewed = c.stats().renewed_locks;
    EXPECT_TRUE(eventually([&] { return c.stats().renewed_locks > renewed; }));

    proxy.hold_replies(lane, true);
    auto calls = c.stats().renew_calls;
    if (delete_first) server().client()({"DEL", name});
    auto on_lane = c.stats().lane_requests;
    go.set_value();
    EXPECT_TRUE(eventually([&] { return c.stats().lane_requests > on_lane; })) << "the unlock goes on the lane";
    if (delete_first) {
      out.renewal_after_unlock_sent = c.stats().renew_calls == calls;
    } else {
      EXPECT_TRUE(eventually([&] { return server().client()({"EXISTS", name}).integer == 0; })) << "the unlock ran";
      out.renewal_after_unlock_sent = true;
    }
    // A renewal sent from now on runs after the unlock; a PING behind it on the same connection
    // comes back after its verdict was taken.
    auto sent = c.stats().renew_calls;
    EXPECT_TRUE(eventually([&] { return c.stats().renew_calls > sent; }));
    c.ping();
    out.lost_while_held = lost_count();
    EXPECT_EQ(result.wait_for(0s), std::future_status::timeout) << "the unlock's reply is still held";

    proxy.hold_replies(lane, false);
    if (result.wait_for(5s) == std::future_status::ready) {
      out.unlock = result.get();
    } else {
      ADD_FAILURE() << "the unlock did not return";
      c.close();  // wakes it
    }
    t.join();
    out.watched_after = c.stats().watched_locks;
    return out;
  }
};

// The renewal's "gone" was the unlock's doing: not a loss, no on_lost, and the unlock succeeds.
TEST_F(lane_race_test, a_renewal_that_runs_after_a_lane_unlock_is_not_a_loss) {
  auto r = unlock_while_a_renewal_runs("lane-race", false);
  EXPECT_EQ(r.lost_while_held, 0u) << "a renewal that ran after the unlock reported the hold lost";
  EXPECT_FALSE(r.unlock) << "the unlock released the lock: " << r.unlock.message();
  EXPECT_TRUE(r.lost.empty());
  EXPECT_EQ(r.watched_after, 0u);
}

// A lock really lost while its unlock is out is still reported: the renewal's verdict waits for the
// unlock's reply, which finds nothing, and on_lost says the key was deleted.
TEST_F(lane_race_test, a_lock_deleted_before_a_lane_unlock_is_still_reported_lost) {
  auto r = unlock_while_a_renewal_runs("lane-race-deleted", true);
  // A renewal that ran between the deletion and the unlock's write reports it at once; otherwise
  // the report waits for the unlock's reply.
  if (r.renewal_after_unlock_sent) {
    EXPECT_EQ(r.lost_while_held, 0u) << "the verdict waits for the unlock";
  }
  EXPECT_EQ(r.unlock, errc::lock_lost) << r.unlock.message();
  EXPECT_EQ(r.lost, std::vector<lost_reason>{lost_reason::deleted});
  EXPECT_EQ(r.watched_after, 0u);
}

TEST_F(lane_test, closing_the_client_wakes_a_caller_waiting_on_its_lane) {
  config conf = cfg();
  conf.request_timeout = 10s;  // the close, not the timeout, must end the call
  conf.close_timeout = 300ms;  // the close waits this long for the reply, then ends the lane
  auto c = std::make_unique<client>(conf);
  ASSERT_TRUE(lane_in_use(*c));
  server().pause();
  auto before = c->stats().lane_requests;
  std::promise<std::error_code> done;
  auto result = done.get_future();
  std::thread t([&] {
    std::error_code ec;
    c->command({"ECHO", "never"}, ec);
    done.set_value(ec);
  });
  ASSERT_TRUE(eventually([&] { return c->stats().lane_requests > before; })) << "the request is on the lane";
  auto start = steady::now();
  c->close();
  ASSERT_EQ(result.wait_for(3s), std::future_status::ready) << "the caller still waits on its lane";
  EXPECT_EQ(result.get(), errc::client_closed);
  EXPECT_LT(ms_since(start), 2000);
  t.join();
  server().resume();
}

}  // namespace
}  // namespace redlease::test
