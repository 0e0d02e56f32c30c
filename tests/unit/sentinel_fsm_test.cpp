// SPDX-License-Identifier: MIT
// Unit tests of the Sentinel protocol side (no server): answers, switch messages, the directory.
#include <gtest/gtest.h>

#include "redlease/error.hpp"
#include "topology/sentinel_fsm.hpp"

namespace redlease::detail {
namespace {

reply str(std::string s) {
  reply r;
  r.type = reply::kind::string;
  r.str = std::move(s);
  return r;
}
reply arr(std::vector<reply> e) {
  reply r;
  r.type = reply::kind::array;
  r.elements = std::move(e);
  return r;
}

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
  EXPECT_EQ(d.learn(arr({entry("127.0.0.1", "2"), entry("127.0.0.1", "3"), entry("", "4"), entry("h", "no"), str("junk")})), 1u);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.nodes()[2], (node_address{"127.0.0.1", 3}));
  EXPECT_EQ(d.learn(reply{}), 0u);
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
