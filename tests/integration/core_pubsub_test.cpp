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

// ---- a flood on one channel (issue 39) -----------------------------------------------------------

// Publishes on `channel` from its own connection until destroyed, 20 PUBLISH in one round trip
// each millisecond: up to 20,000 a second, more than a callback of 50 us can take, and a rate the
// client reads at even under TSan (at 40,000 a second its I/O thread fell behind there: a rate
// beyond what it can read delays any reply on that connection, as it would on any client).
class flood {
 public:
  flood(redis_server& srv, std::string channel) : rc_(srv.client()), channel_(std::move(channel)) {
    t_ = std::thread([this] {
      const std::vector<std::vector<std::string>> batch(20, {"PUBLISH", channel_, "flood"});
      auto next = std::chrono::steady_clock::now();
      while (!stop_) {
        rc_.pipeline(batch);
        ++rounds_;
        next += std::chrono::milliseconds(1);
        std::this_thread::sleep_until(next);
      }
    });
  }
  ~flood() {
    stop_ = true;
    t_.join();
  }
  long long rounds() const { return rounds_; }

 private:
  raw_client rc_;
  std::string channel_;
  std::atomic<bool> stop_{false};
  std::atomic<long long> rounds_{0};
  std::thread t_;
};

// A subscriber whose callback takes 50 us under a flood on its own channel resubscribes at once:
// before the callbacks left the I/O thread, the confirmation queued behind the backlog, and the
// second subscribe() timed out after 5 s in 2 runs of 3.
TEST_F(core_test, a_flooded_slow_channel_resubscribes_at_once) {
  client c(cfg());
  std::atomic<long long> got{0};
  auto slow = [&](std::string_view, std::string_view) {
    ++got;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  };
  auto sub = c.subscribe("flooded", slow);
  flood f(server(), "flooded");
  ASSERT_TRUE(eventually([&] { return got.load() > 1000; }));
  for (int round = 0; round < 20; ++round) {
    sub.reset();
    const auto t0 = std::chrono::steady_clock::now();
    std::error_code ec;
    sub = c.subscribe("flooded", slow, ec);
    ASSERT_FALSE(ec) << "round " << round << ": " << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms) << "round " << round;
  }
  EXPECT_GT(f.rounds(), 100);
  std::printf("%lld messages published, %lld delivered\n", f.rounds() * 20, got.load());
}

// Under that flood, another channel's callback and a lock's wake-up on the same client are not
// held up: neither waits behind the flooded channel's backlog, nor behind its blocked callback.
TEST_F(core_test, a_flooded_channel_delays_neither_other_channels_nor_lock_wakeups) {
  client c(cfg());
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<long long> flooded{0};
  // The flooded channel's callback blocks (until the end of the test) after its first message.
  auto sub = c.subscribe("flooded2", [&](std::string_view, std::string_view) {
    if (++flooded > 1) return;
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return release; });
  });
  flood f(server(), "flooded2");
  ASSERT_TRUE(eventually([&] { return flooded.load() >= 1; }));
  // Another channel's messages arrive while the flooded one's callback is blocked.
  inbox other;
  auto sub2 = c.subscribe("calm", other.callback());
  raw_client rc = server().client();
  EXPECT_EQ(rc({"PUBLISH", "calm", "hello"}).integer, 1);
  EXPECT_TRUE(eventually([&] { return other.has("hello"); }, 2000ms));
  // A waiter on this client is woken by the holder's unlock.
  client holder(cfg());
  auto held = holder.lock("flood:lock");
  held.lock();
  auto l = c.lock("flood:lock");
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    l.lock();
    acquired = true;
    l.unlock();
  });
  std::this_thread::sleep_for(100ms);  // lets the waiter subscribe and wait (not a synchronisation)
  const auto t0 = std::chrono::steady_clock::now();
  held.unlock();
  EXPECT_TRUE(eventually([&] { return acquired.load(); }, 3000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2000ms);
  waiter.join();
  {
    std::lock_guard<std::mutex> g(mu);
    release = true;
  }
  cv.notify_all();
}

}  // namespace
}  // namespace redlease::test
