// SPDX-License-Identifier: MIT
// The connection core (redlease::client) against a real redis-server, connecting:
// reconnection, AUTH, URLs, database selection, CLIENT SETNAME, the unix socket,
// unreachable servers, close-on-exec sockets.
#include "core_test_support.hpp"

namespace redlease::test {
namespace {

// ---- reconnect -----------------------------------------------------------------------------------

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

// ---- AUTH ----------------------------------------------------------------------------------------

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

// ---- URLs ----------------------------------------------------------------------------------------

TEST_F(core_test, BadUrls) {
  EXPECT_EQ(thrown_code([] { client c(config::from_url("127.0.0.1:6379")); }), errc::invalid_url);
  EXPECT_EQ(thrown_code([&] { client c(config::from_url("redis://127.0.0.1:0")); }), errc::invalid_url);
  // rediss:// parses; TLS on a unix socket is refused when connecting (tests/integration/tls_test.cpp
  // covers TLS itself).
  EXPECT_TRUE(config::from_url("rediss://127.0.0.1:" + std::to_string(server().port())).tls.enabled);
}

// ---- database selection --------------------------------------------------------------------------

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

// ---- CLIENT SETNAME ------------------------------------------------------------------------------

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

// ---- unix socket ---------------------------------------------------------------------------------

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

// ---- unreachable servers -------------------------------------------------------------------------

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

// The reason and the address travel with connect_failed / connect_timeout, as a server's words do:
// in the exception of a lock call (which names no URL of its own) and in last_error_text().
TEST(core_unreachable_test, a_refused_connection_says_so_with_the_address) {
  loopback_socket s(false);
  config conf;
  conf.host = "127.0.0.1";
  conf.port = s.port();
  conf.password = "s3cret-password";
  set_fast_timing(conf);
  conf.connect_timeout = 3s;
  client c(conf);
  auto l = c.lock("orders:42");
  std::string what;
  EXPECT_EQ(thrown_code([&] { l.try_lock(); }, &what), errc::connect_failed);
  const std::string at = "127.0.0.1:" + std::to_string(s.port());
  EXPECT_NE(what.find("try_lock \"orders:42\""), std::string::npos) << what;
  EXPECT_NE(what.find(at + ": connection refused"), std::string::npos) << what;
  EXPECT_EQ(what.find("s3cret"), std::string::npos) << what;
  std::error_code ec;
  l.try_lock(ec);
  EXPECT_EQ(ec, errc::connect_failed);
  EXPECT_EQ(last_error_text(), at + ": connection refused");
}

TEST(core_unreachable_test, an_unknown_host_says_name_not_found) {
  config conf;
  conf.host = "nonexistent.invalid";  // RFC 6761: never resolves
  conf.port = 6379;
  set_fast_timing(conf);
  conf.connect_timeout = 5s;
  client c(conf);
  std::string what;
  EXPECT_EQ(thrown_code([&] { c.lock("orders:42").try_lock(); }, &what), errc::connect_failed);
  EXPECT_NE(what.find("nonexistent.invalid:6379: name not found"), std::string::npos) << what;
}

TEST(core_unreachable_test, a_silent_listener_says_timed_out_with_the_address) {
  loopback_socket s(true);
  config conf;
  conf.host = "127.0.0.1";
  conf.port = s.port();
  set_fast_timing(conf);
  conf.connect_timeout = 300ms;
  conf.request_timeout = 5s;
  client c(conf);
  std::string what;
  EXPECT_EQ(thrown_code([&] { c.lock("orders:42").try_lock(); }, &what), errc::connect_timeout);
  EXPECT_NE(what.find("127.0.0.1:" + std::to_string(s.port()) + ": timed out"), std::string::npos) << what;
}

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
