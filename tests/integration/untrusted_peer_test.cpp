// SPDX-License-Identifier: MIT
// Replies from an untrusted peer (issue: memory bounded by the bytes received, a clear error for a
// port that is not Redis): real sockets on loopback, a fake peer that sends what a broken proxy, a
// wrong port or a hostile server would, then a real server to show the client still works.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "fake_peer.hpp"
#include "lock_test_support.hpp"
#include "redlease/redlease.hpp"

namespace redlease::test {
namespace {

// Peak resident memory of this process (VmHWM), in kB; reset_peak() starts a new measurement.
long peak_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}
long rss_kb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}
bool reset_peak() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

struct bad_peer_case {
  const char* name;
  std::string bytes;
  const char* shows;  // what the error message must show of the peer's bytes
  errc want = errc::protocol_error;
  const char* says = "does not speak the Redis protocol";  // what the CLI's message must say
};

std::string nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "*1\r\n";
  return s + ":1\r\n";
}

std::vector<bad_peer_case> bad_peers() {
  return {
      {"absurd_array_header", "*244444444\r\n:1\r\n", "*244444444"},
      {"bulk_larger_than_memory", "$100000000000\r\n", "$100000000000"},
      {"nested_10000_arrays", nested(10000), "*1\\r\\n*1"},
      {"http_response", "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 Bad Request"},
      // What a TLS server sends a client that does not speak TLS: a fatal alert record. The peer
      // answers a TLS hello on a second connection with TLS too: a TLS port, and the error says so.
      {"tls_alert", std::string("\x15\x03\x03\x00\x02\x02\x46", 7), "use rediss://", errc::tls_expected_by_server,
       "TLS port"},
  };
}

class untrusted_peer : public lock_fixture {};

TEST_F(untrusted_peer, EachBadPeerGetsATypedErrorAtOnceWithBoundedMemory) {
  for (const auto& p : bad_peers()) {
    SCOPED_TRACE(p.name);
    fake_peer peer({p.bytes});
    auto c = config::from_url(peer.url());
    c.connect_timeout = 2000ms;
    c.request_timeout = 5000ms;
    std::vector<background_error> seen;
    long before = rss_kb();
    bool can_reset = reset_peak();
    auto t0 = steady::now();
    std::error_code ec;
    reply r;
    {
      client cl(c);
      r = cl.command({"PING"}, ec);
      EXPECT_LT(ms_since(t0), 2000) << "must fail at once, within the connect timeout";
      if (p.want == errc::protocol_error) {
        EXPECT_GE(cl.stats().protocol_errors, 1u);
      }
    }
    EXPECT_EQ(ec, p.want) << ec.message();
    if (p.want == errc::protocol_error) {
      EXPECT_EQ(ec, std::errc::protocol_error);
    }
    ASSERT_TRUE(r.is_error());
    EXPECT_NE(r.str.find(p.shows), std::string::npos) << r.str;
    if (can_reset) {
      long grown = peak_kb() - before;
      EXPECT_LT(grown, 16 * 1024) << "peak memory grew by " << grown << " kB";
    }
  }
  // A client pointed at a real server afterwards works.
  client good(cfg());
  good.ping();
  EXPECT_EQ(good.command({"SET", "k", "v"}).str, "OK");
}

TEST_F(untrusted_peer, ThrowingFormSaysThePeerIsNotRedisAndShowsItsBytes) {
  fake_peer peer({"HTTP/1.1 400 Bad Request\r\n\r\n"});
  client cl(config::from_url(peer.url()));
  try {
    cl.ping();
    FAIL() << "ping succeeded";
  } catch (const redlease::error& e) {
    EXPECT_EQ(e.code(), errc::protocol_error);
    std::string w = e.what();
    EXPECT_NE(w.find("does not speak the Redis protocol"), std::string::npos) << w;
    EXPECT_NE(w.find("HTTP/1.1 400 Bad Request\\r\\n"), std::string::npos) << w;
  }
}

// A peer that passes the handshake, then breaks the protocol: the connection is a fault, dropped and
// re-established; the request on it fails with protocol_error; nothing else stops.
TEST_F(untrusted_peer, ProtocolErrorOnALiveConnectionDropsAndReconnects) {
  fake_peer peer({"+OK\r\n", "!not resp\r\n"});
  auto c = config::from_url(peer.url());
  c.reconnect_min_delay = 10ms;
  c.reconnect_max_delay = 50ms;
  std::vector<std::string> reported;
  std::mutex mu;
  c.on_error = [&](const background_error& e) {
    std::lock_guard<std::mutex> g(mu);
    reported.push_back(std::string(e.source) + ": " + e.message);
  };
  client cl(c);
  std::error_code ec;
  auto r = cl.command({"PING"}, ec);
  EXPECT_EQ(ec, errc::protocol_error);
  EXPECT_NE(r.str.find("!not resp"), std::string::npos) << r.str;
  // The client reconnects (the peer passes the handshake again) and the next request is sent.
  EXPECT_TRUE(eventually([&] { return cl.stats().connects >= 2; }, 3000ms));
  ec.clear();
  cl.command({"PING"}, ec);
  EXPECT_EQ(ec, errc::protocol_error);
  EXPECT_GE(cl.stats().protocol_errors, 2u);
  std::lock_guard<std::mutex> g(mu);
  ASSERT_FALSE(reported.empty());
  EXPECT_NE(reported.front().find("connection"), std::string::npos) << reported.front();
}

// A peer that passes the handshake and then drops the connection, or answers garbage, used to get a
// reconnect at once every time, since each handshake reset the backoff: about 2,800 connections a
// second, a core of CPU and an on_error report each. A connection that dies that young keeps
// backing off now.
TEST_F(untrusted_peer, a_peer_that_drops_every_connection_after_the_handshake_is_not_hammered) {
  const std::string drops[] = {"+OK\r\n" + std::string(fake_peer::close), "+OK\r\nHTTP/1.1 400 Bad Request\r\n\r\n"};
  for (const auto& answer : drops) {
    SCOPED_TRACE(answer);
    fake_peer peer({answer});
    auto c = config::from_url(peer.url());
    c.reconnect_min_delay = 10ms;
    c.reconnect_max_delay = 200ms;
    std::atomic<int> reported{0};
    c.on_error = [&](const background_error&) { ++reported; };
    {
      client cl(c);
      std::this_thread::sleep_for(1500ms);  // idle: the client reconnects on its own
    }
    // Backing off from 10 ms to 200 ms: about 15 connections in 1.5 s; before, thousands.
    EXPECT_GE(peer.accepted(), 3);
    EXPECT_LE(peer.accepted(), 40);
    EXPECT_LE(reported.load(), 40);
  }
}

// A peer that declares a long reply and trickles it a byte at a time kept the connection "alive":
// liveness counted any byte, so every request on it timed out and the connection was never
// dropped. Only whole replies count now.
TEST_F(untrusted_peer, a_reply_trickled_a_byte_at_a_time_does_not_keep_a_connection_alive) {
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lfd, 8), 0);
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::atomic<bool> stop{false};
  std::atomic<int> accepted{0};
  // Each connection: "+OK" to the handshake, then to the first request "$100000\r\n" and one byte
  // every 50 ms, for as long as the client stays.
  std::thread peer([&] {
    while (!stop) {
      pollfd p{lfd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      ++accepted;
      char buf[4096];
      bool ok = ::read(fd, buf, sizeof buf) > 0 && ::write(fd, "+OK\r\n", 5) == 5 && ::read(fd, buf, sizeof buf) > 0 &&
                ::write(fd, "$100000\r\n", 9) == 9;
      while (ok && !stop) {
        std::this_thread::sleep_for(50ms);
        pollfd q{fd, POLLIN, 0};
        if (::poll(&q, 1, 0) > 0) {
          if (::read(fd, buf, sizeof buf) <= 0) break;  // the client closed it
        }
        ok = ::write(fd, "x", 1) == 1;
      }
      ::close(fd);
    }
  });
  auto c = config::from_url("redis://127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
  c.request_timeout = 300ms;
  c.reconnect_min_delay = 10ms;
  c.reconnect_max_delay = 50ms;
  {
    client cl(c);
    std::error_code ec;
    cl.command({"PING"}, ec);
    EXPECT_EQ(ec, errc::request_timeout);
    // Twice the request timeout without a whole reply: dropped and reconnected.
    EXPECT_TRUE(eventually([&] { return cl.stats().stalled_drops >= 1; }, 3000ms)) << cl.stats().stalled_drops;
    EXPECT_TRUE(eventually([&] { return accepted.load() >= 2; }, 3000ms));
  }
  stop = true;
  peer.join();
  ::close(lfd);
}

TEST_F(untrusted_peer, CliExits69WithTheMessage) {
  for (const auto& p : bad_peers()) {
    SCOPED_TRACE(p.name);
    fake_peer peer({p.bytes});
    std::string err = "/tmp/redlease-untrusted-" + std::to_string(::getpid()) + ".err";
    std::string cmd = std::string(REDLEASE_CLI_PATH) + " status x --redis " + peer.url() + " >/dev/null 2>" + err;
    auto t0 = steady::now();
    int st = std::system(cmd.c_str());
    EXPECT_LT(ms_since(t0), 3000);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 69);
    std::ifstream f(err);
    std::stringstream text;
    text << f.rdbuf();
    std::remove(err.c_str());
    EXPECT_NE(text.str().find(p.says), std::string::npos) << text.str();
    EXPECT_NE(text.str().find(p.shows), std::string::npos) << text.str();
  }
}

}  // namespace
}  // namespace redlease::test
