// SPDX-License-Identifier: MIT
// The connection core (redlease::client) against a real redis-server, closing: with
// requests outstanding, and calls after the close.
#include "core_test_support.hpp"

namespace redlease::test {
namespace {

// ---- closing with requests outstanding ------------------------------------------------------------

TEST_F(core_test, DestroyWithRequestsOutstanding) {
  static_assert(std::is_nothrow_destructible_v<client>);
  config conf = cfg();
  conf.request_timeout = 30s;  // nothing ends by timeout during this test
  auto c = std::make_unique<client>(conf);
  c->ping();
  server().pause();

  constexpr int n = 50;
  auto commands0 = c->stats().commands;
  auto token = std::make_shared<int>(0);
  std::mutex mu;
  std::vector<std::error_code> codes;
  for (int i = 0; i < n; ++i) {
    c->async_command({"INCR", "outstanding"}, [token, &mu, &codes](std::error_code ec, reply) {
      std::lock_guard<std::mutex> g(mu);
      codes.push_back(ec);
    });
  }
  auto fut = c->async_command({"GET", "outstanding"}, asio::use_future);

  // A blocking call in another thread is woken by the close, too.
  std::promise<std::error_code> blocked_p;
  auto blocked = blocked_p.get_future();
  std::thread t([&c, &blocked_p] {
    std::error_code ec;
    c->command({"PING"}, ec);
    blocked_p.set_value(ec);
  });
  // Requests are on the wire (the paused server's socket buffer takes them), and the rest wait behind
  // the two unanswered writes, before closing.
  EXPECT_TRUE(eventually([&] { return c->stats().commands >= commands0 + 2; })) << c->stats().commands;

  auto start = steady::now();
  c->close();  // as the destructor does, without destroying the object the thread still uses
  bool woke = blocked.wait_for(5s) == std::future_status::ready;
  EXPECT_TRUE(woke) << "a blocking call survives close()";
  if (!woke) server().resume();  // let it finish rather than hang the suite
  t.join();
  if (woke) {
    EXPECT_EQ(blocked.get(), errc::client_closed);
  }
  c.reset();
  auto took = elapsed_ms(start);
  EXPECT_LT(took, 2000);

  // Every callback ran with client_closed or was destroyed; none is left anywhere.
  EXPECT_EQ(token.use_count(), 1);
  {
    std::lock_guard<std::mutex> g(mu);
    for (auto& ec : codes) EXPECT_EQ(ec, errc::client_closed) << ec.message();
    std::cout << "[ close ] " << codes.size() << " of " << n << " callbacks ran (client_closed), in " << took
              << " ms\n";
  }
  ASSERT_EQ(fut.wait_for(1s), std::future_status::ready);
  try {
    fut.get();
    ADD_FAILURE() << "the outstanding GET succeeded";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::client_closed);
  } catch (const std::future_error&) {
    // destroyed without being called: allowed
  }
  server().resume();
}

TEST_F(core_test, DestructorReturnsPromptlyWithServerPaused) {
  config conf = cfg();
  conf.request_timeout = 30s;
  std::atomic<int> called{0};
  std::atomic<int> wrong{0};
  steady::time_point start;
  {
    client c(conf);
    c.ping();
    server().pause();
    for (int i = 0; i < 20; ++i) {
      c.async_command({"PING"}, [&](std::error_code ec, reply) {
        ++called;
        if (ec != errc::client_closed) ++wrong;
      });
    }
    start = steady::now();
  }
  auto took = elapsed_ms(start);
  EXPECT_LT(took, 2000);
  EXPECT_EQ(wrong.load(), 0);
  std::cout << "[ close ] destructor took " << took << " ms; " << called.load() << " callbacks ran\n";
  server().resume();
}

TEST_F(core_test, DestructorReturnsPromptlyAfterSubscribe) {
  config conf = cfg();
  conf.request_timeout = 4s;
  steady::time_point start;
  {
    client c(conf);
    inbox in;
    auto sub = c.subscribe("ch", in.callback());
    sub.reset();
    start = steady::now();
  }
  auto took = elapsed_ms(start);
  std::cout << "[ close ] destructor after subscribe took " << took << " ms\n";
  EXPECT_LT(took, 2000) << "the client's destructor waits for the subscribe confirmation timer";
}

TEST_F(core_test, AsyncCommandAfterCloseCompletesWithClientClosed) {
  client c(cfg());
  c.ping();
  c.close();
  auto f = async_cmd(c, {"PING"});
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  try {
    EXPECT_EQ(f.get().first, errc::client_closed);
  } catch (const std::future_error&) {
    ADD_FAILURE() << "the completion handler was destroyed without being called";
  }
}

TEST_F(core_test, CallsAfterCloseFailWithClientClosed) {
  client c(cfg());
  c.ping();
  c.close();
  c.close();  // idempotent
  std::error_code ec;
  c.command({"PING"}, ec);
  EXPECT_EQ(ec, errc::client_closed);
  EXPECT_EQ(thrown_code([&] { c.ping(); }), errc::client_closed);
}

}  // namespace
}  // namespace redlease::test
