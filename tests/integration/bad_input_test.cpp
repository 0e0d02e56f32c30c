// SPDX-License-Identifier: MIT
// Bad input and hostile server states: each gets a typed error, and nothing is lost or corrupted.
// The list and the error each gets is in docs/errors.md.
#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

class bad_input_test : public lock_fixture {};

TEST_F(bad_input_test, binary_names_with_nul_and_invalid_utf8_work) {
  client c{cfg()};
  const std::string name("or\0ders:\xff\xfe:\x80", 13);
  auto l = c.lock(name);
  l.lock();
  EXPECT_EQ(raw().command({"TYPE", name}).str, "hash");
  // A waiter on the same binary name is woken through the (binary) channel.
  auto waiter = std::async(std::launch::async, [&] {
    auto l2 = c.lock(name);
    bool got = l2.try_lock(5s);
    if (got) l2.unlock();
    return got;
  });
  ASSERT_TRUE(eventually([&] {
    auto r = raw().command({"PUBSUB", "NUMSUB", "redisson_lock__channel:{" + name + "}"});
    return r.elements.size() == 2 && r.elements[1].integer == 1;
  }));
  auto t0 = steady::now();
  l.unlock();
  EXPECT_TRUE(waiter.get());
  EXPECT_LT(ms_since(t0), 1000);
  auto m = c.mutex(name + "\0m");
  m.lock();
  EXPECT_TRUE(m.is_held_by_current_thread());
  m.unlock();
  EXPECT_EQ(raw().command({"EXISTS", name}).integer, 0);
}

TEST_F(bad_input_test, huge_names_work) {
  client c{cfg()};
  std::string name(256 * 1024, 'x');
  auto l = c.lock(name);
  l.lock();
  EXPECT_EQ(l.hold_count(), 1);
  l.unlock();
  EXPECT_FALSE(l.is_locked());
}

TEST_F(bad_input_test, durations_out_of_range_are_invalid_argument) {
  client c{cfg()};
  auto l = c.lock("d");
  auto m = c.mutex("dm");
  std::error_code ec;
  for (auto bad : {-1ms, 0ms, std::chrono::milliseconds(1LL << 41), std::chrono::milliseconds::max(),
                   std::chrono::milliseconds::min()}) {
    l.lock(bad, ec);
    EXPECT_EQ(ec, errc::invalid_argument) << bad.count();
    m.try_lock(0ms, bad, ec);
    EXPECT_EQ(ec, errc::invalid_argument) << bad.count();
  }
  for (auto bad : {-1ms, std::chrono::milliseconds::min(), std::chrono::milliseconds::max()}) {
    l.try_lock(bad, ec);
    EXPECT_EQ(ec, errc::invalid_argument) << bad.count();
  }
  // try_lock_for with a huge duration type does not overflow into a negative wait.
  EXPECT_TRUE(l.try_lock_for(std::chrono::hours(1)));
  l.unlock();
  EXPECT_EQ(raw()({"EXISTS", "d"}).integer, 0);
  EXPECT_EQ(raw()({"EXISTS", "dm"}).integer, 0);
}

TEST_F(bad_input_test, calls_after_close_fail_with_client_closed) {
  client c{cfg()};
  auto l = c.lock("closed");
  auto m = c.mutex("closed-m");
  auto s = c.stock("closed-s", 2);
  c.close();
  std::error_code ec;
  l.lock(ec);
  EXPECT_EQ(ec, errc::client_closed);
  l.unlock(ec);
  EXPECT_EQ(ec, errc::client_closed);
  EXPECT_FALSE(m.try_lock(ec));
  EXPECT_EQ(ec, errc::client_closed);
  s.try_take(1, ec);
  EXPECT_EQ(ec, errc::client_closed);
  EXPECT_THROW(l.lock(), redlease::error);
  // Handlers with no executor of their own complete after close too, also for a call whose
  // arguments are refused (its handler was posted to the closed client's executor, which runs
  // nothing any more, and never ran).
  std::promise<std::error_code> take0, command0, try_lock_negative;
  s.async_try_take(0, [&](std::error_code e, bool) { take0.set_value(e); });
  c.async_command(std::vector<std::string>{}, [&](std::error_code e, reply) { command0.set_value(e); });
  l.async_try_lock(c.new_owner(), -1ms, [&](std::error_code e, bool) { try_lock_negative.set_value(e); });
  for (auto* p : {&take0, &command0, &try_lock_negative}) {
    auto f = p->get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "a handler never ran";
    const auto e = f.get();
    EXPECT_TRUE(e == errc::invalid_argument || e == errc::client_closed) << e.message();
  }
}

TEST_F(bad_input_test, oom_is_server_oom_and_changes_nothing) {
  client c{cfg()};
  raw()({"SET", "filler", std::string(1024, 'x')});
  raw()({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  raw()({"CONFIG", "SET", "maxmemory", "1"});
  auto l = c.lock("oom");
  std::error_code ec;
  EXPECT_FALSE(l.try_lock(0ms, ec));  // no wait: the refusal at once
  EXPECT_EQ(ec, errc::server_oom) << ec.message();
  EXPECT_NE(last_error_text().find("OOM command not allowed"), std::string::npos) << last_error_text();
  // A fenced grant too: the server's memory is the cause, not its token key.
  EXPECT_FALSE(l.try_lock_and_get_token(0ms, ec));
  EXPECT_EQ(ec, errc::server_oom) << ec.message();
  EXPECT_NE(last_error_text().find("OOM command not allowed"), std::string::npos) << last_error_text();
  EXPECT_EQ(last_error_text().find("fencing token key"), std::string::npos) << last_error_text();
  raw()({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(raw()({"EXISTS", "oom"}).integer, 0);
  l.lock();  // fine again
  l.unlock();
}

TEST_F(bad_input_test, busy_script_is_server_busy) {
  raw()({"CONFIG", "SET", "busy-reply-threshold", "100"});
  client c{cfg()};
  c.ping();
  auto blocker = server().client();
  blocker.set_timeout(10000ms);
  // A script that spins until killed keeps the server BUSY for everyone else.
  std::thread spin([&] { blocker.command({"EVAL", "while true do end", "0"}); });
  std::this_thread::sleep_for(300ms);  // past busy-reply-threshold: the server now answers BUSY
  auto l = c.lock("busy");
  std::error_code ec;
  l.try_lock(0ms, ec);  // no wait: the refusal at once (with a wait it is retried until SCRIPT KILL)
  EXPECT_EQ(ec, errc::server_busy) << ec.message();
  auto killer = server().client();
  killer({"SCRIPT", "KILL"});
  spin.join();
  l.lock();
  l.unlock();
}

TEST_F(bad_input_test, readonly_replica_is_server_readonly) {
  redis_server primary;
  primary.client()({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});  // start the sync at once
  raw()({"REPLICAOF", "127.0.0.1", std::to_string(primary.port())});
  ASSERT_TRUE(eventually([&] {
    auto info = raw()({"INFO", "replication"}).str;
    return info.find("master_link_status:up") != std::string::npos;
  }));
  client c{cfg()};
  auto l = c.lock("ro");
  std::error_code ec;
  l.lock(ec);
  EXPECT_EQ(ec, errc::server_readonly) << ec.message();
  auto m = c.mutex("ro-m");
  m.lock(ec);
  EXPECT_EQ(ec, errc::server_readonly) << ec.message();
  raw()({"REPLICAOF", "NO", "ONE"});
}

TEST_F(bad_input_test, force_unlock_and_queries_on_wrong_type_keys) {
  client c{cfg()};
  raw()({"RPUSH", "a-list", "x"});
  auto l = c.lock("a-list");
  std::error_code ec;
  l.hold_count(ec);
  EXPECT_EQ(ec, errc::wrong_type);
  l.try_lock(ec);
  EXPECT_EQ(ec, errc::wrong_type);
  l.unlock(ec);
  EXPECT_EQ(ec, errc::wrong_type);
  EXPECT_EQ(raw()({"LLEN", "a-list"}).integer, 1);  // untouched
}

// Every kind against garbage in each key it touches (the lock's own key, its fencing token key, the
// fair lock's queue and deadlines): a fenced try_lock answers within its wait (no script loops on a
// value it found), the server stays responsive, and the answer is one of: a grant with a token
// above 0 that unlocks cleanly, busy, or a typed error (wrong_type, or server_error naming the
// token key). A failed attempt leaves no key it did not find and changes none it did (a fair lock's
// queue may lose dead waiters, but keeps nothing of ours).
TEST_F(bad_input_test, every_kind_answers_garbage_in_each_of_its_keys_within_its_wait) {
  struct kind_case {
    const char* kind;
    std::vector<std::string> keys;
    std::function<std::optional<std::uint64_t>(client&, std::error_code&)> try_fenced;
    std::function<void(client&, std::error_code&)> unlock;
  };
  const std::string n = "gm";
  auto lock_case = [&](const char* kind, std::vector<std::string> keys, auto make) {
    return kind_case{kind, std::move(keys),
                     [n, make](client& c, std::error_code& ec) { return make(c, n).try_lock_and_get_token(150ms, ec); },
                     [n, make](client& c, std::error_code& ec) { make(c, n).unlock(ec); }};
  };
  std::vector<kind_case> kinds = {
      lock_case("reentrant", {n, "redisson_lock_token:{gm}"}, [](client& c, const std::string& x) { return c.lock(x); }),
      lock_case("mutex", {n, "redlease_mutex_token:{gm}"}, [](client& c, const std::string& x) { return c.mutex(x); }),
      lock_case("fair", {n, "redisson_lock_token:{gm}", "redisson_lock_queue:{gm}", "redisson_lock_timeout:{gm}"},
                [](client& c, const std::string& x) { return c.fair_lock(x); }),
      lock_case("read", {n, "redlease_rwlock_token:{gm}"}, [](client& c, const std::string& x) { return c.read_lock(x); }),
      lock_case("write", {n, "redlease_rwlock_token:{gm}"}, [](client& c, const std::string& x) { return c.write_lock(x); }),
  };
  const std::vector<std::vector<std::string>> values = {
      {"SET", "K", "junk"},           {"SET", "K", "-5"},         {"SET", "K", "100000000"},
      {"SET", "K", "9223372036854775807"}, {"HSET", "K", "x", "junk"}, {"HSET", "K", "mode", "read", "x", "100000000"},
      {"HSET", "K", "mode", "bogus"}, {"RPUSH", "K", "a", "b"},  {"ZADD", "K", "inf", "x"},
      {"SET", "K", "9007199254740993"},  // a token beyond 2^53: not handed out inexactly
  };
  auto snapshot = [&] {
    std::map<std::string, std::string> out;
    for (auto& k : raw()({"KEYS", "*"}).elements) out[k.str] = raw()({"DUMP", k.str}).str;
    return out;
  };
  auto holds_ours = [&](const client& c) {
    for (auto& k : raw()({"KEYS", "*"}).elements) {
      if (k.str.find(c.id()) != std::string::npos) return k.str;
      auto type = raw()({"TYPE", k.str}).str;
      std::vector<std::string> read;
      if (type == "hash") read = {"HKEYS", k.str};
      if (type == "list") read = {"LRANGE", k.str, "0", "-1"};
      if (type == "zset") read = {"ZRANGE", k.str, "0", "-1"};
      if (read.empty()) continue;
      for (auto& e : raw().command(read).elements)
        if (e.str.find(c.id()) != std::string::npos) return k.str;
    }
    return std::string();
  };
  auto no_card = cfg();
  no_card.client_card = false;  // the client's card is no lock key: not what this looks at
  client c(no_card);
  int grants = 0, busy = 0, errors = 0;
  for (auto& k : kinds) {
    for (auto& key : k.keys) {
      for (auto& v : values) {
        auto seed = v;
        seed[1] = key;
        SCOPED_TRACE(std::string(k.kind) + ": " + seed[0] + " " + key + " " + seed.back());
        raw()({"FLUSHALL"});
        raw().command(seed);
        raw()({"PEXPIRE", key, "5000"});
        auto before = snapshot();
        std::error_code ec;
        auto t0 = steady::now();
        auto token = k.try_fenced(c, ec);
        EXPECT_LT(ms_since(t0), 1500);
        EXPECT_EQ(raw()({"PING"}).str, "PONG");
        if (token) {
          ++grants;
          EXPECT_GT(*token, 0u);
          k.unlock(c, ec);
          EXPECT_FALSE(ec) << ec.message();
          EXPECT_EQ(holds_ours(c), "");
          continue;
        }
        if (ec) {
          ++errors;
          EXPECT_TRUE(ec == errc::wrong_type || ec == errc::server_error) << ec.message();
          if (ec == errc::server_error) {
            EXPECT_NE(last_error_text().find(key), std::string::npos) << last_error_text();
          }
        } else {
          ++busy;
        }
        EXPECT_EQ(holds_ours(c), "");
        auto after = snapshot();
        for (auto& [name, dump] : after) {
          EXPECT_TRUE(before.count(name)) << "new key " << name;
          bool fair_queue = name.find("redisson_lock_queue") == 0 || name.find("redisson_lock_timeout") == 0;
          if (before.count(name) && !fair_queue) {
            EXPECT_EQ(before[name], dump) << "changed " << name;
          }
        }
      }
    }
  }
  // Each outcome occurs (the cases are not all of one kind).
  EXPECT_GT(grants, 0);
  EXPECT_GT(busy, 0);
  EXPECT_GT(errors, 0);
  std::cout << "[          ] " << grants << " grants, " << busy << " busy, " << errors << " typed errors\n";
}

// A held lock whose key someone replaced with a value of another type is lost: the unlock says
// lock_lost (on_lost runs, reason taken) and the local hold goes. Before, every unlock said
// wrong_type and the hold stayed, so each later acquisition by the owner failed with lock_lost
// until someone deleted the key. WRONGTYPE from another key (a fair queue) is not a loss.
// An application's hash under a lock's name ("user:42" -> {name: bob}, no TTL) is no lock: every
// kind whose lock is a hash refuses it at once with wrong_type, where before each waited for ever
// (it looked held by another owner, with no expiry). Nothing of it is changed.
TEST_F(bad_input_test, an_application_hash_without_expiry_is_wrong_type_at_once_for_every_hash_kind) {
  client c{cfg()};
  raw()({"HSET", "user:42", "name", "bob", "visits", "7"});
  for (auto kind : {lock_kind::reentrant, lock_kind::fair, lock_kind::read, lock_kind::write}) {
    SCOPED_TRACE(static_cast<int>(kind));
    auto l = kind == lock_kind::reentrant ? detail::lock_handle(c.lock("user:42"))
             : kind == lock_kind::fair    ? detail::lock_handle(c.fair_lock("user:42"))
             : kind == lock_kind::read    ? detail::lock_handle(c.read_lock("user:42"))
                                          : detail::lock_handle(c.write_lock("user:42"));
    std::error_code ec;
    auto t0 = steady::now();
    EXPECT_FALSE(l.try_lock(10s, ec));
    EXPECT_EQ(ec, errc::wrong_type) << ec.message();
    EXPECT_LT(ms_since(t0), 5000) << "at once, not at the end of the wait";
    // lock() too: it would have waited for ever.
    auto f = std::async(std::launch::async, [&] {
      std::error_code e;
      l.lock(e);
      return e;
    });
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    EXPECT_EQ(f.get(), errc::wrong_type);
  }
  EXPECT_EQ(raw()({"HGETALL", "user:42"}).elements.size(), 4u) << "left as it was";
  EXPECT_EQ(raw()({"PTTL", "user:42"}).integer, -1);
  EXPECT_EQ(raw()({"LLEN", "redisson_lock_queue:{user:42}"}).integer, 0) << "the fair attempt queued nobody";
}

// The rule looks only at hashes without expiry, which a lock never is: a real lock whose TTL
// someone removed still excludes (it is a lock: an unlock frees it), and so does a Redisson holder's
// hash, or a read-write lock's.
TEST_F(bad_input_test, a_lock_hash_without_expiry_is_still_a_held_lock) {
  client c{cfg()};
  raw()({"HSET", "persisted", "8743c9c0-0795-4907-87fd-6c719a6b4586:1", "2"});
  raw()({"HSET", "rw-persisted", "mode", "write", "8743c9c0-0795-4907-87fd-6c719a6b4586:1:write", "1"});
  for (const char* name : {"persisted", "rw-persisted"}) {
    SCOPED_TRACE(name);
    for (auto l : {detail::lock_handle(c.lock(name)), detail::lock_handle(c.fair_lock(name)),
                   detail::lock_handle(c.write_lock(name))}) {
      std::error_code ec;
      EXPECT_FALSE(l.try_lock(100ms, ec));
      EXPECT_FALSE(ec) << ec.message();
    }
  }
  // A hash with a TTL is judged by nobody: it expires.
  raw()({"HSET", "expiring", "name", "bob"});
  raw()({"PEXPIRE", "expiring", "60000"});
  std::error_code ec;
  EXPECT_FALSE(c.lock("expiring").try_lock(100ms, ec));
  EXPECT_FALSE(ec) << ec.message();
}

TEST_F(bad_input_test, a_held_lock_whose_key_became_another_type_is_lost_at_its_unlock) {
  client c(cfg());
  for (const char* kind : {"reentrant", "mutex", "fair", "read", "write"}) {
    SCOPED_TRACE(kind);
    const std::string k = kind, n = std::string("wt-") + kind;
    auto l = lock_of_kind(c, k, n);
    std::promise<lost_reason> lost;
    l.on_lost([&](const lost_info& i) { lost.set_value(i.reason); });
    l.lock();
    raw()({"DEL", n});
    raw()({"RPUSH", n, "not a lock"});
    std::error_code ec;
    l.unlock(ec);
    EXPECT_EQ(ec, errc::lock_lost) << ec.message();
    auto f = lost.get_future();
    ASSERT_EQ(f.wait_for(2s), std::future_status::ready) << "on_lost did not run";
    EXPECT_EQ(f.get(), lost_reason::taken);
    EXPECT_EQ(c.stats().held_locks, 0u);
    raw()({"DEL", n});
    EXPECT_TRUE(l.try_lock(0ms, ec)) << ec.message();  // the owner starts afresh
    l.unlock();
    l.on_lost(nullptr);
  }
  // WRONGTYPE from another key the release reads first (a fair lock's queue) leaves the hold as it is:
  // the lock's own key is still this owner's. The unlock says wrong_type; once the queue is mended,
  // it releases.
  auto f = c.fair_lock("wt-queue");
  bool lost = false;
  f.on_lost([&](const lost_info&) { lost = true; });
  f.lock();
  raw()({"SET", "redisson_lock_queue:{wt-queue}", "not a queue"});
  std::error_code ec;
  f.unlock(ec);
  EXPECT_EQ(ec, errc::wrong_type) << ec.message();
  EXPECT_NE(last_error_text().find("WRONGTYPE"), std::string::npos) << last_error_text();
  EXPECT_TRUE(f.valid());
  EXPECT_EQ(c.stats().held_locks, 1u);
  raw()({"DEL", "redisson_lock_queue:{wt-queue}"});
  f.unlock(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(raw()({"EXISTS", "wt-queue"}).integer, 0);
  EXPECT_FALSE(lost);
  f.on_lost(nullptr);
}

}  // namespace
}  // namespace redlease::test
