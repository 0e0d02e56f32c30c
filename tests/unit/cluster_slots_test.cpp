// SPDX-License-Identifier: MIT
// Unit tests of the cluster's slot rule, the CLUSTER SLOTS parser, the map's replacement rule and
// the redirect parser (no server). Slot vectors: docs/cluster.md (measured with CLUSTER KEYSLOT).
#include "topology/cluster_map.hpp"

#include <gtest/gtest.h>

#include "redlease/error.hpp"
#include "reply_builders.hpp"
#include "topology/cluster_slot.hpp"

namespace redlease::detail {
namespace {

using test_replies::arr;
using test_replies::err;
using test_replies::num;
using test_replies::str;

reply node(std::string host, long long port, std::string id = "") {
  return arr({str(std::move(host)), num(port), str(std::move(id))});
}
reply range(long long first, long long last, std::vector<reply> nodes) {
  std::vector<reply> e{num(first), num(last)};
  for (auto& n : nodes) e.push_back(std::move(n));
  return arr(std::move(e));
}
// The 3-master layout of the test rig (docs/cluster.md): 0-5460, 5461-10922, 10923-16383.
reply three_masters() {
  return arr({range(0, 5460, {node("127.0.0.1", 30001, "a"), node("127.0.0.1", 30004, "d")}),
              range(5461, 10922, {node("127.0.0.1", 30002, "b"), node("127.0.0.1", 30005, "e")}),
              range(10923, 16383, {node("127.0.0.1", 30003, "c"), node("127.0.0.1", 30006, "f")})});
}

TEST(cluster_slot, crc16_xmodem_check_value) {
  EXPECT_EQ(crc16_xmodem("123456789"), 0x31C3);
  EXPECT_EQ(crc16_xmodem(""), 0);
}

TEST(cluster_slot, keyslot_vectors_measured_on_redis_7) {
  EXPECT_EQ(key_slot("123456789"), 12739);
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("{user1000}.following"), 3443);
  EXPECT_EQ(key_slot("{user1000}.followers"), 3443);
  EXPECT_EQ(key_slot("foo{}{bar}"), 8363);
  EXPECT_EQ(key_slot("foo{{bar}}zap"), 4015);
  EXPECT_EQ(key_slot("foo{bar}{zap}"), 5061);
  EXPECT_EQ(key_slot("mylock"), 1711);
  EXPECT_EQ(key_slot("redisson_lock__channel:{mylock}"), 1711);
  EXPECT_EQ(key_slot("{}"), 15257);
  EXPECT_EQ(key_slot("a{b"), 13340);
}

TEST(cluster_slot, hash_tags) {
  EXPECT_EQ(hash_tag("foo{bar}{zap}"), "bar");
  EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(hash_tag("foo{}{bar}"), "foo{}{bar}");
  EXPECT_EQ(hash_tag("a{b"), "a{b");
  EXPECT_EQ(hash_tag("a}b{c}"), "c");
  EXPECT_EQ(hash_tag(""), "");
  EXPECT_EQ(key_slot("x{foo}y"), key_slot("foo"));
}

TEST(cluster_slot, binary_keys) {
  using namespace std::string_view_literals;
  const auto nul = "a\0b"sv;
  EXPECT_EQ(nul.size(), 3u);
  EXPECT_NE(key_slot(nul), key_slot("a"));  // the bytes after the NUL count
  EXPECT_EQ(key_slot("x{\0\xff}y"sv), key_slot("\0\xff"sv));
  EXPECT_EQ(key_slot("\xff\xfe"sv), crc16_xmodem("\xff\xfe"sv) & 16383);
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    EXPECT_LT(key_slot(std::string_view(&c, 1)), 16384);
  }
}

TEST(cluster_map, three_masters_with_replicas) {
  auto res = parse_cluster_slots(three_masters(), "127.0.0.1");
  ASSERT_FALSE(res.ec) << res.text;
  const auto& m = res.map;
  EXPECT_TRUE(m.covers_all());
  EXPECT_EQ(m.covered(), 16384u);
  EXPECT_EQ(m.nodes().size(), 6u);
  ASSERT_TRUE(m.owner(key_slot("foo")));
  EXPECT_EQ(m.owner(key_slot("foo"))->address, (node_address{"127.0.0.1", 30003}));
  EXPECT_EQ(m.owner(key_slot("foo"))->id, "c");
  EXPECT_EQ(m.owner(0)->address.port, 30001);
  EXPECT_EQ(m.owner(5460)->address.port, 30001);
  EXPECT_EQ(m.owner(5461)->address.port, 30002);
  EXPECT_EQ(m.owner(16383)->address.port, 30003);
  EXPECT_EQ(m.owner(16384), nullptr);
  ASSERT_EQ(m.ranges().size(), 3u);
  ASSERT_EQ(m.ranges()[0].replicas.size(), 1u);
  EXPECT_EQ(m.nodes()[m.ranges()[0].replicas[0]].address.port, 30004);  // recorded, never an owner
  for (unsigned s = 0; s < 16384; ++s) EXPECT_NE(m.owner(static_cast<std::uint16_t>(s))->address.port, 30004);
}

TEST(cluster_map, hostnames_unknown_endpoints_ipv6_and_metadata) {
  // cluster-preferred-endpoint-type hostname: the IP moves to the metadata map, kept as extra fields.
  reply meta = arr({str("ip"), str("127.0.0.1")});
  reply r = arr({range(0, 99, {arr({str("localhost"), num(30101), str("id1"), meta, str("more")})}),
                 range(100, 199, {node("?", 30102, "id2")}),
                 range(200, 299, {node("", 30103, "id3")}),
                 range(300, 399, {node("::1", 30104, "id4"), node("fe80::1%eth0", 30105, "id5")}),
                 range(400, 499, {arr({str("redis-0.example.com"), num(6379)})})});  // no id (Redis < 4)
  auto res = parse_cluster_slots(r, "seed.example.com");
  ASSERT_FALSE(res.ec) << res.text;
  const auto& m = res.map;
  EXPECT_EQ(m.covered(), 500u);
  EXPECT_FALSE(m.covers_all());
  EXPECT_EQ(m.owner(0)->address, (node_address{"localhost", 30101}));
  EXPECT_EQ(m.owner(0)->id, "id1");
  EXPECT_EQ(m.owner(150)->address, (node_address{"seed.example.com", 30102}));
  EXPECT_EQ(m.owner(250)->address, (node_address{"seed.example.com", 30103}));
  EXPECT_EQ(m.owner(350)->address, (node_address{"::1", 30104}));
  EXPECT_EQ(m.nodes()[m.ranges()[3].replicas.at(0)].address.host, "fe80::1%eth0");
  EXPECT_EQ(m.owner(450)->address, (node_address{"redis-0.example.com", 6379}));
  EXPECT_EQ(m.owner(450)->id, "");
  EXPECT_EQ(m.owner(500), nullptr);
}

TEST(cluster_map, a_node_serving_several_ranges_is_one_node) {
  reply r = arr({range(0, 10, {node("10.0.0.1", 7000, "a")}), range(20, 30, {node("10.0.0.2", 7000, "b")}),
                 range(11, 19, {node("10.0.0.1", 7000, "a")})});
  auto res = parse_cluster_slots(r, "10.0.0.9");
  ASSERT_FALSE(res.ec) << res.text;
  EXPECT_EQ(res.map.nodes().size(), 2u);
  EXPECT_EQ(res.map.covered(), 31u);
  EXPECT_EQ(res.map.owner(15), res.map.owner(5));
  EXPECT_EQ(res.map.find({"10.0.0.2", 7000}), 1u);
  EXPECT_FALSE(res.map.find({"10.0.0.2", 7001}));
}

TEST(cluster_map, port_zero_master_leaves_its_slots_uncovered) {
  reply r = arr({range(0, 8191, {node("10.0.0.1", 0, "a"), node("10.0.0.3", 6379, "c")}),
                 range(8192, 16383, {node("10.0.0.2", 6379, "b"), node("10.0.0.4", 0, "d")})});
  auto res = parse_cluster_slots(r, "10.0.0.1");
  ASSERT_FALSE(res.ec) << res.text;
  EXPECT_EQ(res.map.covered(), 8192u);
  EXPECT_EQ(res.map.owner(0), nullptr);
  EXPECT_EQ(res.map.owner(8192)->address.host, "10.0.0.2");
  EXPECT_NE(res.text.find("port 0"), std::string::npos) << res.text;
  ASSERT_EQ(res.map.ranges().size(), 1u);
  EXPECT_TRUE(res.map.ranges()[0].replicas.empty());  // the port-0 replica is left out
  EXPECT_FALSE(res.map.find({"10.0.0.1", 0}));
}

TEST(cluster_map, string_ports_are_read_too) {
  reply r = arr({range(0, 16383, {arr({str("h"), str("6379"), str("x")})})});
  auto res = parse_cluster_slots(r, "s");
  ASSERT_FALSE(res.ec) << res.text;
  EXPECT_EQ(res.map.owner(1)->address.port, 6379);
}

TEST(cluster_map, empty_reply_is_an_empty_map) {
  auto res = parse_cluster_slots(arr({}), "s");
  EXPECT_FALSE(res.ec);
  EXPECT_EQ(res.map.covered(), 0u);
  EXPECT_TRUE(res.map.nodes().empty());
}

TEST(cluster_map, malformed_replies_are_bad_reply) {
  const auto bad = make_error_code(errc::bad_reply);
  std::vector<reply> cases = {
      str("OK"),
      reply{},
      num(3),
      arr({str("x")}),
      arr({range(0, 10, {})}),                                    // no master
      arr({arr({num(0), num(10)})}),                              // no master either
      arr({arr({str("0"), num(10), node("h", 1)})}),              // start not an integer
      arr({range(10, 0, {node("h", 1)})}),                        // start > end
      arr({range(0, 16384, {node("h", 1)})}),                     // slot out of range
      arr({range(-1, 10, {node("h", 1)})}),                       // negative
      arr({range(0, 10, {node("h", -1)})}),                       // negative port
      arr({range(0, 10, {node("h", 65536)})}),                    // port too big
      arr({range(0, 10, {node("h", 1LL << 40)})}),                // absurd port
      arr({range(0, 10, {arr({str("h")})})}),                     // node without port
      arr({range(0, 10, {arr({num(1), num(1)})})}),               // host not a string
      arr({range(0, 10, {arr({str("h"), str("x1")})})}),          // port not a number
      arr({range(0, 10, {arr({str("h"), num(1), num(5)})})}),     // id not a string
      arr({range(0, 10, {str("h:1")})}),                          // node not an array
      arr({range(0, 10, {node("h", 1), str("replica")})}),        // malformed replica
      arr({range(0, 10, {node("h", 1)}), range(5, 20, {node("g", 1)})}),  // overlap
      arr({range(0, 10, {node("h", 1)}), range(0, 10, {node("h", 1)})}),  // listed twice
      arr({range(1LL << 62, 1LL << 62, {node("h", 1)})}),                 // absurd slot
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto res = parse_cluster_slots(cases[i], "s");
    EXPECT_EQ(res.ec, bad) << "case " << i << ": " << res.text;
    EXPECT_EQ(res.map.covered(), 0u) << "case " << i;
    EXPECT_TRUE(res.map.nodes().empty()) << "case " << i;
  }
  // More ranges than slots is refused before any is read.
  std::vector<reply> many(16385, range(0, 0, {node("h", 1)}));
  EXPECT_EQ(parse_cluster_slots(arr(std::move(many)), "s").ec, bad);
  // More nodes than max_nodes (one slot each, all distinct).
  std::vector<reply> crowd;
  for (int i = 0; i <= static_cast<int>(cluster_map::max_nodes); ++i) crowd.push_back(range(i, i, {node("h", i + 1)}));
  auto res = parse_cluster_slots(arr(std::move(crowd)), "s");
  EXPECT_EQ(res.ec, bad);
  EXPECT_NE(res.text.find("nodes"), std::string::npos) << res.text;
}

TEST(cluster_map, error_replies_keep_the_servers_words) {
  auto res = parse_cluster_slots(err("ERR This instance has cluster support disabled"), "s");
  EXPECT_TRUE(res.ec);
  EXPECT_NE(res.text.find("cluster support disabled"), std::string::npos);
  auto noperm = parse_cluster_slots(err("NOPERM this user has no permissions to run the 'cluster|slots' command"), "s");
  EXPECT_EQ(noperm.ec, make_error_code(errc::no_permission));
}

TEST(cluster_map, moved_patches_one_slot) {
  auto m = parse_cluster_slots(three_masters(), "127.0.0.1").map;
  EXPECT_TRUE(m.patch(12182, {"127.0.0.1", 30001}));
  EXPECT_EQ(m.owner(12182)->address.port, 30001);
  EXPECT_EQ(m.owner(12183)->address.port, 30003);
  EXPECT_EQ(m.nodes().size(), 6u);
  EXPECT_TRUE(m.patch(1, {"10.9.9.9", 7000}));  // a node the map did not know
  EXPECT_EQ(m.nodes().size(), 7u);
  EXPECT_EQ(m.owner(1)->address.host, "10.9.9.9");
  EXPECT_TRUE(m.covers_all());
  EXPECT_FALSE(m.patch(16384, {"10.9.9.9", 7000}));
  EXPECT_FALSE(m.patch(2, {"10.9.9.9", 0}));

  cluster_map empty;
  EXPECT_TRUE(empty.patch(5, {"h", 1}));
  EXPECT_EQ(empty.covered(), 1u);
  EXPECT_TRUE(empty.patch(5, {"g", 1}));
  EXPECT_EQ(empty.covered(), 1u);
}

TEST(cluster_map, a_full_map_is_not_replaced_by_a_partial_one) {
  const auto full = parse_cluster_slots(three_masters(), "h").map;
  const auto partial = parse_cluster_slots(arr({range(0, 5460, {node("127.0.0.1", 30001)})}), "h").map;
  const auto other_partial = parse_cluster_slots(arr({range(0, 9000, {node("127.0.0.1", 30001)})}), "h").map;
  const cluster_map empty;
  EXPECT_TRUE(accept_cluster_map(empty, full));
  EXPECT_TRUE(accept_cluster_map(empty, partial));
  EXPECT_TRUE(accept_cluster_map(full, full));
  EXPECT_FALSE(accept_cluster_map(full, partial));
  EXPECT_FALSE(accept_cluster_map(full, empty));
  EXPECT_TRUE(accept_cluster_map(partial, full));
  EXPECT_TRUE(accept_cluster_map(partial, other_partial));
  EXPECT_TRUE(accept_cluster_map(other_partial, partial));  // neither is whole: the newer view wins
  EXPECT_FALSE(accept_cluster_map(partial, empty));
  EXPECT_TRUE(accept_cluster_map(empty, empty));
}

TEST(cluster_redirect, moved_and_ask) {
  auto m = parse_cluster_redirect("MOVED 3999 127.0.0.1:6381", "10.0.0.1");
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, (cluster_redirect{cluster_redirect::kind::moved, 3999, {"127.0.0.1", 6381}}));
  auto a = parse_cluster_redirect("ASK 3999 127.0.0.1:6381", "10.0.0.1");
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, (cluster_redirect{cluster_redirect::kind::ask, 3999, {"127.0.0.1", 6381}}));
  EXPECT_EQ(parse_cluster_redirect("MOVED 12182 localhost:30103", "x")->node, (node_address{"localhost", 30103}));
  EXPECT_EQ(parse_cluster_redirect("MOVED 0 a.b.example.com:6379", "x")->slot, 0);
  EXPECT_EQ(parse_cluster_redirect("MOVED 16383 h:1", "x")->slot, 16383);
}

TEST(cluster_redirect, ipv6_and_empty_hosts) {
  EXPECT_EQ(parse_cluster_redirect("MOVED 1 ::1:30001", "x")->node, (node_address{"::1", 30001}));
  EXPECT_EQ(parse_cluster_redirect("MOVED 1 [::1]:30001", "x")->node, (node_address{"::1", 30001}));
  EXPECT_EQ(parse_cluster_redirect("ASK 1 2001:db8::7:6379", "x")->node, (node_address{"2001:db8::7", 6379}));
  EXPECT_EQ(parse_cluster_redirect("MOVED 1 :30001", "10.0.0.7")->node, (node_address{"10.0.0.7", 30001}));
  EXPECT_EQ(parse_cluster_redirect("MOVED 1 ?:30001", "10.0.0.7")->node, (node_address{"10.0.0.7", 30001}));
  EXPECT_EQ(parse_cluster_redirect("MOVED 1 []:30001", "10.0.0.7")->node, (node_address{"10.0.0.7", 30001}));
}

TEST(cluster_redirect, other_errors_and_malformed_redirects_are_nothing) {
  for (std::string_view t : {"ERR unknown command", "WRONGTYPE Operation against a key", "TRYAGAIN Multiple keys",
                             "CLUSTERDOWN The cluster is down", "MOVEDX 1 h:1", "ASKING", "MOVED", "MOVED ",
                             "MOVED 1", "MOVED 1 ", "MOVED 16384 h:1", "MOVED -1 h:1", "MOVED x h:1", "MOVED 1 h",
                             "MOVED 1 h:", "MOVED 1 h:0", "MOVED 1 h:65536", "MOVED 1 h:1x", "MOVED 1 h:1 extra",
                             "MOVED  1 h:1", "moved 1 h:1", ""}) {
    EXPECT_FALSE(parse_cluster_redirect(t, "x")) << t;
  }
}

TEST(cluster_redirect, cluster_errors_are_classified_by_their_first_word) {
  EXPECT_EQ(classify_cluster_error("MOVED 1 h:1"), cluster_error::moved);
  EXPECT_EQ(classify_cluster_error("ASK 1 h:1"), cluster_error::ask);
  EXPECT_EQ(classify_cluster_error("TRYAGAIN Multiple keys request during rehashing of slot"), cluster_error::tryagain);
  EXPECT_EQ(classify_cluster_error("CLUSTERDOWN The cluster is down"), cluster_error::clusterdown);
  EXPECT_EQ(classify_cluster_error("CLUSTERDOWN Hash slot not served"), cluster_error::clusterdown);
  EXPECT_EQ(classify_cluster_error("LOADING Redis is loading the dataset in memory"), cluster_error::loading);
  EXPECT_EQ(classify_cluster_error("READONLY You can't write against a read only replica."), cluster_error::readonly);
  EXPECT_EQ(classify_cluster_error("MASTERDOWN Link with MASTER is down"), cluster_error::masterdown);
  EXPECT_EQ(classify_cluster_error("TRYAGAIN"), cluster_error::tryagain);
  for (std::string_view t : {"ERR x", "CROSSSLOT Keys in request don't hash to the same slot", "NOSCRIPT",
                             "BUSY", "LOADINGX", "ASKING", "", "readonly x"}) {
    EXPECT_EQ(classify_cluster_error(t), cluster_error::none) << t;
  }
}

}  // namespace
}  // namespace redlease::detail
