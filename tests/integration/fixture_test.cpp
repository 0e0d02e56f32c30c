// SPDX-License-Identifier: MIT
// Tests of the test harness itself (redis_server, raw_client, redis_fixture) against a real
// redis-server.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "redis_fixture.hpp"

namespace redlease::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

raw_reply status(std::string s) { return raw_reply{raw_reply::kind::status, std::move(s), 0, {}}; }
raw_reply bulk(std::string s) { return raw_reply{raw_reply::kind::string, std::move(s), 0, {}}; }
raw_reply integer(long long v) { return raw_reply{raw_reply::kind::integer, {}, v, {}}; }

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

class fixture_test : public redis_fixture {};

TEST_F(fixture_test, StartsAndAnswersPing) {
  EXPECT_TRUE(server().running());
  EXPECT_GT(server().pid(), 0);
  EXPECT_NE(server().port(), 0);
  EXPECT_EQ(server().host(), "127.0.0.1");
  EXPECT_EQ(server().url(), "redis://127.0.0.1:" + std::to_string(server().port()));
  EXPECT_TRUE(fs::is_directory(server().dir()));

  raw_client c = server().client();
  EXPECT_EQ(c({"PING"}), status("PONG"));
  // The server runs with the options the harness promises.
  EXPECT_TRUE(c({"DEBUG", "SLEEP", "0"}).is_ok());
  EXPECT_EQ(c({"CONFIG", "GET", "save"}).elements.at(1), bulk(""));
  EXPECT_EQ(c({"CONFIG", "GET", "appendonly"}).elements.at(1), bulk("no"));
  raw_reply info = c({"INFO", "server"});
  EXPECT_NE(info.str.find("process_id:" + std::to_string(server().pid()) + "\r\n"),
            std::string::npos);
}

TEST_F(fixture_test, ReplyTypes) {
  raw_client c = server().client();
  EXPECT_EQ(c({"INCRBY", "n", "5"}), integer(5));
  EXPECT_TRUE(c({"GET", "missing"}).is_nil());
  EXPECT_TRUE(c({"SET", "s", "v"}).is_ok());
  raw_reply err = c({"INCR", "s"});
  EXPECT_TRUE(err.is_error());
  EXPECT_TRUE(starts_with(err.str, "ERR")) << err;
  EXPECT_TRUE(c({"NOSUCHCOMMAND"}).is_error());

  raw_reply arr = c({"MGET", "s", "missing", "n"});
  ASSERT_TRUE(arr.is_array());
  ASSERT_EQ(arr.elements.size(), 3u);
  EXPECT_EQ(arr.elements[0], bulk("v"));
  EXPECT_TRUE(arr.elements[1].is_nil());
  EXPECT_EQ(arr.elements[2], bulk("5"));
  EXPECT_EQ(arr.to_string(), R"(["v", (nil), "5"])");

  // The connection stays usable after error replies.
  EXPECT_EQ(c({"PING"}), status("PONG"));
}

TEST_F(fixture_test, BinarySafeValues) {
  raw_client c = server().client();
  const std::string key("k\0ey\r\n", 6);
  const std::string value("a\0b\r\n$3\r\n*\0\xff", 13);
  EXPECT_TRUE(c.command({"SET", key, value}).is_ok());
  EXPECT_EQ(c.command({"GET", key}), bulk(value));
  EXPECT_EQ(c.command({"STRLEN", key}), integer(13));
  EXPECT_EQ(c({"EXISTS", "k"}), integer(0));

  const std::string big(1 << 20, 'x');
  EXPECT_TRUE(c.command({"SET", "big", big}).is_ok());
  EXPECT_EQ(c({"GET", "big"}).str, big);
}

TEST_F(fixture_test, Pipeline) {
  raw_client c = server().client();
  auto replies = c.pipeline({{"SET", "a", "1"}, {"INCR", "a"}, {"GET", "a"}, {"LPUSH", "a", "x"}});
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_TRUE(replies[0].is_ok());
  EXPECT_EQ(replies[1], integer(2));
  EXPECT_EQ(replies[2], bulk("2"));
  EXPECT_TRUE(starts_with(replies[3].str, "WRONGTYPE")) << replies[3];
}

TEST_F(fixture_test, ReadReplyReceivesPubSubMessages) {
  raw_client sub = server().client();
  raw_reply ack = sub({"SUBSCRIBE", "chan"});
  ASSERT_TRUE(ack.is_array());
  EXPECT_EQ(ack.elements.at(0), bulk("subscribe"));

  raw_client pub = server().client();
  EXPECT_EQ(pub({"PUBLISH", "chan", std::string_view("hi\0!", 4)}), integer(1));
  raw_reply msg = sub.read_reply();
  ASSERT_TRUE(msg.is_array());
  ASSERT_EQ(msg.elements.size(), 3u);
  EXPECT_EQ(msg.elements[0], bulk("message"));
  EXPECT_EQ(msg.elements[1], bulk("chan"));
  EXPECT_EQ(msg.elements[2], bulk(std::string("hi\0!", 4)));
}

TEST_F(fixture_test, TwoServersHaveDifferentPortsAndIndependentData) {
  auto servers = start_servers(2);
  ASSERT_EQ(servers.size(), 2u);
  EXPECT_NE(servers[0]->port(), servers[1]->port());
  EXPECT_NE(servers[0]->port(), server().port());
  EXPECT_NE(servers[0]->dir(), servers[1]->dir());

  raw_client a = servers[0]->client();
  raw_client b = servers[1]->client();
  EXPECT_TRUE(a({"SET", "key", "a"}).is_ok());
  EXPECT_TRUE(b({"GET", "key"}).is_nil());
  EXPECT_TRUE(b({"SET", "key", "b"}).is_ok());
  EXPECT_EQ(a({"GET", "key"}), bulk("a"));
  EXPECT_TRUE(server().client()({"GET", "key"}).is_nil());
}

TEST_F(fixture_test, RestartLosesDataAndKeepsPort) {
  const auto port = server().port();
  const pid_t old_pid = server().pid();
  {
    raw_client c = server().client();
    EXPECT_TRUE(c({"SET", "key", "value"}).is_ok());
  }
  server().restart();
  EXPECT_TRUE(server().running());
  EXPECT_EQ(server().port(), port);
  EXPECT_NE(server().pid(), old_pid);
  raw_client c = server().client();
  EXPECT_EQ(c({"PING"}), status("PONG"));
  EXPECT_TRUE(c({"GET", "key"}).is_nil());
}

TEST_F(fixture_test, ConnectionDropsWhenServerStops) {
  raw_client c = server().client();
  EXPECT_EQ(c({"PING"}), status("PONG"));
  server().stop();
  EXPECT_THROW(c({"PING"}), std::runtime_error);
  EXPECT_FALSE(c.connected());
  server().start();
  EXPECT_THROW(c({"PING"}), std::runtime_error);  // closed, not reconnected
  EXPECT_EQ(server().client()({"PING"}), status("PONG"));
}

TEST_F(fixture_test, PauseMakesCommandsTimeOutAndResumeAnswers) {
  raw_client c = server().client();
  c.set_timeout(200ms);
  EXPECT_EQ(c.timeout(), 200ms);
  server().pause();
  EXPECT_TRUE(server().paused());
  EXPECT_TRUE(server().running());

  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(c({"PING"}), timeout_error);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms);
  EXPECT_TRUE(c.connected());

  server().resume();
  EXPECT_FALSE(server().paused());
  c.set_timeout(5s);
  // The timed-out request is still pending; its reply arrives once the server runs again.
  EXPECT_EQ(c.read_reply(), status("PONG"));
  EXPECT_EQ(c({"PING"}), status("PONG"));
}

TEST_F(fixture_test, StopWorksOnPausedServer) {
  server().pause();
  server().stop();
  EXPECT_FALSE(server().running());
  EXPECT_FALSE(server().paused());
  EXPECT_EQ(server().pid(), -1);
  server().start();
  EXPECT_EQ(server().client()({"PING"}), status("PONG"));
}

TEST_F(fixture_test, KillThenStart) {
  const auto port = server().port();
  const pid_t old_pid = server().pid();
  EXPECT_TRUE(server().client()({"SET", "key", "value"}).is_ok());
  server().kill();
  EXPECT_FALSE(server().running());
  EXPECT_EQ(server().pid(), -1);
  EXPECT_EQ(::kill(old_pid, 0), -1);  // reaped, not a zombie
  EXPECT_THROW(server().client(), std::runtime_error);
  server().kill();  // no-op
  server().stop();  // no-op

  server().start();
  EXPECT_TRUE(server().running());
  EXPECT_EQ(server().port(), port);
  raw_client c = server().client();
  EXPECT_EQ(c({"PING"}), status("PONG"));
  EXPECT_EQ(c({"EXISTS", "key"}), integer(0));
  server().start();  // no-op while running
  EXPECT_EQ(c({"PING"}), status("PONG"));
}

TEST_F(fixture_test, UnixSocketExistsWhileRunning) {
  const std::string path = server().unix_path();
  ASSERT_FALSE(path.empty());
  EXPECT_TRUE(starts_with(path, server().dir()));
  EXPECT_TRUE(fs::is_socket(path));
  server().kill();
  server().start();
  EXPECT_TRUE(fs::is_socket(path));
  server().stop();
  EXPECT_FALSE(fs::exists(path));
}

TEST(redis_server_test, WithoutUnixSocket) {
  REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  server_options opts;
  opts.unix_socket = false;
  redis_server s(opts);
  EXPECT_EQ(s.unix_path(), "");
  EXPECT_FALSE(fs::exists(s.dir() + "/redis.sock"));
  EXPECT_EQ(s.client()({"PING"}), status("PONG"));
}

TEST(redis_server_test, DestructorStopsServerAndRemovesDir) {
  REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  std::string dir;
  pid_t pid = -1;
  {
    redis_server s;
    dir = s.dir();
    pid = s.pid();
    EXPECT_TRUE(fs::exists(dir));
  }
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(::kill(pid, 0), -1);
}

TEST(redis_server_test, ExtraArgsArePassed) {
  REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  server_options opts;
  opts.extra_args = {"--notify-keyspace-events", "Kgx"};
  redis_server s(opts);
  raw_reply r = s.client()({"CONFIG", "GET", "notify-keyspace-events"});
  ASSERT_TRUE(r.is_array());
  ASSERT_EQ(r.elements.size(), 2u);
  const std::string& flags = r.elements[1].str;
  for (char f : {'K', 'g', 'x'}) EXPECT_NE(flags.find(f), std::string::npos) << flags;
}

TEST(redis_server_test, ConfigLinesAreWrittenToAFile) {
  REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  server_options opts;
  opts.config_lines = {"maxmemory-policy allkeys-lru", "port 1"};  // the port is overridden
  redis_server s(opts);
  EXPECT_TRUE(fs::exists(s.dir() + "/redis.conf"));
  raw_client c = s.client();
  EXPECT_EQ(c({"CONFIG", "GET", "maxmemory-policy"}).elements.at(1), bulk("allkeys-lru"));
  EXPECT_EQ(c({"CONFIG", "GET", "port"}).elements.at(1), bulk(std::to_string(s.port())));
}

TEST(redis_server_test, SentinelMode) {
  REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  server_options opts;
  opts.sentinel = true;
  opts.password = "pw";
  opts.config_lines = {"sentinel monitor m 127.0.0.1 1 1"};
  redis_server s(opts);
  raw_client c = s.client();
  EXPECT_NE(c({"INFO", "server"}).str.find("redis_mode:sentinel"), std::string::npos);
  raw_reply master = c({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m"});
  ASSERT_TRUE(master.is_array()) << master;
  EXPECT_EQ(master.elements.at(1), bulk("1"));
  // Sentinel rewrote its (writable) config file; it survives a restart.
  s.restart();
  EXPECT_TRUE(s.client()({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m"}).is_array());
}

TEST(redis_server_test, InvalidArgsMakeConstructorThrow) {
  REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  server_options opts;
  opts.extra_args = {"--no-such-option", "1"};
  EXPECT_THROW(redis_server{opts}, std::runtime_error);
}

TEST(redis_server_test, AvailableHonoursEnvironment) {
  const char* old = std::getenv("REDLEASE_TEST_REDIS_SERVER");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::setenv("REDLEASE_TEST_REDIS_SERVER", "/nonexistent/redis-server", 1);
  EXPECT_FALSE(redis_server::available());
  EXPECT_THROW(redis_server{}, std::runtime_error);
  if (saved) {
    ::setenv("REDLEASE_TEST_REDIS_SERVER", saved->c_str(), 1);
  } else {
    ::unsetenv("REDLEASE_TEST_REDIS_SERVER");
  }
}

// A server must not outlive a test process that dies without running destructors or atexit hooks.
TEST(redis_server_test, ServerDiesWithItsParentProcess) {
  REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  // Orphans are re-parented to us, so the grandchild's death can be observed with waitpid.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  struct report {
    pid_t pid;
    char dir[256];
  };
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    report rep{};
    try {
      auto* s = new redis_server();  // never destroyed: only PR_SET_PDEATHSIG can stop it
      rep.pid = s->pid();
      std::strncpy(rep.dir, s->dir().c_str(), sizeof rep.dir - 1);
    } catch (...) {
      rep.pid = -1;
    }
    (void)!::write(fds[1], &rep, sizeof rep);
    ::_exit(0);
  }
  ::close(fds[1]);
  report rep{};
  const ssize_t n = ::read(fds[0], &rep, sizeof rep);
  ::close(fds[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof rep));
  ASSERT_GT(rep.pid, 0);

  const auto deadline = std::chrono::steady_clock::now() + 5s;
  pid_t reaped = 0;
  while ((reaped = ::waitpid(rep.pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  if (reaped == 0) {
    ::kill(rep.pid, SIGKILL);
    ::waitpid(rep.pid, &status, 0);
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  std::error_code ec;
  fs::remove_all(rep.dir, ec);
  EXPECT_EQ(reaped, rep.pid) << "redis-server survived its parent";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

class password_test : public redis_fixture {
 protected:
  server_options options() const override {
    server_options o;
    o.password = "s3cret";
    return o;
  }
};

TEST_F(password_test, UnauthenticatedCommandGetsNoauth) {
  raw_client c(server().host(), server().port());
  raw_reply r = c({"GET", "x"});
  ASSERT_TRUE(r.is_error());
  EXPECT_TRUE(starts_with(r.str, "NOAUTH")) << r;
}

TEST_F(password_test, ClientAuthenticates) {
  EXPECT_EQ(server().password(), "s3cret");
  EXPECT_EQ(server().url(), "redis://:s3cret@127.0.0.1:" + std::to_string(server().port()));
  raw_client c = server().client();
  EXPECT_TRUE(c({"SET", "x", "1"}).is_ok());
  EXPECT_EQ(c({"GET", "x"}), bulk("1"));
  EXPECT_THROW(raw_client(server().host(), server().port(), "wrong"), std::runtime_error);

  server().restart();  // readiness check must authenticate too
  EXPECT_EQ(server().client()({"PING"}), status("PONG"));
}

}  // namespace
}  // namespace redlease::test
