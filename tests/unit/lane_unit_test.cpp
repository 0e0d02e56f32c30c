// SPDX-License-Identifier: MIT
// Unit tests of a blocking caller's lane (src/net/lane.hpp) without a server: the lane is one end of
// a Unix socketpair, the test plays Redis on the other end with raw RESP bytes.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "net/lane.hpp"
#include "redlease/config.hpp"
#include "redlease/error.hpp"

namespace redlease::detail {
namespace {

using namespace std::chrono_literals;

const std::string ping = "*1\r\n$4\r\nPING\r\n";

config make_cfg(std::chrono::milliseconds timeout) {
  config c;
  c.request_timeout = timeout;
  return c;
}

// What one handler was called with, and which request it belonged to.
struct seen {
  int index;
  std::error_code ec;
  reply r;
};
using log_ptr = std::shared_ptr<std::vector<seen>>;

request make_request(std::string payload, const log_ptr& log, int index, bool idempotent = true) {
  return request{std::move(payload), [log, index](std::error_code ec, reply r) { log->push_back({index, ec, std::move(r)}); },
                 idempotent};
}

// Runs the handlers of what ended, in order (as run_completions does without a home).
void run(std::vector<lane_completion>& out) {
  for (auto& c : out) {
    ASSERT_TRUE(static_cast<bool>(c.handler));
    c.handler(c.ec, std::move(c.r));
  }
  out.clear();
}

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << "peer write failed: errno " << errno;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Everything the lane has written so far (the peer's side, without blocking).
std::string read_available(int fd) {
  std::string s;
  char buf[4096];
  for (;;) {
    auto n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    s.append(buf, static_cast<std::size_t>(n));
  }
  return s;
}

// The process's virtual size in bytes (an up-front allocation of a declared length would show here
// even while its pages are untouched).
std::size_t virtual_size() {
  std::ifstream f("/proc/self/statm");
  std::size_t pages = 0;
  f >> pages;
  return pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// A lane over one end of a socketpair; `peer` is the test's (the server's) end.
struct pair_fixture {
  explicit pair_fixture(std::chrono::milliseconds timeout = 2000ms) : cfg(make_cfg(timeout)) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      ADD_FAILURE() << "socketpair failed: errno " << errno;
      return;
    }
    peer = fds[1];
    l = std::make_shared<lane>(fds[0], cfg, 7, std::weak_ptr<connection>{},
                               [this](std::shared_ptr<lane> p) { parked = std::move(p); }, counters);
  }
  ~pair_fixture() { close_peer(); }
  pair_fixture(const pair_fixture&) = delete;
  pair_fixture& operator=(const pair_fixture&) = delete;

  void close_peer() {
    if (peer >= 0) ::close(peer);
    peer = -1;
  }

  config cfg;
  std::shared_ptr<lane_counters> counters = std::make_shared<lane_counters>();
  std::shared_ptr<lane> parked;
  std::shared_ptr<lane> l;
  log_ptr log = std::make_shared<std::vector<seen>>();
  int peer = -1;
};

// The three replies of the ordering tests, and where each ends in their concatenation.
const std::string three_replies = "+OK\r\n:5\r\n$3\r\nabc\r\n";
constexpr std::size_t reply_ends[] = {5, 9, 18};

std::size_t replies_within(std::size_t prefix) {
  std::size_t n = 0;
  for (auto e : reply_ends) n += e <= prefix ? 1 : 0;
  return n;
}

void expect_three_replies(const std::vector<seen>& log) {
  ASSERT_EQ(log.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(log[static_cast<std::size_t>(i)].index, i);
    EXPECT_FALSE(log[static_cast<std::size_t>(i)].ec) << log[static_cast<std::size_t>(i)].ec.message();
  }
  EXPECT_EQ(log[0].r.type, reply::kind::status);
  EXPECT_EQ(log[0].r.str, "OK");
  EXPECT_EQ(log[1].r.type, reply::kind::integer);
  EXPECT_EQ(log[1].r.integer, 5);
  EXPECT_EQ(log[2].r.type, reply::kind::string);
  EXPECT_EQ(log[2].r.str, "abc");
}

// Sends the three requests of the ordering tests and checks the peer got their bytes, in order.
void send_three(pair_fixture& f) {
  const std::string payloads[] = {ping, "*2\r\n$3\r\nGET\r\n$1\r\na\r\n", "*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n"};
  for (int i = 0; i < 3; ++i) {
    auto r = make_request(payloads[i], f.log, i, i != 1);
    ASSERT_TRUE(f.l->send(r));
  }
  EXPECT_EQ(read_available(f.peer), payloads[0] + payloads[1] + payloads[2]);
  EXPECT_TRUE(f.l->pending());
  EXPECT_TRUE(f.l->waiting());
  EXPECT_EQ(f.counters->requests.load(), 3u);
}

// Every way of cutting the replies into one, two or three writes: after each write, the replies it
// completed (and only those) are delivered, to their own requests, in order. A write that completes
// a reply is read with await() (the bytes are there: it returns from its spin); one that completes
// none with collect() (await would sleep until the deadline).
TEST(Lane, RepliesMatchRequestsInOrderAtEveryByteBoundary) {
  const std::size_t n = three_replies.size();
  int cases = 0;
  for (std::size_t i = 0; i <= n; ++i) {
    for (std::size_t j = i; j <= n; ++j) {
      SCOPED_TRACE("cuts at " + std::to_string(i) + " and " + std::to_string(j));
      pair_fixture f;
      send_three(f);
      std::size_t cuts[] = {i, j, n};
      std::size_t from = 0;
      std::vector<lane_completion> out;
      for (auto to : cuts) {
        if (to == from) continue;
        write_all(f.peer, std::string_view(three_replies).substr(from, to - from));
        auto before = replies_within(from), after = replies_within(to);
        if (after > before) {
          clock::duration rtt{};
          EXPECT_TRUE(f.l->await(clock::now() + 500ms, out, rtt));
          EXPECT_GE(rtt.count(), 0);
          EXPECT_LT(rtt, 1s);
        } else {
          f.l->collect(out);
        }
        ASSERT_EQ(out.size(), after - before);
        for (auto& c : out) EXPECT_FALSE(c.resend);
        run(out);
        ASSERT_EQ(f.log->size(), after);
        from = to;
      }
      expect_three_replies(*f.log);
      EXPECT_FALSE(f.l->pending());
      EXPECT_FALSE(f.l->waiting());
      EXPECT_FALSE(f.l->broken());
      EXPECT_TRUE(f.l->usable());
      EXPECT_EQ(f.counters->requests.load(), 3u);
      EXPECT_EQ(f.counters->replies.load(), 3u);
      ++cases;
    }
  }
  EXPECT_GT(cases, 100);
}

TEST(Lane, RepliesInOneWriteAllArriveInOneAwait) {
  pair_fixture f;
  send_three(f);
  write_all(f.peer, three_replies);
  std::vector<lane_completion> out;
  clock::duration rtt{};
  EXPECT_TRUE(f.l->await(clock::now() + 500ms, out, rtt));
  ASSERT_EQ(out.size(), 3u);
  // The completions themselves carry the replies, before any handler runs.
  EXPECT_EQ(out[0].r.str, "OK");
  EXPECT_EQ(out[1].r.integer, 5);
  EXPECT_EQ(out[2].r.str, "abc");
  for (auto& c : out) EXPECT_FALSE(c.ec);
  run(out);
  expect_three_replies(*f.log);
  EXPECT_FALSE(f.l->pending());
  EXPECT_FALSE(f.l->waiting());
  EXPECT_EQ(f.counters->requests.load(), 3u);
  EXPECT_EQ(f.counters->replies.load(), 3u);
}

// Replies larger than one read of the lane (16 KiB), all arrived: one collect() delivers them all,
// whole and in order.
TEST(Lane, RepliesLargerThanOneReadAreAllCollectedAtOnce) {
  pair_fixture f;
  const std::string big1(40'000, 'x'), big2(20'000, 'y');
  for (int i = 0; i < 3; ++i) {
    auto r = make_request(ping, f.log, i);
    ASSERT_TRUE(f.l->send(r));
  }
  write_all(f.peer, "$40000\r\n" + big1 + "\r\n:7\r\n$20000\r\n" + big2 + "\r\n");
  std::vector<lane_completion> out;
  f.l->collect(out);
  ASSERT_EQ(out.size(), 3u);
  run(out);
  ASSERT_EQ(f.log->size(), 3u);
  EXPECT_EQ((*f.log)[0].r.str, big1);
  EXPECT_EQ((*f.log)[1].r.integer, 7);
  EXPECT_EQ((*f.log)[2].r.str, big2);
  EXPECT_FALSE(f.l->pending());
  EXPECT_EQ(f.counters->replies.load(), 3u);
}

// The replies come while await() sleeps in poll() (no spin): it wakes for each piece, keeps
// partial replies across reads and returns once at least one has come.
TEST(Lane, AwaitSleepingInPollCollectsRepliesWrittenInPieces) {
  pair_fixture f(5000ms);
  send_three(f);
  std::thread server([&] {
    // Pieces cut inside a header, inside a CRLF and inside a bulk string; the pauses only make it
    // likely that the lane reads each piece alone (the test holds however the bytes coalesce).
    for (std::string_view piece : {"+O", "K\r", "\n:", "5\r\n$3\r", "\nab", "c\r\n"}) {
      std::this_thread::sleep_for(2ms);
      write_all(f.peer, piece);
    }
  });
  auto t0 = clock::now();
  std::vector<lane_completion> out;
  while (f.log->size() < 3 && f.l->waiting() && clock::now() - t0 < 2s) {
    clock::duration rtt{};
    f.l->await(clock::now(), out, rtt);
    run(out);
  }
  server.join();
  EXPECT_LT(clock::now() - t0, 1s);
  expect_three_replies(*f.log);
  EXPECT_FALSE(f.l->pending());
  EXPECT_EQ(f.counters->replies.load(), 3u);
}

// A request past its deadline fails with request_timeout and keeps its place: its late reply is
// dropped, and the next request gets the reply written after it.
TEST(Lane, TimedOutRequestKeepsItsPlaceAndItsLateReplyIsDropped) {
  pair_fixture f(100ms);
  auto t0 = clock::now();
  auto a = make_request(ping, f.log, 0);
  ASSERT_TRUE(f.l->send(a));
  std::vector<lane_completion> out;
  clock::duration rtt{};
  EXPECT_FALSE(f.l->await(clock::now(), out, rtt));
  auto waited = clock::now() - t0;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ec, errc::request_timeout);
  EXPECT_FALSE(out[0].resend);
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 900ms);
  run(out);
  EXPECT_FALSE(f.l->waiting());
  EXPECT_TRUE(f.l->pending());  // A is still in flight: its reply will come first
  EXPECT_FALSE(f.l->broken());

  auto b = make_request(ping, f.log, 1);
  ASSERT_TRUE(f.l->send(b));
  write_all(f.peer, ":1\r\n");  // A's, late
  write_all(f.peer, ":2\r\n");  // B's
  EXPECT_TRUE(f.l->await(clock::now() + 500ms, out, rtt));
  ASSERT_EQ(out.size(), 1u);
  run(out);
  ASSERT_EQ(f.log->size(), 2u);
  EXPECT_EQ((*f.log)[0].index, 0);
  EXPECT_EQ((*f.log)[0].ec, errc::request_timeout);
  EXPECT_EQ((*f.log)[1].index, 1);
  EXPECT_FALSE((*f.log)[1].ec);
  EXPECT_EQ((*f.log)[1].r.type, reply::kind::integer);
  EXPECT_EQ((*f.log)[1].r.integer, 2);
  EXPECT_FALSE(f.l->pending());
  EXPECT_FALSE(f.l->broken());
  EXPECT_EQ(f.counters->requests.load(), 2u);
  EXPECT_EQ(f.counters->replies.load(), 2u);
}

// A late reply that comes alone is read and dropped: nothing completes, the lane empties and stays
// usable.
TEST(Lane, LateReplyAloneIsDroppedQuietly) {
  pair_fixture f(100ms);
  auto a = make_request(ping, f.log, 0);
  ASSERT_TRUE(f.l->send(a));
  std::vector<lane_completion> out;
  clock::duration rtt{};
  f.l->await(clock::now(), out, rtt);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ec, errc::request_timeout);
  out.clear();
  write_all(f.peer, "+late\r\n");
  f.l->collect(out);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(f.l->pending());
  EXPECT_FALSE(f.l->broken());
  EXPECT_TRUE(f.l->usable());
  EXPECT_EQ(f.counters->replies.load(), 1u);
}

// The peer closes: everything waiting fails with connection_lost; idempotent requests are marked
// for a resend with their payload, others are not; the broken lane refuses new requests untouched.
TEST(Lane, PeerCloseFailsWaitingRequestsAndMarksIdempotentOnesForResend) {
  pair_fixture f;
  const std::string p_idem = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
  const std::string p_other = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
  auto i = make_request(p_idem, f.log, 0, true);
  auto o = make_request(p_other, f.log, 1, false);
  ASSERT_TRUE(f.l->send(i));
  ASSERT_TRUE(f.l->send(o));
  EXPECT_EQ(read_available(f.peer), p_idem + p_other);
  f.close_peer();

  std::vector<lane_completion> out;
  clock::duration rtt{};
  auto t0 = clock::now();
  EXPECT_FALSE(f.l->await(clock::now() + 100ms, out, rtt));
  EXPECT_LT(clock::now() - t0, 500ms);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].ec, errc::connection_lost);
  EXPECT_TRUE(out[0].resend);
  EXPECT_EQ(out[0].payload, p_idem);
  EXPECT_EQ(out[1].ec, errc::connection_lost);
  EXPECT_FALSE(out[1].resend);
  EXPECT_TRUE(out[1].payload.empty());
  run(out);
  ASSERT_EQ(f.log->size(), 2u);
  EXPECT_EQ((*f.log)[0].index, 0);
  EXPECT_EQ((*f.log)[1].index, 1);
  EXPECT_TRUE(f.l->broken());
  EXPECT_FALSE(f.l->usable());
  EXPECT_FALSE(f.l->pending());
  EXPECT_FALSE(f.l->waiting());

  auto late = make_request(ping, f.log, 2, true);
  EXPECT_FALSE(f.l->send(late));
  EXPECT_EQ(late.payload, ping);
  ASSERT_TRUE(static_cast<bool>(late.handler));
  EXPECT_FALSE(f.l->pending());
  EXPECT_EQ(f.counters->requests.load(), 2u);
  // The handler left with the caller still works (the request may go another way).
  late.handler(errc::connection_lost, reply{});
  ASSERT_EQ(f.log->size(), 3u);
  EXPECT_EQ((*f.log)[2].index, 2);
}

// Bytes that are not RESP fail everything with protocol_error, and nothing is resent: the peer may
// not be Redis at all.
TEST(Lane, GarbageFailsEverythingWithProtocolErrorAndNoResend) {
  pair_fixture f;
  auto a = make_request(ping, f.log, 0, true);
  auto b = make_request(ping, f.log, 1, true);
  ASSERT_TRUE(f.l->send(a));
  ASSERT_TRUE(f.l->send(b));
  write_all(f.peer, "HTTP/1.1 400 Bad Request\r\n");
  std::vector<lane_completion> out;
  clock::duration rtt{};
  auto t0 = clock::now();
  EXPECT_FALSE(f.l->await(clock::now() + 100ms, out, rtt));
  EXPECT_LT(clock::now() - t0, 500ms);
  ASSERT_EQ(out.size(), 2u);
  for (auto& c : out) {
    EXPECT_EQ(c.ec, errc::protocol_error);
    EXPECT_FALSE(c.resend);
    EXPECT_EQ(c.r.type, reply::kind::error);
    EXPECT_FALSE(c.r.str.empty());  // the reader's account of what was wrong
  }
  EXPECT_TRUE(f.l->broken());
  EXPECT_FALSE(f.l->usable());
  EXPECT_FALSE(f.l->pending());
  EXPECT_EQ(f.counters->replies.load(), 0u);
  auto c = make_request(ping, f.log, 2);
  EXPECT_FALSE(f.l->send(c));
}

// usable(): an idle lane with a silent open peer is; bytes nobody asked for, or a closed peer, are
// not.
TEST(Lane, UsableOnlyWhileIdlePeerIsOpenAndSilent) {
  {
    pair_fixture f;
    EXPECT_TRUE(f.l->usable());
    EXPECT_TRUE(f.l->usable());  // the check reads nothing away
    EXPECT_FALSE(f.l->broken());
    write_all(f.peer, "+OK\r\n");
    EXPECT_FALSE(f.l->usable());
    EXPECT_TRUE(f.l->broken());
    EXPECT_FALSE(f.l->take());
  }
  {
    pair_fixture f;
    EXPECT_TRUE(f.l->usable());
    f.close_peer();
    EXPECT_FALSE(f.l->usable());
    EXPECT_TRUE(f.l->broken());
  }
  {
    // With a request in flight the lane is usable without a check (its reply is expected).
    pair_fixture f;
    auto a = make_request(ping, f.log, 0);
    ASSERT_TRUE(f.l->send(a));
    write_all(f.peer, "+OK\r\n");
    EXPECT_TRUE(f.l->usable());
    EXPECT_FALSE(f.l->broken());
  }
}

// A reply after the last one asked for is a stream the lane cannot trust: the replies asked for
// are delivered, and the lane breaks.
TEST(Lane, ExtraReplyAfterTheAnsweredRequestsBreaksTheLane) {
  pair_fixture f;
  auto a = make_request(ping, f.log, 0);
  ASSERT_TRUE(f.l->send(a));
  write_all(f.peer, "+PONG\r\n+OK\r\n");
  std::vector<lane_completion> out;
  clock::duration rtt{};
  f.l->await(clock::now() + 100ms, out, rtt);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].ec);
  EXPECT_EQ(out[0].r.str, "PONG");
  EXPECT_TRUE(f.l->broken());
  EXPECT_FALSE(f.l->usable());
}

// A declared length is checked, never allocated: a bulk string announced at nearly the limit
// (512 MiB) leaves the request waiting and the process small; one over the limit fails at once.
TEST(Lane, DeclaredHugeBulkLengthIsNotAnAllocation) {
  pair_fixture f(5000ms);
  auto a = make_request(ping, f.log, 0, true);
  ASSERT_TRUE(f.l->send(a));
  auto vm0 = virtual_size();
  write_all(f.peer, "$536870000\r\nab");
  std::vector<lane_completion> out;
  f.l->collect(out);
  write_all(f.peer, "cd");
  f.l->collect(out);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(f.l->waiting());
  EXPECT_FALSE(f.l->broken());
  auto vm1 = virtual_size();
  EXPECT_LT(vm1, vm0 + (64u << 20)) << "virtual size grew from " << vm0 << " to " << vm1;
  f.close_peer();
  clock::duration rtt{};
  EXPECT_FALSE(f.l->await(clock::now(), out, rtt));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ec, errc::connection_lost);
  EXPECT_TRUE(out[0].resend);
  EXPECT_EQ(f.counters->replies.load(), 0u);
}

TEST(Lane, BulkLengthOverTheLimitIsAProtocolError) {
  pair_fixture f(5000ms);
  auto a = make_request(ping, f.log, 0, true);
  ASSERT_TRUE(f.l->send(a));
  write_all(f.peer, "$999999999\r\nab");
  std::vector<lane_completion> out;
  clock::duration rtt{};
  auto t0 = clock::now();
  f.l->await(clock::now(), out, rtt);
  EXPECT_LT(clock::now() - t0, 500ms);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ec, errc::protocol_error);
  EXPECT_FALSE(out[0].resend);
  EXPECT_TRUE(f.l->broken());
}

// The state ('R', 'S', ...) of one of this process's threads, from /proc.
char thread_state(long tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto p = s.rfind(')');
  return p == std::string::npos || p + 2 >= s.size() ? '?' : s[p + 2];
}

// interrupt() from another thread wakes a taker asleep in poll(); its request fails as on a dropped
// connection.
TEST(Lane, InterruptWakesAnAwaitAsleepInPoll) {
  pair_fixture f(10'000ms);
  auto a = make_request(ping, f.log, 0, true);
  ASSERT_TRUE(f.l->send(a));
  std::atomic<long> tid{0};
  std::vector<lane_completion> out;
  clock::duration took{};
  std::thread taker([&] {
    tid.store(static_cast<long>(::syscall(SYS_gettid)));
    auto t0 = clock::now();
    clock::duration rtt{};
    f.l->await(clock::now(), out, rtt);
    took = clock::now() - t0;
  });
  // Wait until the taker sleeps (in poll(): it has no other reason to), at most half a second;
  // the test holds either way, but then it checks the wake-up of a sleeper.
  auto t0 = clock::now();
  while (tid.load() == 0 && clock::now() - t0 < 500ms) std::this_thread::yield();
  while (thread_state(tid.load()) != 'S' && clock::now() - t0 < 500ms) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(5ms);
  f.l->interrupt();
  taker.join();
  EXPECT_LT(took, 1s);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ec, errc::connection_lost);
  EXPECT_TRUE(out[0].resend);
  EXPECT_EQ(out[0].payload, ping);
  EXPECT_TRUE(f.l->broken());
  EXPECT_FALSE(f.l->usable());
  EXPECT_FALSE(f.l->take());
}

// An await on a lane interrupted before it started returns at once.
TEST(Lane, AwaitOnInterruptedLaneFailsAtOnce) {
  pair_fixture f(10'000ms);
  auto a = make_request(ping, f.log, 0, false);
  ASSERT_TRUE(f.l->send(a));
  f.l->interrupt();
  std::vector<lane_completion> out;
  clock::duration rtt{};
  auto t0 = clock::now();
  EXPECT_FALSE(f.l->await(clock::now() + 1s, out, rtt));
  EXPECT_LT(clock::now() - t0, 500ms);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ec, errc::connection_lost);
  EXPECT_FALSE(out[0].resend);
}

// collect() never blocks: nothing while no bytes, a reply once written, and the request's deadline
// as the next check.
TEST(Lane, CollectDeliversWhatArrivedWithoutBlocking) {
  pair_fixture f(100ms);
  auto t0 = clock::now();
  auto a = make_request(ping, f.log, 0);
  ASSERT_TRUE(f.l->send(a));
  auto t1 = clock::now();
  std::vector<lane_completion> out;
  f.l->collect(out);
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(f.l->broken());
  EXPECT_TRUE(f.l->waiting());
  auto next = f.l->next_check();
  EXPECT_GT(next, clock::now());
  EXPECT_GE(next, t0 + 100ms);  // the request's deadline, before the 200 ms silence limit
  EXPECT_LE(next, t1 + 100ms);

  write_all(f.peer, ":42\r\n");
  f.l->collect(out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].ec);
  EXPECT_EQ(out[0].r.integer, 42);
  EXPECT_FALSE(f.l->pending());
  EXPECT_FALSE(f.l->broken());
  EXPECT_EQ(f.counters->replies.load(), 1u);
}

// With only timed-out requests in flight and nothing received for twice the request timeout,
// collect() drops the lane (a connection's liveness check). The steps between the deadline and the
// limit have 500 ms to run, which a loaded machine gives them.
TEST(Lane, CollectBreaksALaneSilentForTwiceTheTimeout) {
  pair_fixture f(500ms);
  auto t0 = clock::now();
  auto a = make_request(ping, f.log, 0);
  ASSERT_TRUE(f.l->send(a));
  auto t1 = clock::now();
  std::vector<lane_completion> out;
  std::this_thread::sleep_until(f.l->next_check());  // the request's deadline
  f.l->collect(out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].ec, errc::request_timeout);
  out.clear();
  EXPECT_FALSE(f.l->broken());
  EXPECT_TRUE(f.l->pending());
  EXPECT_FALSE(f.l->waiting());

  auto next = f.l->next_check();  // now the silence limit
  EXPECT_GT(next, clock::now());
  EXPECT_GE(next, t0 + 1000ms);
  EXPECT_LE(next, t1 + 1000ms);
  f.l->collect(out);  // before the limit: nothing happens
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(f.l->broken());

  std::this_thread::sleep_until(next);
  f.l->collect(out);
  EXPECT_TRUE(out.empty());  // no handler waits any more
  EXPECT_TRUE(f.l->broken());
  EXPECT_FALSE(f.l->pending());
  EXPECT_FALSE(f.l->take());
}

// Only a whole reply restarts the silence limit: a peer that trickles one declared reply a byte at a
// time is as stuck as a silent one (it used to keep the lane alive for as long as it trickled).
// The silence limit is 1 s and each step lands half of it (500 ms) before the limit it must not reach:
// a loaded machine that oversleeps by 30 ms no longer breaks the lane early.
TEST(Lane, OnlyWholeRepliesRestartTheSilenceLimit) {
  pair_fixture f(500ms);
  auto a = make_request(ping, f.log, 0);
  auto b = make_request(ping, f.log, 1);
  ASSERT_TRUE(f.l->send(a));
  ASSERT_TRUE(f.l->send(b));
  std::vector<lane_completion> out;
  std::this_thread::sleep_until(f.l->next_check());
  f.l->collect(out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].ec, errc::request_timeout);
  out.clear();
  // A whole (late) reply restarts the limit.
  auto limit = f.l->next_check();
  write_all(f.peer, "+a\r\n");
  f.l->collect(out);
  EXPECT_TRUE(out.empty());  // the reply of a timed-out request: dropped
  auto restarted = f.l->next_check();
  EXPECT_GT(restarted, limit + 250ms);
  // Pieces of the next one do not.
  std::this_thread::sleep_until(restarted - 500ms);
  write_all(f.peer, "$3\r\na");
  f.l->collect(out);
  EXPECT_EQ(f.l->next_check(), restarted);
  EXPECT_FALSE(f.l->broken());
  std::this_thread::sleep_until(restarted + 5ms);
  f.l->collect(out);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(f.l->broken());
}

// take()/give_back(): one taker at a time, none on a broken lane; park hands the lane to the node.
TEST(Lane, TakeIsExclusiveUntilGivenBackAndRefusedWhenBroken) {
  pair_fixture f;
  EXPECT_EQ(f.l->generation(), 7u);
  EXPECT_TRUE(f.l->home().expired());
  EXPECT_TRUE(f.l->take());
  EXPECT_FALSE(f.l->take());
  std::atomic<bool> other{true};
  std::thread t([&] { other = f.l->take(); });
  t.join();
  EXPECT_FALSE(other.load());
  f.l->give_back();
  EXPECT_TRUE(f.l->take());
  f.l->park(f.l);
  EXPECT_EQ(f.parked, f.l);
  f.parked.reset();
  f.l->give_back();
  f.l->interrupt();
  EXPECT_FALSE(f.l->take());
}

// run_completions without a home connection: handlers run with their error or reply (a resend has
// nowhere to go); a closing client fails everything with client_closed.
TEST(Lane, RunCompletionsRunsHandlersAndFailsOnlyWhatGotNoReplyOnceClosed) {
  config cfg;
  auto log = std::make_shared<std::vector<seen>>();
  auto make = [&](int i, std::error_code ec, bool resend) {
    lane_completion c;
    c.handler = [log, i](std::error_code e, reply r) { log->push_back({i, e, std::move(r)}); };
    c.ec = ec;
    c.r.type = reply::kind::integer;
    c.r.integer = i;
    c.resend = resend;
    return c;
  };
  std::vector<lane_completion> done;
  done.push_back(make(0, {}, false));
  done.push_back(make(1, errc::connection_lost, true));
  run_completions(done, nullptr, false, false, cfg);
  EXPECT_TRUE(done.empty());
  ASSERT_EQ(log->size(), 2u);
  EXPECT_FALSE((*log)[0].ec);
  EXPECT_EQ((*log)[0].r.integer, 0);
  EXPECT_EQ((*log)[1].ec, errc::connection_lost);

  // Closing: a reply still reaches its handler (the close waits for it); a failed request is not
  // resent, its error is the handler's.
  done.push_back(make(2, {}, false));
  done.push_back(make(3, errc::connection_lost, true));
  run_completions(done, nullptr, true, false, cfg);
  ASSERT_EQ(log->size(), 4u);
  EXPECT_FALSE((*log)[2].ec);
  EXPECT_EQ((*log)[2].r.integer, 2);
  EXPECT_EQ((*log)[3].ec, errc::connection_lost);

  // Closed (the connections are): a request that got no reply fails with client_closed.
  done.push_back(make(4, {}, false));
  done.push_back(make(5, errc::connection_lost, true));
  run_completions(done, nullptr, true, true, cfg);
  ASSERT_EQ(log->size(), 6u);
  EXPECT_FALSE((*log)[4].ec);
  EXPECT_EQ((*log)[4].r.integer, 4);
  EXPECT_EQ((*log)[5].ec, errc::client_closed);
  EXPECT_TRUE((*log)[5].r.is_nil());
}

}  // namespace
}  // namespace redlease::detail
