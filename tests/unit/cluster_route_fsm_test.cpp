// SPDX-License-Identifier: MIT
// Unit tests of a cluster request's redirect decisions and of the refresh gate (no server, no
// clock: times are made up).
#include "topology/cluster_route_fsm.hpp"

#include <gtest/gtest.h>

#include "redlease/error.hpp"
#include "reply_builders.hpp"

namespace redlease::detail {
namespace {

using namespace std::chrono_literals;
using clock_t_ = std::chrono::steady_clock;
using act = route_action::kind;
using ans = route_answer::kind;

const clock_t_::time_point t0{std::chrono::seconds(1000)};
const node_address n1{"127.0.0.1", 30001};
const node_address n2{"127.0.0.1", 30002};
const node_address n3{"127.0.0.1", 30003};

route_answer answer(ans k, node_address from) {
  route_answer a;
  a.type = k;
  a.from = std::move(from);
  return a;
}
route_answer redirect(ans k, node_address from, std::uint16_t slot, node_address to) {
  auto a = answer(k, std::move(from));
  a.slot = slot;
  a.node = std::move(to);
  return a;
}
route_answer failure(ans k, node_address from, errc e) {
  auto a = answer(k, std::move(from));
  a.ec = make_error_code(e);
  return a;
}
TEST(cluster_route_fsm, ok_is_done) {
  cluster_route_fsm f(t0 + 1s);
  auto a = f.resume(answer(ans::ok, n1), t0);
  EXPECT_EQ(a.type, act::done);
  EXPECT_EQ(f.redirects(), 0);
}

TEST(cluster_route_fsm, moved_patches_the_slot_asks_for_a_refresh_and_sends_at_once) {
  cluster_route_fsm f(t0 + 1s);
  auto a = f.resume(redirect(ans::moved, n3, 12182, n1), t0);
  EXPECT_EQ(a.type, act::send_to);
  EXPECT_EQ(a.node, n1);
  EXPECT_EQ(a.patch_slot, std::optional<std::uint16_t>(12182));
  EXPECT_TRUE(a.refresh);
  EXPECT_FALSE(a.reconnect);
  EXPECT_EQ(a.delay, 0ms);
  EXPECT_EQ(f.resume(answer(ans::ok, n1), t0).type, act::done);
}

TEST(cluster_route_fsm, a_moved_chain_stops_after_five_redirects) {
  cluster_route_fsm f(t0 + 1s);
  const node_address ring[] = {n1, n2, n3};
  for (int i = 0; i < cluster_route_fsm::max_redirects; ++i) {
    auto a = f.resume(redirect(ans::moved, ring[i % 3], 7, ring[(i + 1) % 3]), t0);
    ASSERT_EQ(a.type, act::send_to) << i;
    EXPECT_EQ(a.node, ring[(i + 1) % 3]);
  }
  EXPECT_EQ(f.redirects(), 5);
  auto last = f.resume(redirect(ans::moved, n3, 7, n1), t0);
  EXPECT_EQ(last.type, act::fail);
  EXPECT_EQ(last.ec, make_error_code(errc::server_error));
}

TEST(cluster_route_fsm, ask_sends_asking_first_and_touches_no_table) {
  cluster_route_fsm f(t0 + 1s);
  auto a = f.resume(redirect(ans::ask, n3, 12182, n1), t0);
  EXPECT_EQ(a.type, act::asking_then_send);
  EXPECT_EQ(a.node, n1);
  EXPECT_FALSE(a.patch_slot);
  EXPECT_FALSE(a.refresh);
  EXPECT_EQ(f.redirects(), 1);
}

TEST(cluster_route_fsm, ask_then_moved_follows_the_moved) {
  // The migration finished between the ASK and the resend: the target answers MOVED.
  cluster_route_fsm f(t0 + 1s);
  EXPECT_EQ(f.resume(redirect(ans::ask, n3, 12182, n1), t0).type, act::asking_then_send);
  auto a = f.resume(redirect(ans::moved, n1, 12182, n2), t0);
  EXPECT_EQ(a.type, act::send_to);
  EXPECT_EQ(a.node, n2);
  EXPECT_EQ(a.patch_slot, std::optional<std::uint16_t>(12182));
  EXPECT_EQ(f.redirects(), 2);
}

TEST(cluster_route_fsm, asks_count_against_the_redirect_limit) {
  cluster_route_fsm f(t0 + 1s);
  for (int i = 0; i < cluster_route_fsm::max_redirects; ++i) {
    ASSERT_EQ(f.resume(redirect(ans::ask, n1, 7, n2), t0).type, act::asking_then_send);
  }
  EXPECT_EQ(f.resume(redirect(ans::ask, n1, 7, n2), t0).type, act::fail);
}

TEST(cluster_route_fsm, moved_to_the_answering_node_reconnects_once_then_fails) {
  cluster_route_fsm f(t0 + 1s);
  auto a = f.resume(redirect(ans::moved, n1, 5, n1), t0);
  EXPECT_EQ(a.type, act::send_to);
  EXPECT_EQ(a.node, n1);
  EXPECT_TRUE(a.reconnect);
  auto b = f.resume(redirect(ans::moved, n1, 5, n1), t0);
  EXPECT_EQ(b.type, act::fail);
  EXPECT_EQ(b.ec, make_error_code(errc::server_error));
}

TEST(cluster_route_fsm, tryagain_backs_off_on_the_same_node_until_the_deadline) {
  cluster_route_fsm f(t0 + 300ms);
  auto now = t0;
  std::vector<std::chrono::milliseconds> delays;
  for (;;) {
    auto a = f.resume(answer(ans::tryagain, n2), now);
    if (a.type == act::fail) {
      EXPECT_EQ(a.ec, make_error_code(errc::server_busy));
      break;
    }
    ASSERT_EQ(a.type, act::retry_after);
    EXPECT_EQ(a.node, n2);
    delays.push_back(a.delay);
    now += a.delay;
    ASSERT_LT(delays.size(), 100u);
  }
  // 10+20+40+80 = 150 ms; the next (160 ms) would start past 300 ms.
  EXPECT_EQ(delays, (std::vector<std::chrono::milliseconds>{10ms, 20ms, 40ms, 80ms}));
  EXPECT_LT(now, t0 + 300ms);
}

TEST(cluster_route_fsm, the_backoff_is_capped) {
  cluster_route_fsm f(t0 + 10s);
  auto now = t0;
  std::chrono::milliseconds last{0};
  for (int i = 0; i < 10; ++i) {
    auto a = f.resume(answer(ans::masterdown, n1), now);
    ASSERT_EQ(a.type, act::retry_after);
    last = a.delay;
    now += a.delay;
  }
  EXPECT_EQ(last, 200ms);
  EXPECT_EQ(f.retries(), 10);
}

TEST(cluster_route_fsm, loading_retries_and_fails_with_server_loading) {
  cluster_route_fsm f(t0 + 15ms);
  auto a = f.resume(answer(ans::loading, n1), t0);
  EXPECT_EQ(a.type, act::retry_after);
  EXPECT_EQ(a.delay, 10ms);
  auto b = f.resume(answer(ans::loading, n1), t0 + 10ms);
  EXPECT_EQ(b.type, act::fail);
  EXPECT_EQ(b.ec, make_error_code(errc::server_loading));
}

TEST(cluster_route_fsm, clusterdown_and_readonly_refresh_and_retry) {
  cluster_route_fsm f(t0 + 1s);
  auto a = f.resume(answer(ans::clusterdown, n1), t0);
  EXPECT_EQ(a.type, act::refresh_and_retry_after);
  EXPECT_EQ(a.delay, 10ms);
  auto b = f.resume(answer(ans::readonly, n1), t0 + 10ms);
  EXPECT_EQ(b.type, act::refresh_and_retry_after);
  EXPECT_EQ(b.delay, 20ms);
  EXPECT_EQ(f.resume(answer(ans::ok, n2), t0 + 30ms).type, act::done);

  cluster_route_fsm g(t0 + 5ms);
  auto c = g.resume(answer(ans::readonly, n1), t0);
  EXPECT_EQ(c.type, act::fail);
  EXPECT_EQ(c.ec, make_error_code(errc::server_readonly));
}

TEST(cluster_route_fsm, errors_before_the_write_refresh_and_resend) {
  cluster_route_fsm f(t0 + 1s);
  auto a = f.resume(failure(ans::error_before_write, n1, errc::connect_failed), t0);
  EXPECT_EQ(a.type, act::refresh_and_retry_after);
  EXPECT_EQ(a.delay, 10ms);
}

TEST(cluster_route_fsm, errors_after_the_write_are_never_resent) {
  for (auto e : {errc::request_timeout, errc::connection_lost}) {
    cluster_route_fsm f(t0 + 1s);
    // Even after a redirect and with time left: the request may have run.
    EXPECT_EQ(f.resume(redirect(ans::moved, n1, 9, n2), t0).type, act::send_to);
    auto a = f.resume(failure(ans::error_after_write, n2, e), t0);
    EXPECT_EQ(a.type, act::fail);
    EXPECT_EQ(a.ec, make_error_code(e));
  }
  cluster_route_fsm f(t0 + 1s);
  EXPECT_EQ(f.resume(answer(ans::error_after_write, n2), t0).ec, make_error_code(errc::connection_lost));
}

TEST(cluster_route_fsm, other_errors_fail_with_their_code) {
  cluster_route_fsm f(t0 + 1s);
  auto a = f.resume(failure(ans::other_error, n1, errc::protocol_error), t0);
  EXPECT_EQ(a.type, act::fail);
  EXPECT_EQ(a.ec, make_error_code(errc::protocol_error));
}

TEST(cluster_route_fsm, past_the_deadline_a_redirect_fails_with_the_last_error) {
  cluster_route_fsm f(t0 + 1s);
  EXPECT_EQ(f.resume(redirect(ans::moved, n1, 9, n2), t0 + 1s).ec, make_error_code(errc::request_timeout));

  cluster_route_fsm g(t0 + 100ms);
  EXPECT_EQ(g.resume(answer(ans::clusterdown, n1), t0).type, act::refresh_and_retry_after);
  auto a = g.resume(redirect(ans::ask, n1, 9, n2), t0 + 200ms);
  EXPECT_EQ(a.type, act::fail);
  EXPECT_EQ(a.ec, make_error_code(errc::server_busy));
}

TEST(cluster_route_fsm, answers_from_replies) {
  EXPECT_EQ(route_answer::from_reply(reply{}, n1).type, ans::ok);
  EXPECT_EQ(route_answer::from_reply(test_replies::err("WRONGTYPE Operation"), n1).type, ans::ok);
  auto m = route_answer::from_reply(test_replies::err("MOVED 12182 :30003"), n1);
  EXPECT_EQ(m.type, ans::moved);
  EXPECT_EQ(m.slot, 12182);
  EXPECT_EQ(m.node, (node_address{"127.0.0.1", 30003}));
  EXPECT_EQ(m.from, n1);
  EXPECT_EQ(route_answer::from_reply(test_replies::err("ASK 1 h:2"), n1).type, ans::ask);
  EXPECT_EQ(route_answer::from_reply(test_replies::err("TRYAGAIN x"), n1).type, ans::tryagain);
  EXPECT_EQ(route_answer::from_reply(test_replies::err("CLUSTERDOWN x"), n1).type, ans::clusterdown);
  EXPECT_EQ(route_answer::from_reply(test_replies::err("LOADING x"), n1).type, ans::loading);
  EXPECT_EQ(route_answer::from_reply(test_replies::err("READONLY x"), n1).type, ans::readonly);
  EXPECT_EQ(route_answer::from_reply(test_replies::err("MASTERDOWN x"), n1).type, ans::masterdown);
  auto bad = route_answer::from_reply(test_replies::err("MOVED 99999 h:1"), n1);
  EXPECT_EQ(bad.type, ans::other_error);
  EXPECT_EQ(bad.ec, make_error_code(errc::bad_reply));
}

TEST(cluster_refresh_gate, coalesces_requests_into_one_in_flight) {
  refresh_gate g;
  EXPECT_EQ(g.next_due(), clock_t_::time_point{});
  EXPECT_EQ(g.want(t0).type, refresh_gate::decision::kind::start_now);
  EXPECT_TRUE(g.in_flight());
  EXPECT_EQ(g.want(t0 + 1ms).type, refresh_gate::decision::kind::in_flight);
  EXPECT_EQ(g.want(t0 + 1s).type, refresh_gate::decision::kind::in_flight);
  g.done(t0 + 1s);
  EXPECT_FALSE(g.in_flight());
  EXPECT_EQ(g.next_due(), t0 + 6s);
}

TEST(cluster_refresh_gate, keeps_the_minimum_interval) {
  refresh_gate g;
  ASSERT_EQ(g.want(t0).type, refresh_gate::decision::kind::start_now);
  g.done(t0 + 50ms);
  auto a = g.want(t0 + 60ms);
  EXPECT_EQ(a.type, refresh_gate::decision::kind::at);
  EXPECT_EQ(a.when, t0 + 250ms);
  auto b = g.want(t0 + 200ms);  // another request meanwhile: the same time
  EXPECT_EQ(b.type, refresh_gate::decision::kind::at);
  EXPECT_EQ(b.when, t0 + 250ms);
  EXPECT_FALSE(g.in_flight());
  EXPECT_EQ(g.want(t0 + 250ms).type, refresh_gate::decision::kind::start_now);
}

TEST(cluster_refresh_gate, custom_timing_and_periodic_due) {
  refresh_gate g({1000ms, 10000ms});
  ASSERT_EQ(g.want(t0).type, refresh_gate::decision::kind::start_now);
  g.done(t0);
  EXPECT_EQ(g.want(t0 + 999ms).when, t0 + 1000ms);
  EXPECT_EQ(g.next_due(), t0 + 10s);
  EXPECT_EQ(g.want(g.next_due()).type, refresh_gate::decision::kind::start_now);
  g.done(t0 + 10s);
  EXPECT_EQ(g.next_due(), t0 + 20s);
}

}  // namespace
}  // namespace redlease::detail
