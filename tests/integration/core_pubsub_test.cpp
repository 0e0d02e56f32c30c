// SPDX-License-Identifier: MIT
// The connection core (redlease::client) against a real redis-server, pub/sub:
// subscriptions, their reference counts, resubscription after a restart, the health check
// of the pub/sub connection.
#include "core_test_support.hpp"

namespace redlease::test {
namespace {

// ---- pub/sub -------------------------------------------------------------------------------------

TEST_F(core_test, SubscribeReceivesMessages) {
  client c(cfg());
  inbox in;
  auto sub = c.subscribe("news", in.callback());
  ASSERT_TRUE(sub);
  raw_client rc = server().client();
  EXPECT_EQ(rc({"PUBLISH", "news", "hello"}).integer, 1);
  EXPECT_EQ(rc({"PUBLISH", "other", "ignored"}).integer, 0);
  EXPECT_EQ(rc.command({"PUBLISH", "news", std::string("bin\0ary", 7)}).integer, 1);
  ASSERT_TRUE(eventually([&] { return in.size() >= 2; }));
  std::lock_guard<std::mutex> g(in.mu);
  ASSERT_EQ(in.msgs.size(), 2u);
  EXPECT_EQ(in.msgs[0], std::make_pair(std::string("news"), std::string("hello")));
  EXPECT_EQ(in.msgs[1].second, std::string("bin\0ary", 7));
  EXPECT_GE(c.stats().pubsub_connects, 1u);
}

TEST_F(core_test, SubscriptionsAreReferenceCounted) {
  client c(cfg());
  raw_client rc = server().client();
  inbox a, b;
  auto sa = c.subscribe("shared-ch", a.callback());
  auto sb = c.subscribe("shared-ch", b.callback());
  EXPECT_EQ(numsub(rc, "shared-ch"), 1);  // one pub/sub connection, subscribed once

  EXPECT_EQ(rc({"PUBLISH", "shared-ch", "m1"}).integer, 1);
  ASSERT_TRUE(eventually([&] { return a.has("m1") && b.has("m1"); }));

  sa.reset();
  EXPECT_FALSE(sa);
  // Still subscribed for b.
  EXPECT_EQ(numsub(rc, "shared-ch"), 1);
  EXPECT_EQ(rc({"PUBLISH", "shared-ch", "m2"}).integer, 1);
  ASSERT_TRUE(eventually([&] { return b.has("m2"); }));
  EXPECT_FALSE(a.has("m2"));
  EXPECT_EQ(a.size(), 1u);

  {
    auto moved = std::move(sb);
    EXPECT_FALSE(sb);
    EXPECT_TRUE(moved);
  }  // the last subscription is gone: UNSUBSCRIBE
  EXPECT_TRUE(eventually([&] { return numsub(rc, "shared-ch") == 0; })) << numsub(rc, "shared-ch");

  // Subscribing again works.
  inbox d;
  auto sd = c.subscribe("shared-ch", d.callback());
  EXPECT_EQ(numsub(rc, "shared-ch"), 1);
  EXPECT_EQ(rc({"PUBLISH", "shared-ch", "m3"}).integer, 1);
  ASSERT_TRUE(eventually([&] { return d.has("m3"); }));
  EXPECT_FALSE(b.has("m3"));
}

TEST_F(core_test, ResubscribesAfterServerRestart) {
  config conf = cfg();
  conf.request_timeout = 2s;
  client c(conf);
  inbox in;
  auto sub = c.subscribe("survivor", in.callback());
  auto before = c.stats();
  server().restart();

  raw_client rc = server().client();
  int n = 0;
  bool got = eventually(
      [&] {
        rc({"PUBLISH", "survivor", "after-" + std::to_string(++n)});
        return in.size() > 0;
      },
      5000ms);
  ASSERT_TRUE(got) << "no message within 5 s after the restart (" << n << " published)";
  EXPECT_GT(c.stats().pubsub_connects, before.pubsub_connects);
  EXPECT_EQ(numsub(rc, "survivor"), 1);
}

TEST(core_health_test, silent_pubsub_connection_is_pinged_dropped_and_resubscribed) {
  REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  redis_server srv;
  auto conf = config::from_url(srv.url());
  conf.health_check_interval = std::chrono::milliseconds(100);
  conf.request_timeout = std::chrono::milliseconds(200);
  conf.connect_timeout = std::chrono::milliseconds(200);
  conf.reconnect_min_delay = std::chrono::milliseconds(10);
  conf.reconnect_max_delay = std::chrono::milliseconds(50);
  client c(conf);
  std::atomic<int> got{0};
  auto sub = c.subscribe("hc", [&](std::string_view, std::string_view) { ++got; });
  EXPECT_EQ(c.stats().pubsub_connects, 1u);
  // A healthy idle connection is pinged but kept.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(c.stats().pubsub_connects, 1u);
  EXPECT_GE(c.stats().pubsub_commands, 3u);  // SUBSCRIBE + PINGs
  // A server that stops answering: the unanswered PING drops the connection; once it answers
  // again the client reconnects and resubscribes by itself.
  srv.pause();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  srv.resume();
  auto publisher = srv.client();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got == 0 && std::chrono::steady_clock::now() < deadline) {
    publisher({"PUBLISH", "hc", "x"});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(got.load(), 0);
  EXPECT_GE(c.stats().pubsub_connects, 2u);
}

}  // namespace
}  // namespace redlease::test
