// SPDX-License-Identifier: MIT
// Unit tests of the Sentinel protocol side (no server): answers, switch messages, the directory.
#include <gtest/gtest.h>

#include "redlease/error.hpp"
#include "reply_builders.hpp"
#include "topology/sentinel_fsm.hpp"

namespace redlease::detail {
namespace {

using test_replies::arr;
using test_replies::str;

TEST(sentinel_fsm, master_address_answers) {
  auto ok = parse_master_addr(arr({str("10.0.0.5"), str("6380")}), "s1:26379", "m");
  EXPECT_FALSE(ok.ec);
  EXPECT_EQ(ok.address, (node_address{"10.0.0.5", 6380}));

  auto unknown = parse_master_addr(reply{}, "s1:26379", "orders");
  EXPECT_EQ(unknown.ec, make_error_code(errc::no_sentinel));
  EXPECT_NE(unknown.text.find("'orders'"), std::string::npos) << unknown.text;

  reply err;
  err.type = reply::kind::error;
  err.str = "NOAUTH Authentication required.";
  auto refused = parse_master_addr(err, "s1:26379", "m");
  EXPECT_EQ(refused.ec, make_error_code(errc::auth_failed));
  EXPECT_NE(refused.text.find("NOAUTH"), std::string::npos);

  for (auto bad : {arr({str("h")}), arr({str("h"), str("0")}), arr({str("h"), str("70000")}), arr({str(""), str("1")}),
                   str("h:1")}) {
    EXPECT_EQ(parse_master_addr(bad, "s", "m").ec, make_error_code(errc::bad_reply));
  }
}

TEST(sentinel_fsm, switch_master_messages_name_the_new_master_of_our_master_only) {
  auto a = parse_switch_master("mymaster 127.0.0.1 31000 127.0.0.1 31001", "mymaster");
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, (node_address{"127.0.0.1", 31001}));
  EXPECT_FALSE(parse_switch_master("other 127.0.0.1 31000 127.0.0.1 31001", "mymaster"));
  EXPECT_FALSE(parse_switch_master("mymaster 127.0.0.1 31000 127.0.0.1", "mymaster"));
  EXPECT_FALSE(parse_switch_master("mymaster 127.0.0.1 31000 127.0.0.1 x", "mymaster"));
  EXPECT_FALSE(parse_switch_master("", "mymaster"));
}

TEST(sentinel_fsm, the_directory_rotates_past_failures_and_learns_new_sentinels) {
  sentinel_directory d({{"127.0.0.1", 1}, {"127.0.0.1", 2}});
  std::size_t cur = 0;
  EXPECT_EQ(d.current(cur).port, 1);
  d.failed(cur, "connection refused");
  EXPECT_EQ(d.current(cur).port, 2);
  EXPECT_EQ(d.failures(), "127.0.0.1:1: connection refused");
  d.failed(cur, "timed out");
  EXPECT_EQ(d.current(cur).port, 1);  // round again
  d.answered(cur);
  EXPECT_EQ(d.failures(), "127.0.0.1:2: timed out");

  // SENTINEL SENTINELS: flat field/value arrays; known and malformed entries are skipped.
  auto entry = [](std::string ip, std::string port) {
    return arr({str("name"), str("x"), str("ip"), str(std::move(ip)), str("port"), str(std::move(port))});
  };
  EXPECT_EQ(d.learn(arr({entry("127.0.0.1", "2"), entry("127.0.0.1", "3"), entry("", "4"), entry("h", "no"), str("junk")}), cur), 1u);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.nodes()[2], (node_address{"127.0.0.1", 3}));
  EXPECT_EQ(d.learn(reply{}, cur), 0u);
  EXPECT_EQ(d.size(), 3u);
}

// SENTINEL SENTINELS entries as a Sentinel writes them.
reply sentinel_entry(std::uint16_t port, std::string flags = "sentinel") {
  return arr({str("name"), str("id" + std::to_string(port)), str("ip"), str("127.0.0.1"), str("port"),
              str(std::to_string(port)), str("flags"), str(std::move(flags))});
}
reply sentinels_answer(std::initializer_list<std::uint16_t> ports) {
  std::vector<reply> e;
  for (auto p : ports) e.push_back(sentinel_entry(p));
  return arr(std::move(e));
}
std::vector<std::uint16_t> ports_of(const sentinel_directory& d) {
  std::vector<std::uint16_t> out;
  for (auto& n : d.nodes()) out.push_back(n.port);
  return out;
}
using ports = std::vector<std::uint16_t>;

// A Sentinel removed from the deployment (SENTINEL RESET on the others) is no longer listed: the
// client forgets it rather than trying it on every rotation for ever. Configured ones stay.
TEST(sentinel_fsm, learnt_sentinels_the_latest_answer_leaves_out_are_forgotten) {
  sentinel_directory d({{"127.0.0.1", 1}, {"127.0.0.1", 2}});
  std::size_t cur = 0;
  EXPECT_EQ(d.learn(sentinels_answer({2, 3, 4}), cur), 2u);
  EXPECT_EQ(ports_of(d), (ports{1, 2, 3, 4}));
  EXPECT_EQ(d.learn(sentinels_answer({2, 4}), cur), 0u);
  EXPECT_EQ(ports_of(d), (ports{1, 2, 4}));
  // A Sentinel that knows no other forgets every learnt one, never a configured one.
  EXPECT_EQ(d.learn(arr({}), cur), 0u);
  EXPECT_EQ(ports_of(d), (ports{1, 2}));
  EXPECT_TRUE(d.configured(0));
  EXPECT_TRUE(d.configured(1));
}

// A cursor past the end names its Sentinel modulo the size: the Sentinels an answer adds change the
// size, and the cursor must still name the one that answered (fuzz_sentinel's find).
TEST(sentinel_fsm, learning_keeps_a_cursor_past_the_end_on_the_sentinel_that_answered) {
  sentinel_directory d({{"127.0.0.1", 1}});
  std::size_t cur = 1;  // names port 1 (1 % 1)
  EXPECT_EQ(d.learn(sentinels_answer({2}), cur), 1u);
  EXPECT_EQ(d.current(cur).port, 1);
  EXPECT_EQ(ports_of(d), (ports{1, 2}));
}

// Sentinels list a peer that has gone until they are reset, flagged s_down: it is not learnt, and
// a learnt one that goes down is forgotten.
TEST(sentinel_fsm, sentinels_listed_as_down_are_not_learnt) {
  sentinel_directory d({{"127.0.0.1", 1}});
  std::size_t cur = 0;
  EXPECT_EQ(d.learn(arr({sentinel_entry(2), sentinel_entry(3, "s_down,sentinel,disconnected")}), cur), 1u);
  EXPECT_EQ(ports_of(d), (ports{1, 2}));
  EXPECT_EQ(d.learn(arr({sentinel_entry(2, "s_down,sentinel"), sentinel_entry(3)}), cur), 1u);
  EXPECT_EQ(ports_of(d), (ports{1, 3}));
}

// The answering Sentinel is never in its own list: when it is a learnt one, it is kept, and the
// cursor still names it after the entries before it are forgotten.
TEST(sentinel_fsm, the_cursor_keeps_naming_the_sentinel_that_answered) {
  sentinel_directory d({{"127.0.0.1", 1}});
  std::size_t cur = 0, other = 0;
  d.learn(sentinels_answer({2, 3, 4}), cur);
  d.failed(cur, "refused");  // 1 -> 2
  d.failed(cur, "refused");  // 2 -> 3
  ASSERT_EQ(d.current(cur).port, 3);
  EXPECT_EQ(d.learn(sentinels_answer({1, 4}), cur), 0u);
  EXPECT_EQ(ports_of(d), (ports{1, 3, 4}));
  EXPECT_EQ(d.current(cur).port, 3);
  EXPECT_EQ(d.current(other).port, 1);
}

// A learnt Sentinel that has gone without the others noticing yet (or unreachable from here only)
// costs a connect timeout at each pass of the rotation: after forget_after_failures passes with
// another Sentinel answering in between, it is dropped. A configured one is kept however often it fails.
TEST(sentinel_fsm, a_learnt_sentinel_that_keeps_failing_is_forgotten) {
  sentinel_directory d({{"127.0.0.1", 1}, {"127.0.0.1", 2}});
  std::size_t cur = 0;
  d.learn(sentinels_answer({2, 3}), cur);
  ASSERT_EQ(ports_of(d), (ports{1, 2, 3}));
  for (int pass = 1; pass <= sentinel_directory::forget_after_failures; ++pass) {
    ASSERT_EQ(ports_of(d), (ports{1, 2, 3})) << "pass " << pass;
    // 1 stops answering, 2 is dead too, 3 is gone: the cursor goes round to 1, which answers again.
    d.failed(cur, "timed out");
    d.failed(cur, "connection refused");
    ASSERT_EQ(d.current(cur).port, 3);
    d.failed(cur, "timed out");
    ASSERT_EQ(d.current(cur).port, 1) << "pass " << pass;
    d.answered(cur);
  }
  EXPECT_EQ(ports_of(d), (ports{1, 2}));
  EXPECT_EQ(d.current(cur).port, 1);
  EXPECT_EQ(d.failures(), "127.0.0.1:2: connection refused");
}

// A client whose own network is down sees every Sentinel fail, pass after pass, with none
// answering: it keeps the learnt ones, which may be all that is left when it comes back.
TEST(sentinel_fsm, a_client_cut_off_from_every_sentinel_keeps_the_learnt_ones) {
  sentinel_directory d({{"127.0.0.1", 1}});
  std::size_t cur = 0;
  d.learn(sentinels_answer({2, 3}), cur);
  for (int i = 0; i < 10 * sentinel_directory::forget_after_failures; ++i) d.failed(cur, "network unreachable");
  EXPECT_EQ(ports_of(d), (ports{1, 2, 3}));
  // Failures count once per answer of another Sentinel in between: one answer brings them to two.
  d.answered(cur);
  for (int i = 0; i < 3; ++i) d.failed(cur, "timed out");
  EXPECT_EQ(ports_of(d), (ports{1, 2, 3}));
}

// Sentinels that come and go on new ports (containers, rescheduled pods): the list holds the
// current ones, not every one ever seen.
TEST(sentinel_fsm, the_list_does_not_grow_as_sentinels_come_and_go) {
  sentinel_directory d({{"127.0.0.1", 1}});
  std::size_t cur = 0;
  for (std::uint16_t p = 100; p < 1100; p += 2) {
    d.learn(sentinels_answer({static_cast<std::uint16_t>(p), static_cast<std::uint16_t>(p + 1)}), cur);
    ASSERT_EQ(d.size(), 3u);
    EXPECT_EQ(d.current(cur).port, 1);
  }
  EXPECT_EQ(ports_of(d), (ports{1, 1098, 1099}));
}

TEST(sentinel_fsm, master_info_carries_the_configuration_epoch) {
  auto info = arr({str("name"), str("m"), str("ip"), str("10.0.0.7"), str("port"), str("6379"), str("flags"),
                   str("master"), str("config-epoch"), str("3")});
  auto a = parse_master_info(info, "s", "m");
  EXPECT_FALSE(a.ec);
  EXPECT_EQ(a.address, (node_address{"10.0.0.7", 6379}));
  EXPECT_EQ(a.epoch, 3);
  reply err;
  err.type = reply::kind::error;
  err.str = "ERR No such master with that name";
  EXPECT_EQ(parse_master_info(err, "s", "m").ec, make_error_code(errc::no_sentinel));
  EXPECT_EQ(parse_master_info(arr({str("ip"), str("h")}), "s", "m").ec, make_error_code(errc::bad_reply));
}

// After a failover the Sentinels disagree for a moment; the old master stays writable, so a lagging
// answer must not move the client back to it.
TEST(sentinel_fsm, a_lagging_sentinel_does_not_move_the_client_back_to_the_old_master) {
  using v = master_tracker::verdict;
  node_address a{"127.0.0.1", 1}, b{"127.0.0.1", 2};
  master_tracker t;
  EXPECT_EQ(t.answer(a, 0), v::first);
  EXPECT_EQ(t.answer(a, 0), v::same);
  EXPECT_EQ(t.switch_message(b), v::switched);
  EXPECT_EQ(*t.previous(), a);
  EXPECT_EQ(t.answer(a, 0), v::stale);  // the epoch before the switch
  EXPECT_EQ(*t.current(), b);
  EXPECT_EQ(t.answer(b, 1), v::same);
  EXPECT_EQ(t.answer(a, 0), v::stale);
  EXPECT_EQ(t.answer(a, 2), v::switched);  // a newer failover back
  EXPECT_EQ(*t.current(), a);
  // Without epochs (a Sentinel that does not say), answers are taken as they come.
  master_tracker u;
  EXPECT_EQ(u.answer(a, -1), v::first);
  EXPECT_EQ(u.answer(b, -1), v::switched);
}

}  // namespace
}  // namespace redlease::detail
