// SPDX-License-Identifier: MIT
// The connection core (redlease::client) against a real redis-server, requests and replies:
// pipelining, requests in flight on a dropped connection, timeouts, the scripts, server
// error replies.
#include "core_test_support.hpp"

namespace redlease::test {
namespace {

// ---- pipelining ----------------------------------------------------------------------------------

TEST_F(core_test, PipeliningManyThreads) {
  constexpr int threads = 8;
  constexpr int per_thread = 1000;  // 4 commands per round
  constexpr int rounds = per_thread / 4;
  constexpr int total = threads * per_thread;

  config conf = cfg();
  conf.request_timeout = 20s;  // a loaded machine (ASan) must not turn this into a timeout test
  client c(conf);
  c.ping();

  struct per_thread_results {
    std::vector<std::string> set_replies;
    std::vector<std::string> got;
    std::vector<long long> own_counter;  // in reply order
    std::vector<long long> shared_counter;
    std::vector<std::string> errors;
  };
  std::vector<per_thread_results> res(threads);
  std::mutex mu;
  std::condition_variable cv;
  int remaining = total;
  auto done_one = [&] {
    std::lock_guard<std::mutex> g(mu);
    if (--remaining == 0) cv.notify_all();
  };
  auto record = [&](int t, std::error_code ec, const reply& r) -> per_thread_results* {
    std::lock_guard<std::mutex> g(mu);
    if (ec) {
      res[static_cast<std::size_t>(t)].errors.push_back(ec.message() + " " + r.str);
      return nullptr;
    }
    return &res[static_cast<std::size_t>(t)];
  };

  auto before = c.stats();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::string ctr = "ctr:" + std::to_string(t);
      for (int i = 0; i < rounds; ++i) {
        std::string key = "k:" + std::to_string(t) + ":" + std::to_string(i);
        std::string val = "v:" + std::to_string(t) + ":" + std::to_string(i);
        c.async_command({"SET", key, val}, [&, t](std::error_code ec, reply r) {
          if (auto* p = record(t, ec, r)) {
            std::lock_guard<std::mutex> g(mu);
            p->set_replies.push_back(r.str);
          }
          done_one();
        });
        c.async_command({"GET", key}, [&, t](std::error_code ec, reply r) {
          if (auto* p = record(t, ec, r)) {
            std::lock_guard<std::mutex> g(mu);
            p->got.push_back(r.str);
          }
          done_one();
        });
        c.async_command({"INCR", ctr}, [&, t](std::error_code ec, reply r) {
          if (auto* p = record(t, ec, r)) {
            std::lock_guard<std::mutex> g(mu);
            p->own_counter.push_back(r.integer);
          }
          done_one();
        });
        c.async_command({"INCR", "shared"}, [&, t](std::error_code ec, reply r) {
          if (auto* p = record(t, ec, r)) {
            std::lock_guard<std::mutex> g(mu);
            p->shared_counter.push_back(r.integer);
          }
          done_one();
        });
      }
    });
  }
  for (auto& th : ts) th.join();
  {
    std::unique_lock<std::mutex> g(mu);
    ASSERT_TRUE(cv.wait_for(g, 60s, [&] { return remaining == 0; })) << remaining << " replies missing";
  }
  auto after = c.stats();

  std::vector<long long> shared;
  for (int t = 0; t < threads; ++t) {
    auto& r = res[static_cast<std::size_t>(t)];
    SCOPED_TRACE("thread " + std::to_string(t));
    ASSERT_TRUE(r.errors.empty()) << r.errors.front();
    ASSERT_EQ(r.set_replies.size(), static_cast<std::size_t>(rounds));
    for (auto& s : r.set_replies) EXPECT_EQ(s, "OK");
    // Replies of one thread's commands arrive in issue order: the i-th GET sees the i-th SET.
    ASSERT_EQ(r.got.size(), static_cast<std::size_t>(rounds));
    for (int i = 0; i < rounds; ++i)
      EXPECT_EQ(r.got[static_cast<std::size_t>(i)], "v:" + std::to_string(t) + ":" + std::to_string(i));
    ASSERT_EQ(r.own_counter.size(), static_cast<std::size_t>(rounds));
    for (int i = 0; i < rounds; ++i) EXPECT_EQ(r.own_counter[static_cast<std::size_t>(i)], i + 1);
    // Per thread, the shared counter only grows.
    EXPECT_TRUE(std::is_sorted(r.shared_counter.begin(), r.shared_counter.end()));
    shared.insert(shared.end(), r.shared_counter.begin(), r.shared_counter.end());
  }
  std::sort(shared.begin(), shared.end());
  ASSERT_EQ(shared.size(), static_cast<std::size_t>(threads * rounds));
  for (std::size_t i = 0; i < shared.size(); ++i) ASSERT_EQ(shared[i], static_cast<long long>(i + 1));

  auto writes = after.writes - before.writes;
  auto commands = after.commands - before.commands;
  std::cout << "[ pipelining ] " << total << " commands from " << threads << " threads: " << commands
            << " commands written in " << writes << " writes, " << (after.replies - before.replies)
            << " replies\n";
  EXPECT_EQ(commands, static_cast<std::uint64_t>(total));
  EXPECT_LT(writes, static_cast<std::uint64_t>(total / 4));
}

TEST_F(core_test, PipeliningSingleThreadBurst) {
  config conf = cfg();
  conf.request_timeout = 20s;
  client c(conf);
  c.ping();
  constexpr int n = 1000;

  // Hold the I/O thread while the burst is issued, so that "at once" holds even on a loaded
  // machine: every command is queued before the client gets to flush.
  std::promise<void> gate;
  auto gate_f = gate.get_future().share();
  std::promise<void> holding;
  asio::post(c.get_executor(), [gate_f, &holding] {
    holding.set_value();
    gate_f.wait();
  });
  holding.get_future().wait();

  auto before = c.stats();
  std::vector<std::future<result>> fs;
  fs.reserve(n);
  for (int i = 0; i < n; ++i) fs.push_back(async_cmd(c, {"INCR", "burst"}));
  gate.set_value();
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(fs[static_cast<std::size_t>(i)].wait_for(30s), std::future_status::ready);
    auto [ec, r] = fs[static_cast<std::size_t>(i)].get();
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(r.integer, i + 1);
  }
  auto after = c.stats();
  auto writes = after.writes - before.writes;
  std::cout << "[ pipelining ] burst of " << n << " commands: " << writes << " writes\n";
  EXPECT_LE(writes, 10u);

  // Without holding the I/O thread: a plain burst still coalesces (informational bound only).
  before = c.stats();
  fs.clear();
  for (int i = 0; i < n; ++i) fs.push_back(async_cmd(c, {"INCR", "burst2"}));
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(fs[static_cast<std::size_t>(i)].wait_for(30s), std::future_status::ready);
    auto [ec, r] = fs[static_cast<std::size_t>(i)].get();
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(r.integer, i + 1);
  }
  after = c.stats();
  std::cout << "[ pipelining ] unheld burst of " << n << " commands: " << (after.writes - before.writes)
            << " writes\n";
  EXPECT_LT(after.writes - before.writes, static_cast<std::uint64_t>(n));
}

TEST_F(core_test, AsyncCommandWithUseFuture) {
  client c(cfg());
  auto f = c.async_command({"SET", "uf", "1"}, asio::use_future);
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get().str, "OK");
  auto g = c.async_command({"INCR", "uf"}, asio::use_future);
  ASSERT_EQ(g.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(g.get().integer, 2);
  // An error reply completes the future with its code.
  c.command({"LPUSH", "ufl", "x"});
  auto h = c.async_command({"GET", "ufl"}, asio::use_future);
  ASSERT_EQ(h.wait_for(5s), std::future_status::ready);
  try {
    h.get();
    ADD_FAILURE() << "no error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
  }
}

// ---- in-flight requests on a dropped connection ---------------------------------------------------

TEST_F(core_test, InFlightRequestFailsWithConnectionLost) {
  config conf = cfg();
  conf.request_timeout = 5s;  // the drop, not the timeout, must end the request
  client c(conf);
  c.ping();
  auto before = c.stats();
  auto f = async_cmd(c, {"DEBUG", "SLEEP", "1"});
  // Wait until the command is on the wire (handed to the socket), then crash the server.
  ASSERT_TRUE(eventually([&] { return c.stats().commands > before.commands; }));
  auto start = steady::now();
  server().kill();
  ASSERT_EQ(f.wait_for(4s), std::future_status::ready) << "the in-flight request hangs";
  auto [ec, r] = f.get();
  EXPECT_EQ(ec, errc::connection_lost) << ec.message();
  EXPECT_LT(elapsed_ms(start), 3000);
}

TEST_F(core_test, NonIdempotentCommandIsNotResent) {
  config conf = cfg();
  conf.request_timeout = 10s;
  client c(conf);
  c.ping();
  // Freeze the server so that the INCR sits unanswered in its socket buffer.
  server().pause();
  auto before = c.stats();
  auto f = async_cmd(c, {"INCR", "not-resent"});
  ASSERT_TRUE(eventually([&] { return c.stats().commands > before.commands; }));
  server().kill();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "the in-flight request hangs";
  auto [ec, r] = f.get();
  EXPECT_EQ(ec, errc::connection_lost) << ec.message();

  // A new server on the same port: the client reconnects, and the INCR was not replayed on it.
  server().start();
  ASSERT_TRUE(eventually([&] {
    std::error_code e;
    c.ping(e);
    return !e;
  }));
  raw_client rc = server().client();
  EXPECT_TRUE(rc({"GET", "not-resent"}).is_nil());
  EXPECT_TRUE(c.command({"GET", "not-resent"}).is_nil());
}

// ---- timeouts ------------------------------------------------------------------------------------

TEST_F(core_test, RequestTimeoutWhenServerPaused) {
  config conf = cfg();
  conf.request_timeout = 400ms;
  client c(conf);
  c.ping();
  server().pause();

  auto start = steady::now();
  std::error_code ec;
  c.command({"PING"}, ec);
  auto took = elapsed_ms(start);
  EXPECT_EQ(ec, errc::request_timeout) << ec.message();
  EXPECT_GE(took, 300);
  EXPECT_LT(took, 400 + 1500);

  // Throwing form, and several async requests at once.
  EXPECT_EQ(thrown_code([&] { c.command({"GET", "x"}); }), errc::request_timeout);
  std::vector<std::future<result>> fs;
  for (int i = 0; i < 20; ++i) fs.push_back(async_cmd(c, {"INCR", "during-pause"}));
  for (auto& f : fs) {
    ASSERT_EQ(f.wait_for(3s), std::future_status::ready);
    EXPECT_EQ(f.get().first, errc::request_timeout);
  }

  server().resume();
  // Late replies to the timed-out requests are dropped; new requests get their own replies.
  ASSERT_TRUE(eventually([&] {
    std::error_code e;
    c.ping(e);
    return !e;
  }));
  EXPECT_EQ(c.command({"SET", "after-resume", "v"}).str, "OK");
  EXPECT_EQ(c.command({"GET", "after-resume"}).str, "v");
  EXPECT_EQ(c.command({"ECHO", "hello"}).str, "hello");
}

// ---- scripts -------------------------------------------------------------------------------------

TEST_F(core_test, EmbeddedScriptShasMatchServer) {
  raw_client rc = server().client();
  for (const auto* s : {&detail::lua::acquire, &detail::lua::release, &detail::lua::renew,
                        &detail::lua::mutex_acquire, &detail::lua::mutex_release, &detail::lua::force_unlock}) {
    SCOPED_TRACE(std::string(s->name));
    raw_reply r = rc.command({"SCRIPT", "LOAD", std::string(s->body)});
    ASSERT_TRUE(r.is_string()) << r;
    EXPECT_EQ(r.str, s->sha1);
  }
}

TEST_F(core_test, NoscriptFallbackAfterScriptFlush) {
  client c(cfg());
  const std::string sha(detail::lua::acquire.sha1);
  raw_client rc = server().client();
  auto cached = [&] {
    raw_reply r = rc({"SCRIPT", "EXISTS", sha});
    return r.is_array() && r.elements.size() == 1 && r.elements[0].integer == 1;
  };
  auto l = c.lock("script-lock");
  l.lock();
  EXPECT_EQ(rc({"EXISTS", "script-lock"}).integer, 1);
  l.unlock();
  EXPECT_TRUE(cached());

  ASSERT_TRUE(rc({"SCRIPT", "FLUSH"}).is_ok());
  EXPECT_FALSE(cached());

  // EVALSHA answers NOSCRIPT; the client falls back to EVAL, which caches the script again.
  l.lock();
  EXPECT_EQ(rc({"EXISTS", "script-lock"}).integer, 1);
  l.unlock();
  EXPECT_EQ(rc({"EXISTS", "script-lock"}).integer, 0);
  EXPECT_TRUE(cached());
}

// ---- server error replies -------------------------------------------------------------------------

TEST_F(core_test, ServerErrorKeepsItsText) {
  client c(cfg());
  c.command({"SET", "str", "abc"});
  std::string what;
  EXPECT_EQ(thrown_code([&] { c.command({"INCR", "str"}); }, &what), errc::server_error);
  EXPECT_NE(what.find("not an integer"), std::string::npos) << what;

  std::error_code ec;
  reply r = c.command({"INCR", "str"}, ec);
  EXPECT_EQ(ec, errc::server_error);
  EXPECT_TRUE(r.is_error());
  EXPECT_NE(r.str.find("not an integer"), std::string::npos) << r.str;

  c.command({"LPUSH", "list", "x"});
  EXPECT_EQ(thrown_code([&] { c.command({"GET", "list"}); }, &what), errc::wrong_type);
  EXPECT_NE(what.find("WRONGTYPE"), std::string::npos) << what;
  r = c.command(std::vector<std::string>{"GET", "list"}, ec);
  EXPECT_EQ(ec, errc::wrong_type);
  EXPECT_TRUE(r.is_error());

  auto f = async_cmd(c, {"INCR", "str"});
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  auto [aec, ar] = f.get();
  EXPECT_EQ(aec, errc::server_error);
  EXPECT_NE(ar.str.find("not an integer"), std::string::npos) << ar.str;

  // Unknown command, and the connection stays usable after errors.
  EXPECT_EQ(thrown_code([&] { c.command({"NOSUCHCOMMAND"}); }, &what), errc::unknown_command);
  EXPECT_NE(what.find("unknown command"), std::string::npos) << what;
  EXPECT_EQ(c.command({"GET", "str"}).str, "abc");
}

TEST_F(core_test, EmptyCommandIsInvalidArgument) {
  client c(cfg());
  std::error_code ec;
  c.command(std::vector<std::string>{}, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  auto f = async_cmd(c, {});
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get().first, errc::invalid_argument);
}

TEST_F(core_test, ReplyTypes) {
  client c(cfg());
  EXPECT_EQ(c.command({"SET", "k", std::string_view("a\0b", 3)}).type, reply::kind::status);
  reply r = c.command({"GET", "k"});
  EXPECT_EQ(r.type, reply::kind::string);
  EXPECT_EQ(r.str, std::string("a\0b", 3));
  EXPECT_TRUE(c.command({"GET", "missing"}).is_nil());
  c.command({"RPUSH", "l", "1", "2", "3"});
  r = c.command({"LRANGE", "l", "0", "-1"});
  ASSERT_TRUE(r.is_array());
  ASSERT_EQ(r.elements.size(), 3u);
  EXPECT_EQ(r.elements[2].str, "3");
  EXPECT_EQ(c.command({"EXISTS", "k"}).integer, 1);
}

}  // namespace
}  // namespace redlease::test
