// SPDX-License-Identifier: MIT
// Integration tests of the connection core (redlease::client: pipelining, reconnection, timeouts,
// handshake, pub/sub, error mapping) against a real redis-server.

// Included first on purpose: Asio's choice of allocator once depended on header order (an ODR
// violation ASan reported); ASIO_DISABLE_STD_ALIGNED_ALLOC in cmake/redlease_deps.cmake fixes it,
// and this order keeps the test meaningful without that define too.
#include "redlease/client.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio/post.hpp>
#include <asio/use_future.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "redis_fixture.hpp"
#include "redlease/config.hpp"
#include "redlease/error.hpp"
#include "redlease_lua.hpp"

namespace redlease::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using result = std::pair<std::error_code, reply>;

// ---- helpers -------------------------------------------------------------------------------------

// Short timeouts keep the failure tests fast.
void set_fast_timing(config& c) {
  c.connect_timeout = 500ms;
  c.request_timeout = 500ms;
  c.reconnect_min_delay = 10ms;
  c.reconnect_max_delay = 100ms;
}

config fast_config(const std::string& url) {
  config c = config::from_url(url);
  set_fast_timing(c);
  return c;
}

// Polls `pred` every 10 ms until it holds or `timeout` passes; returns its last value.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = 5000ms) {
  auto deadline = steady::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (steady::now() >= deadline) return pred();
    std::this_thread::sleep_for(10ms);
  }
}

// Issues `args` asynchronously; the future gets (ec, reply). A callback destroyed without being
// called shows as a broken promise (std::future_error from get()).
std::future<result> async_cmd(client& c, std::vector<std::string> args) {
  auto p = std::make_shared<std::promise<result>>();
  auto f = p->get_future();
  c.async_command(std::move(args), [p](std::error_code ec, reply r) { p->set_value({ec, std::move(r)}); });
  return f;
}

long long elapsed_ms(steady::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - since).count();
}

// The error code a throwing call fails with (clear if it does not throw).
template <class F>
std::error_code thrown_code(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const redlease::error& e) {
    if (what) *what = e.what();
    return e.code();
  }
  return {};
}

// A loopback TCP socket bound to a free port. With `listening` it accepts connections at the TCP
// level (the kernel completes the handshake into the backlog) but nobody ever calls accept().
class loopback_socket {
 public:
  explicit loopback_socket(bool listening) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket() failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = 0;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // 127.0.0.1 only
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("bind() failed");
    socklen_t len = sizeof a;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("getsockname() failed");
    port_ = ntohs(a.sin_port);
    if (listening && ::listen(fd_, 16) != 0) throw std::runtime_error("listen() failed");
  }
  ~loopback_socket() { close(); }
  loopback_socket(const loopback_socket&) = delete;
  loopback_socket& operator=(const loopback_socket&) = delete;
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// Messages received by a subscription callback (which runs on the client's I/O thread).
struct inbox {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> msgs;

  std::function<void(std::string_view, std::string_view)> callback() {
    return [this](std::string_view ch, std::string_view payload) {
      std::lock_guard<std::mutex> g(mu);
      msgs.emplace_back(std::string(ch), std::string(payload));
    };
  }
  std::size_t size() {
    std::lock_guard<std::mutex> g(mu);
    return msgs.size();
  }
  bool has(const std::string& payload) {
    std::lock_guard<std::mutex> g(mu);
    return std::any_of(msgs.begin(), msgs.end(), [&](auto& m) { return m.second == payload; });
  }
};

long long numsub(raw_client& rc, const std::string& channel) {
  raw_reply r = rc({"PUBSUB", "NUMSUB", channel});
  if (!r.is_array() || r.elements.size() != 2) return -1;
  return r.elements[1].integer;
}

class core_test : public redis_fixture {
 protected:
  config cfg() { return fast_config(server().url()); }
};

// ---- 1. pipelining -------------------------------------------------------------------------------

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

// ---- 2. reconnect --------------------------------------------------------------------------------

TEST_F(core_test, ReconnectsAfterServerRestart) {
  client c(cfg());
  c.ping();
  c.command({"SET", "before-restart", "1"});
  auto before = c.stats();
  EXPECT_GE(before.connects, 1u);

  server().restart();

  auto start = steady::now();
  bool ok = eventually([&] {
    std::error_code ec;
    c.ping(ec);
    return !ec;
  });
  ASSERT_TRUE(ok) << "no successful command within 5 s after the restart";
  std::cout << "[ reconnect ] commands work again " << elapsed_ms(start) << " ms after the restart\n";
  auto after = c.stats();
  EXPECT_GT(after.connects, before.connects);
  EXPECT_GT(after.connection_losses, before.connection_losses);
  // The restarted server has no persistence: the key is gone.
  EXPECT_TRUE(c.command({"GET", "before-restart"}).is_nil());
  EXPECT_EQ(c.command({"INCR", "after-restart"}).integer, 1);
}

TEST_F(core_test, ReconnectsAfterClientKill) {
  config conf = cfg();
  conf.client_name = "killme";
  client c(conf);
  c.ping();
  auto before = c.stats();
  raw_client rc = server().client();
  // The command connection, and the lane if its background connect (started by the first blocking
  // call) has reached the server by now: 1 or 2.
  const long long killed = rc({"CLIENT", "KILL", "SKIPME", "yes", "TYPE", "normal"}).integer;
  EXPECT_GE(killed, 1);
  EXPECT_LE(killed, 2);
  ASSERT_TRUE(eventually([&] {
    std::error_code ec;
    c.ping(ec);
    return !ec;
  }));
  EXPECT_GT(c.stats().connects, before.connects);
}

// ---- 3. in-flight requests on a dropped connection ------------------------------------------------

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

// ---- 4. timeouts ---------------------------------------------------------------------------------

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

// ---- 5. AUTH -------------------------------------------------------------------------------------

class core_auth_test : public core_test {
 protected:
  server_options options() const override {
    server_options o;
    o.password = "p4ss-w0rd";
    return o;
  }
  std::string url_with(const std::string& userinfo) {
    return "redis://" + userinfo + "127.0.0.1:" + std::to_string(server().port());
  }
};

TEST_F(core_auth_test, RightPassword) {
  client c(fast_config(server().url()));
  c.ping();
  EXPECT_EQ(c.command({"SET", "auth", "ok"}).str, "OK");
  EXPECT_EQ(c.command({"GET", "auth"}).str, "ok");
}

TEST_F(core_auth_test, WrongPassword) {
  client c(fast_config(url_with(":wrong-secret@")));
  std::string what;
  auto start = steady::now();
  EXPECT_EQ(thrown_code([&] { c.ping(); }, &what), errc::auth_failed);
  EXPECT_LT(elapsed_ms(start), 2000);
  std::cout << "[ auth ] " << what << "\n";
  EXPECT_NE(what.find("authentication failed"), std::string::npos) << what;
  EXPECT_NE(what.find("127.0.0.1:" + std::to_string(server().port())), std::string::npos) << what;
  EXPECT_EQ(what.find("wrong-secret"), std::string::npos) << "the password leaks: " << what;
  // The server's words for a wrong password, not the NOAUTH that the pipelined CLIENT SETNAME gets
  // after it (which reads as if no password had been sent).
  EXPECT_NE(what.find("WRONGPASS"), std::string::npos) << what;
  EXPECT_EQ(what.find("NOAUTH"), std::string::npos) << what;
  std::error_code ec;
  c.command({"GET", "x"}, ec);
  EXPECT_EQ(ec, errc::auth_failed);
}

TEST_F(core_auth_test, NoPassword) {
  client c(fast_config(url_with("")));
  std::error_code ec;
  c.ping(ec);
  EXPECT_EQ(ec, errc::auth_failed) << ec.message();
}

TEST_F(core_auth_test, PercentEncodedPassword) {
  raw_client rc = server().client();
  ASSERT_TRUE(rc({"CONFIG", "SET", "requirepass", "a@b:c/d%e"}).is_ok());
  client c(fast_config(url_with(":a%40b%3Ac%2Fd%25e@")));
  c.ping();
}

TEST_F(core_test, AclUser) {
  raw_client rc = server().client();
  ASSERT_TRUE(rc({"ACL", "SETUSER", "alice", "on", ">secret", "~*", "&*", "+@all"}).is_ok());
  std::string base = "127.0.0.1:" + std::to_string(server().port());
  {
    client c(fast_config("redis://alice:secret@" + base));
    c.ping();
    EXPECT_EQ(c.command({"ACL", "WHOAMI"}).str, "alice");
    EXPECT_EQ(c.command({"SET", "acl", "1"}).str, "OK");
  }
  {
    client c(fast_config("redis://alice:notsecret@" + base));
    std::string what;
    EXPECT_EQ(thrown_code([&] { c.ping(); }, &what), errc::auth_failed);
    EXPECT_EQ(what.find("notsecret"), std::string::npos) << what;
  }
  {
    client c(fast_config("redis://bob:secret@" + base));
    std::error_code ec;
    c.ping(ec);
    EXPECT_EQ(ec, errc::auth_failed);
  }
}

// ---- 6. URLs -------------------------------------------------------------------------------------

TEST_F(core_test, BadUrls) {
  EXPECT_EQ(thrown_code([] { client c(config::from_url("127.0.0.1:6379")); }), errc::invalid_url);
  EXPECT_EQ(thrown_code([&] { client c(config::from_url("redis://127.0.0.1:0")); }), errc::invalid_url);
  // rediss:// parses; TLS on a unix socket is refused when connecting (tests/integration/tls_test.cpp
  // covers TLS itself).
  EXPECT_TRUE(config::from_url("rediss://127.0.0.1:" + std::to_string(server().port())).tls.enabled);
}

// ---- 7. database selection -----------------------------------------------------------------------

TEST_F(core_test, SelectsDatabase) {
  client c(fast_config(server().url() + "/3"));
  EXPECT_EQ(c.command({"SET", "in-db3", "yes"}).str, "OK");
  raw_client rc = server().client();
  EXPECT_TRUE(rc({"GET", "in-db3"}).is_nil());
  ASSERT_TRUE(rc({"SELECT", "3"}).is_ok());
  EXPECT_EQ(rc({"GET", "in-db3"}).str, "yes");

  // The database is selected again after a reconnect.
  server().restart();
  ASSERT_TRUE(eventually([&] {
    std::error_code ec;
    c.ping(ec);
    return !ec;
  }));
  EXPECT_EQ(c.command({"SET", "in-db3-again", "yes"}).str, "OK");
  raw_client rc2 = server().client();
  EXPECT_TRUE(rc2({"GET", "in-db3-again"}).is_nil());
  ASSERT_TRUE(rc2({"SELECT", "3"}).is_ok());
  EXPECT_EQ(rc2({"GET", "in-db3-again"}).str, "yes");
}

TEST_F(core_test, SelectOfMissingDatabaseFails) {
  client c(fast_config(server().url() + "/99"));  // the server has 16 databases
  std::error_code ec;
  c.ping(ec);
  EXPECT_EQ(ec, errc::select_failed) << ec.message();
}

// An ACL user without +select: the connection fails with select_failed and the server's words.
// Before, the refusal was ignored and every command ran on database 0, among others' keys.
TEST_F(core_test, SelectRefusedByAnAclFails) {
  raw_client rc = server().client();
  ASSERT_TRUE(rc({"ACL", "SETUSER", "nosel", "on", ">pw", "~*", "&*", "+@all", "-select"}).is_ok());
  client c(fast_config("redis://nosel:pw@127.0.0.1:" + std::to_string(server().port()) + "/3"));
  std::error_code ec;
  c.ping(ec);
  EXPECT_EQ(ec, errc::select_failed) << ec.message();
  EXPECT_NE(last_error_text().find("NOPERM"), std::string::npos) << last_error_text();
  std::error_code set_ec;
  c.command({"SET", "nosel-key", "1"}, set_ec);
  EXPECT_TRUE(set_ec);
  EXPECT_TRUE(rc({"GET", "nosel-key"}).is_nil()) << "a command ran on database 0";
}

// ---- 8. CLIENT SETNAME ---------------------------------------------------------------------------

TEST_F(core_test, ClientSetName) {
  config conf = cfg();
  conf.client_name = "core-test-conn";
  client c(conf);
  c.ping();
  raw_client rc = server().client();
  raw_reply list = rc({"CLIENT", "LIST"});
  EXPECT_NE(list.str.find(" name=core-test-conn "), std::string::npos) << list.str;
  // Asked on the command connection: an asynchronous request always goes there. (A blocking one
  // may go on the lane, whose name is "core-test-conn:lane"; see lane_test.)
  EXPECT_EQ(c.async_command({"CLIENT", "GETNAME"}, asio::use_future).get().str, "core-test-conn");
}

// ---- 9. unix socket ------------------------------------------------------------------------------

TEST_F(core_test, UnixSocket) {
  ASSERT_FALSE(server().unix_path().empty());
  config conf = fast_config("unix://" + server().unix_path());
  client c(conf);
  c.ping();
  EXPECT_EQ(c.command({"SET", "via-unix", "1"}).str, "OK");
  raw_client rc = server().client();
  EXPECT_EQ(rc({"GET", "via-unix"}).str, "1");
  // The connection really is on the unix socket.
  raw_reply list = rc({"CLIENT", "LIST"});
  EXPECT_NE(list.str.find("name=redlease"), std::string::npos) << list.str;
  EXPECT_EQ(c.command({"CLIENT", "INFO"}).str.find("addr=127.0.0.1"), std::string::npos);

  config db = fast_config("unix://" + server().unix_path() + "?db=2");
  client c2(db);
  EXPECT_EQ(c2.command({"SET", "via-unix-db2", "1"}).str, "OK");
  ASSERT_TRUE(rc({"SELECT", "2"}).is_ok());
  EXPECT_EQ(rc({"GET", "via-unix-db2"}).str, "1");
}

// ---- 10. scripts ---------------------------------------------------------------------------------

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

// ---- 11. pub/sub ---------------------------------------------------------------------------------

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

// ---- 12. unreachable servers ---------------------------------------------------------------------

TEST(core_unreachable_test, NothingListeningFailsFast) {
  loopback_socket s(false);  // bound, not listening: connections are refused
  config conf;
  conf.host = "127.0.0.1";
  conf.port = s.port();
  set_fast_timing(conf);
  conf.connect_timeout = 3s;  // must fail from the refusal, not from the timeout
  client c(conf);
  auto start = steady::now();
  std::error_code ec;
  c.ping(ec);
  auto took = elapsed_ms(start);
  EXPECT_EQ(ec, errc::connect_failed) << ec.message();
  EXPECT_LT(took, 1000);
  std::string what;
  EXPECT_EQ(thrown_code([&] { c.ping(); }, &what), errc::connect_failed);
  EXPECT_NE(what.find("127.0.0.1:" + std::to_string(s.port())), std::string::npos) << what;
}

TEST(core_unreachable_test, SilentListenerTimesOut) {
  loopback_socket s(true);  // the kernel completes the handshake; nobody ever answers
  config conf;
  conf.host = "127.0.0.1";
  conf.port = s.port();
  set_fast_timing(conf);
  conf.connect_timeout = 300ms;
  conf.request_timeout = 5s;  // must fail from the connect timeout, not the request timeout
  client c(conf);
  auto start = steady::now();
  std::error_code ec;
  c.ping(ec);
  auto took = elapsed_ms(start);
  EXPECT_EQ(ec, errc::connect_timeout) << ec.message();
  EXPECT_LT(took, 300 + 1500);
  std::cout << "[ unreachable ] silent listener: " << ec.message() << " after " << took << " ms\n";
}

// ---- 13. blocking calls on the I/O thread ----------------------------------------------------------

TEST_F(core_test, BlockingCallsOnIoThreadFailWithWouldDeadlock) {
  client c(cfg());
  c.ping();
  struct seen {
    std::error_code ping, command, vec_command, subscribe, thrown;
  };
  std::promise<seen> p;
  auto f = p.get_future();
  c.async_command({"PING"}, [&](std::error_code, reply) {
    seen s;
    c.ping(s.ping);
    c.command({"PING"}, s.command);
    c.command(std::vector<std::string>{"GET", "x"}, s.vec_command);
    auto sub = c.subscribe("ch", [](std::string_view, std::string_view) {}, s.subscribe);
    s.thrown = thrown_code([&] { c.ping(); });
    p.set_value(s);
  });
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "a blocking call on the I/O thread hangs";
  seen s = f.get();
  EXPECT_EQ(s.ping, errc::would_deadlock);
  EXPECT_EQ(s.command, errc::would_deadlock);
  EXPECT_EQ(s.vec_command, errc::would_deadlock);
  EXPECT_EQ(s.subscribe, errc::would_deadlock);
  EXPECT_EQ(s.thrown, errc::would_deadlock);
  // The client is unharmed.
  c.ping();
}

// A lone blocking caller, with the I/O thread idle, writes its own requests on its own thread (no
// hand-off, no wake-up of the I/O thread); the other policy does too. An async call made just before a
// blocking one on the same thread still goes first: the caller sends what the inbox holds first.
TEST_F(core_test, ALoneBlockingCallerWritesItsOwnRequests) {
  for (auto policy : {sync_wait_policy::latency_first, sync_wait_policy::cpu_first}) {
    config conf = cfg();
    conf.sync_wait = policy;
    client c(conf);
    c.ping();
    auto l = c.lock("direct-writes");
    auto before = c.stats();
    // Calls write themselves; with the feature broken none would. (A caller that spun for its reply
    // comes back while the I/O thread is still finishing the read that brought it, and waits up to
    // 20 us for the guard; one that slept is woken when that is done. On a loaded machine, or under
    // a sanitizer that slows the I/O thread tenfold, many calls hand over instead: CI under TSan saw
    // 99 of 200.) So the loop runs until 40 have, and load can only make it longer.
    auto after = before;
    for (int i = 0; i < 5000 && after.direct_writes - before.direct_writes <= 40; ++i) {
      l.lock();
      l.unlock();
      after = c.stats();
    }
    auto direct = after.direct_writes - before.direct_writes;
    EXPECT_GT(direct, 40u) << "of " << (after.writes - before.writes);
    for (int i = 0; i < 200; ++i) {
      c.async_command({"SET", "direct-order", std::to_string(i)}, [](std::error_code, reply) {});
      ASSERT_EQ(c.command({"GET", "direct-order"}).str, std::to_string(i));
    }
  }
}

// A blocking caller that is not alone, but whose fellow callers only wait for a lock (their
// requests are answered; nothing is queued or in flight), writes its own requests too: the unlock
// that hands a lock over does not wait for the I/O thread to wake (B3t: 11.5 -> 8.3 context
// switches per acquisition). Not on the lane: it would spin.
TEST_F(core_test, ABlockingCallerWhoseFellowsOnlyWaitForALockWritesItsOwnRequests) {
  client c(cfg());
  c.ping();
  auto held = c.lock("direct-parked:held");
  held.lock();  // the main thread's owner, kept throughout
  std::error_code waited;
  std::thread waiter([&] { c.lock("direct-parked:held").lock(waited); });
  // The waiter is parked: subscribed, and its attempt answered.
  EXPECT_TRUE(eventually([&] {
    auto n = c.command({"PUBSUB", "NUMSUB", "redisson_lock__channel:{direct-parked:held}"});
    auto s = c.stats();
    return n.elements.size() == 2 && n.elements[1].integer == 1 && s.commands == s.replies;
  }));
  auto l = c.lock("direct-parked:mine");
  auto before = c.stats();
  // With the feature broken none would (the waiter makes the caller not alone). Under a sanitizer,
  // or on a loaded machine, the I/O thread may still hold the guard when the next call comes: a
  // share, not all, so the loop runs until 10 have (it failed once at 50 rounds under ctest -j2).
  auto after = before;
  for (int i = 0; i < 5000 && after.direct_writes - before.direct_writes <= 10; ++i) {
    l.lock();
    l.unlock();
    after = c.stats();
  }
  EXPECT_GT(after.direct_writes - before.direct_writes, 10u) << "of " << (after.writes - before.writes);
  EXPECT_EQ(after.lane_requests, before.lane_requests);
  held.unlock();
  waiter.join();
  EXPECT_FALSE(waited) << waited.message();
}

// While another caller's request is out, a blocking call goes to the I/O thread, to be pipelined
// with the others (16 blocking threads keep about 9 commands per write).
TEST_F(core_test, ABlockingCallWhileAnotherIsOutGoesThroughTheIoThread) {
  config conf = cfg();
  conf.sync_lane = false;  // the first call's request stays on the command connection
  conf.request_timeout = 30s;
  client c(conf);
  c.ping();
  auto commands0 = c.stats().commands;
  server().pause();
  std::error_code first_ec, second_ec;
  std::thread first([&] { c.command({"PING"}, first_ec); });
  EXPECT_TRUE(eventually([&] { return c.stats().commands >= commands0 + 1; }));
  auto direct0 = c.stats().direct_writes;
  std::thread second([&] { c.command({"PING"}, second_ec); });
  EXPECT_TRUE(eventually([&] { return c.stats().commands >= commands0 + 2; }));
  EXPECT_EQ(c.stats().direct_writes, direct0);
  server().resume();
  first.join();
  second.join();
  EXPECT_FALSE(first_ec) << first_ec.message();
  EXPECT_FALSE(second_ec) << second_ec.message();
}

// ---- 14. closing with requests outstanding --------------------------------------------------------

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

// ---- 15. server error replies ---------------------------------------------------------------------

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

namespace redlease::test {
namespace {

TEST(core_cloexec_test, sockets_are_close_on_exec) {
  REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  redis_server srv;
  auto conf = config::from_url(srv.url());
  client c(conf);
  c.ping();
  auto sub = c.subscribe("cloexec", [](std::string_view, std::string_view) {});
  // Every socket this process has open must carry FD_CLOEXEC.
  int sockets = 0;
  for (int fd = 3; fd < 1024; ++fd) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int flags = fcntl(fd, F_GETFD);
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    if (peer.ss_family != AF_INET) continue;
    auto port = ntohs(reinterpret_cast<sockaddr_in*>(&peer)->sin_port);
    if (port != srv.port()) continue;
    ++sockets;
    EXPECT_TRUE(flags & FD_CLOEXEC) << "fd " << fd;
  }
  EXPECT_GE(sockets, 2);  // the command and pub/sub connections
}

}  // namespace
}  // namespace redlease::test

namespace redlease::test {
namespace {

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
