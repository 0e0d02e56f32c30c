// SPDX-License-Identifier: MIT
// describe() (include/redlease/layout.hpp), without a server: every kind's names are Redisson's
// (RedissonLock, RedissonFairLock, RedissonReadWriteLock) or redlease's own, the hash-tag rule holds
// for names with and without a `{`, the names are the ones the protocols put in their calls, and
// the ACL patterns are those docs/cli.md prints.
#include "redlease/layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lock/protocol.hpp"

namespace redlease {
namespace {

std::vector<std::string> key_names(const lock_layout& l) {
  std::vector<std::string> out;
  for (const auto& k : l.keys) out.push_back(k.key);
  return out;
}

std::vector<std::string> key_types(const lock_layout& l) {
  std::vector<std::string> out;
  for (const auto& k : l.keys) out.emplace_back(k.type);
  return out;
}

using strings = std::vector<std::string>;

constexpr lock_kind all_kinds[] = {lock_kind::reentrant, lock_kind::mutex, lock_kind::fair, lock_kind::read,
                                   lock_kind::write};

TEST(layout_test, the_reentrant_lock_is_redissons) {
  auto l = describe(lock_kind::reentrant, "orders");
  EXPECT_EQ(l.name, "orders");
  EXPECT_EQ(key_names(l), (strings{"orders", "redisson_lock_token:{orders}"}));
  EXPECT_EQ(key_types(l), (strings{"hash", "string"}));
  EXPECT_EQ(l.token_key, "redisson_lock_token:{orders}");
  ASSERT_EQ(l.channels.size(), 1u);
  EXPECT_EQ(l.channel(), "redisson_lock__channel:{orders}");
  EXPECT_EQ(l.latch_key_pattern, "redisson_unlock_latch:{orders}:*");
  EXPECT_EQ(l.latch_key("r1"), "redisson_unlock_latch:{orders}:r1");
  EXPECT_EQ(l.waiter_channel("uuid:1"), "redisson_lock__channel:{orders}");
  EXPECT_EQ(l.read_timeout_key("uuid:1", 1), "");
  EXPECT_EQ(l.keyspace_channel(0), "");
  EXPECT_EQ(l.queue_key, "");
  for (const auto& k : l.keys) EXPECT_FALSE(k.purpose.empty()) << k.key;
}

TEST(layout_test, the_fair_lock_adds_a_queue_deadlines_and_a_channel_per_waiter) {
  auto l = describe(lock_kind::fair, "orders");
  EXPECT_EQ(key_names(l), (strings{"orders", "redisson_lock_queue:{orders}", "redisson_lock_timeout:{orders}",
                                   "redisson_lock_token:{orders}"}));
  EXPECT_EQ(key_types(l), (strings{"hash", "list", "zset", "string"}));
  EXPECT_EQ(l.queue_key, "redisson_lock_queue:{orders}");
  EXPECT_EQ(l.deadlines_key, "redisson_lock_timeout:{orders}");
  ASSERT_EQ(l.channels.size(), 2u);
  EXPECT_EQ(l.channel(), "redisson_lock__channel:{orders}");
  EXPECT_FALSE(l.channels[0].per_waiter);
  EXPECT_EQ(l.channels[1].channel, "redisson_lock__channel:{orders}:*");
  EXPECT_TRUE(l.channels[1].per_waiter);
  EXPECT_EQ(l.waiter_channel("uuid:7"), "redisson_lock__channel:{orders}:uuid:7");
  EXPECT_EQ(l.latch_key_pattern, "redisson_unlock_latch:{orders}:*");
}

TEST(layout_test, the_read_write_lock_is_redissons_with_redleases_token) {
  for (lock_kind kind : {lock_kind::read, lock_kind::write}) {
    auto l = describe(kind, "doc");
    EXPECT_EQ(key_names(l), (strings{"doc", "redlease_rwlock_token:{doc}"}));
    EXPECT_EQ(key_types(l), (strings{"hash", "string"}));
    EXPECT_EQ(l.channel(), "redisson_rwlock:{doc}");
    EXPECT_EQ(l.read_timeout_key_pattern, "{doc}:*:rwlock_timeout:*");
    EXPECT_EQ(l.read_timeout_key("uuid:1", 3), "{doc}:uuid:1:rwlock_timeout:3");
    EXPECT_EQ(l.latch_key("r"), "redisson_unlock_latch:{doc}:r");
  }
}

TEST(layout_test, the_mutex_is_a_string_with_its_own_channel_and_no_latch) {
  auto l = describe(lock_kind::mutex, "job");
  EXPECT_EQ(key_names(l), (strings{"job", "redlease_mutex_token:{job}"}));
  EXPECT_EQ(key_types(l), (strings{"string", "string"}));
  EXPECT_EQ(l.channel(), "redlease_mutex__channel:{job}");
  EXPECT_EQ(l.latch_key_pattern, "");
  EXPECT_EQ(l.latch_key("r"), "");
  EXPECT_EQ(l.keyspace_channel(3), "__keyspace@3__:job");
}

// A name with a `{` already picks its cluster slot: derived names append it without another tag.
TEST(layout_test, a_name_with_a_hash_tag_keeps_it) {
  auto f = describe(lock_kind::fair, "a{x}b");
  EXPECT_EQ(key_names(f), (strings{"a{x}b", "redisson_lock_queue:a{x}b", "redisson_lock_timeout:a{x}b",
                                   "redisson_lock_token:a{x}b"}));
  EXPECT_EQ(f.channel(), "redisson_lock__channel:a{x}b");
  EXPECT_EQ(f.latch_key("r"), "redisson_unlock_latch:a{x}b:r");
  auto r = describe(lock_kind::read, "a{x}b");
  EXPECT_EQ(r.read_timeout_key("o", 1), "a{x}b:o:rwlock_timeout:1");
  EXPECT_EQ(describe(lock_kind::mutex, "{m}").channel(), "redlease_mutex__channel:{m}");
}

// The protocols' calls name the same keys and channels: `s` is one of the bulk strings of `a`.
bool sends(const detail::arg_list& a, const std::string& s) {
  std::string bulk(1, '$');  // (appended piece by piece: g++ 12 -O3 reports a false -Wrestrict on "$" + ...)
  bulk.append(std::to_string(s.size())).append("\r\n").append(s).append("\r\n");
  return a.buf.find(bulk) != std::string::npos;
}

TEST(layout_test, the_protocols_send_the_described_names) {
  for (const char* name : {"n", "a{x}b"}) {
    for (lock_kind kind : all_kinds) {
      const auto l = describe(kind, name);
      const auto& p = detail::protocol_of(kind);
      detail::arg_list acq;
      p.encode_acquire(acq, detail::acquire_request{name, "uuid:1", "id", detail::ms(5000), true, detail::ms(1000),
                                                    true});
      for (const auto& k : l.keys) EXPECT_TRUE(sends(acq, k.key)) << name << ": " << k.key << " not in the acquisition";
      EXPECT_EQ(p.channel(name), l.channel());
      detail::arg_list rel;
      p.encode_release(rel, detail::release_request{name, "uuid:1", "id", "req", detail::ms(1000), 1, false,
                                                    detail::ms(1000)});
      EXPECT_TRUE(sends(rel, l.channel())) << name;
      if (kind != lock_kind::mutex) {
        EXPECT_TRUE(sends(rel, l.latch_key("req"))) << name;
      }
      if (kind == lock_kind::fair) {
        EXPECT_EQ(p.waiter_channel(name, "uuid:1"), l.waiter_channel("uuid:1"));
      }
    }
  }
}

// The line docs/cli.md prints for a user restricted to `locks:*`, and for `*`.
TEST(layout_test, acl_patterns_for_a_prefix_are_the_documented_ones) {
  auto p = acl_patterns_for("locks:*");
  EXPECT_EQ(p.keys, (strings{"locks:*", "redisson_unlock_latch:{locks:*", "redisson_lock_token:{locks:*",
                             "redlease_mutex_token:{locks:*", "redlease_rwlock_token:{locks:*",
                             "redisson_lock_queue:{locks:*", "redisson_lock_timeout:{locks:*", "{locks:*"}));
  EXPECT_EQ(p.channels, (strings{"redisson_lock__channel:{locks:*", "redlease_mutex__channel:{locks:*",
                                 "redisson_rwlock:{locks:*", "redisson_sc:{locks:*",
                                 "redisson_countdownlatch__channel__{locks:*"}));
  auto all = acl_patterns_for("*");
  EXPECT_EQ(all.keys, (strings{"*"}));
  EXPECT_EQ(all.channels, (strings{"redisson_lock__channel:*", "redlease_mutex__channel:*", "redisson_rwlock:*",
                                   "redisson_sc:*", "redisson_countdownlatch__channel__*"}));
}

// A closed pattern (one name) names the fair waiters' channels and the read timeout keys apart.
TEST(layout_test, acl_patterns_for_one_name_close_every_tag) {
  auto p = acl_patterns_for("job");
  EXPECT_EQ(p.keys, (strings{"job", "redisson_unlock_latch:{job}:*", "redisson_lock_token:{job}",
                             "redlease_mutex_token:{job}", "redlease_rwlock_token:{job}", "redisson_lock_queue:{job}",
                             "redisson_lock_timeout:{job}", "{job}:*"}));
  EXPECT_EQ(p.channels, (strings{"redisson_lock__channel:{job}", "redisson_lock__channel:{job}:*",
                                 "redlease_mutex__channel:{job}", "redisson_rwlock:{job}", "redisson_sc:{job}",
                                 "redisson_countdownlatch__channel__{job}"}));
  // The permits' zset is covered by the read timeouts' pattern; alone, it is named.
  EXPECT_EQ(describe(lock_kind::permit_semaphore, "job").acl_keys,
            (strings{"job", "redisson_unlock_latch:{job}:*", "{job}:timeout"}));
  auto braced = acl_patterns_for("{job}");
  EXPECT_EQ(braced.keys.back(), "{job}:*");
  EXPECT_EQ(braced.keys[1], "redisson_unlock_latch:{job}:*");
  EXPECT_EQ(describe(lock_kind::mutex, "job").acl_keys, (strings{"job", "redlease_mutex_token:{job}"}));
}

// The entries of a lock's hash, as the acquisitions judge a hash without expiry on the server
// (src/lua/include/foreign_hash.lua) and status and unlock judge it in the CLI.
TEST(layout_test, a_lock_hash_holds_holders_and_a_read_write_mode) {
  EXPECT_TRUE(is_lock_hash_entry("8743c9c0-0795-4907-87fd-6c719a6b4586:1", "2"));  // Redisson's
  EXPECT_TRUE(is_lock_hash_entry("8743c9c0-0795-4907-87fd-6c719a6b4586:1:write", "1"));
  EXPECT_TRUE(is_lock_hash_entry("mode", "read"));
  EXPECT_TRUE(is_lock_hash_entry("mode", "write"));
  EXPECT_TRUE(is_lock_hash_entry("a:7", "-1"));  // a count someone broke: still a lock's entry
  EXPECT_FALSE(is_lock_hash_entry("name", "bob"));
  EXPECT_FALSE(is_lock_hash_entry("mode", "dark"));
  EXPECT_FALSE(is_lock_hash_entry("user:42", "bob"));
  EXPECT_FALSE(is_lock_hash_entry(":1", "1"));
  EXPECT_FALSE(is_lock_hash_entry("a:b", "1"));
  EXPECT_FALSE(is_lock_hash_entry("a:1", "1.5"));
  EXPECT_FALSE(is_lock_hash_entry("a:1", ""));
}

TEST(layout_test, the_embedded_scripts_are_listed_with_their_digests) {
  auto s = embedded_scripts();
  ASSERT_FALSE(s.empty());
  auto release = std::find_if(s.begin(), s.end(), [](const embedded_script& e) { return e.name == "release"; });
  ASSERT_NE(release, s.end());
  EXPECT_NE(release->body.find("redis.call"), std::string_view::npos);
  for (const auto& e : s) {
    EXPECT_EQ(e.sha1.size(), 40u) << e.name;
    EXPECT_FALSE(e.body.empty()) << e.name;
  }
}

}  // namespace
}  // namespace redlease
