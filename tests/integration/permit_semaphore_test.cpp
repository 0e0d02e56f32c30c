// SPDX-License-Identifier: MIT
// redlease::permit_semaphore against real redis-server: Redisson's RPermitExpirableSemaphore layout,
// leases on the server's clock, permits kept by the watchdog and reported when lost (a holder
// process killed or frozen), exactly-once releases across a lost reply, and interoperation with a
// Redisson peer (its scripts as raw EVALs, with its client-clock "now").
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/use_future.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

// Redisson 4.7.0's RedissonPermitExpirableSemaphore tryAcquire, as the Java side sends it:
// KEYS name, {name}:timeout, channel; ARGV count, expiry (epoch ms), now, the no-lease score,
// publish command, ids (raw bytes).
const char* java_try_acquire =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); "
    "if #expiredIds > 0 then redis.call('zrem', KEYS[2], unpack(expiredIds)); "
    "local value = redis.call('incrby', KEYS[1], #expiredIds); "
    "if tonumber(value) > 0 then redis.call(ARGV[5], KEYS[3], value); end; end; "
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "redis.call('decrby', KEYS[1], ARGV[1]); "
    "for i = 6, #ARGV, 1 do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); end; "
    "local ttl = redis.call('pttl', KEYS[1]); if ttl > 0 then redis.call('pexpire', KEYS[2], ttl); end; "
    "return 'OK'; end; "
    "local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); "
    "if v[1] ~= nil and v[2] ~= ARGV[4] then return ':' .. tostring(v[2]); end return nil;";
// Its tryRelease(id): KEYS name, channel, {name}:timeout; ARGV id, 1, now, publish command.
const char* java_try_release =
    "local expire = redis.call('zscore', KEYS[3], ARGV[1]); local removed = redis.call('zrem', KEYS[3], ARGV[1]); "
    "if tonumber(removed) ~= 1 then return 0; end; "
    "local value = redis.call('incrby', KEYS[1], ARGV[2]); redis.call(ARGV[4], KEYS[2], value); "
    "if tonumber(expire) <= tonumber(ARGV[3]) then return 0; end; return 1;";

std::string raw_id(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

long long epoch_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class permit_semaphore_test : public lock_fixture {
 protected:
  static std::string zset(const std::string& name) { return "{" + name + "}:timeout"; }
  static std::string channel_of(const std::string& name) { return "redisson_sc:{" + name + "}"; }
  long long server_ms() {
    auto t = raw()({"TIME"});
    return std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
  }
  // A Redisson client taking one permit with `lease_ms` (-1: none) on its own clock, shifted by
  // `skew_ms`. Its reply: "OK", ":<nearest expiry>", or nil.
  raw_reply java_acquire(const std::string& name, const std::string& id_hex, long long lease_ms, long long skew_ms = 0) {
    const long long now = epoch_now() + skew_ms;
    const long long expiry = lease_ms < 0 ? 922337203685477LL : now + lease_ms;
    return raw().command({"EVAL", java_try_acquire, "3", name, zset(name), channel_of(name), "1", std::to_string(expiry),
                          std::to_string(now), "922337203685477", "publish", raw_id(id_hex)});
  }
  long long java_release(const std::string& name, const std::string& id_hex) {
    return raw().command({"EVAL", java_try_release, "3", name, channel_of(name), zset(name), raw_id(id_hex), "1",
                          std::to_string(epoch_now()), "publish"}).integer;
  }
};

// The layout: ids of 16 bytes scored by expiry on the server's clock, the counts, the listing, and a
// release that gives the permits back.
TEST_F(permit_semaphore_test, layout_and_accounting_match_redissons) {
  client c{cfg()};
  auto s = c.permit_semaphore("pes");
  EXPECT_EQ(s.available_permits(), 0);
  ASSERT_TRUE(s.try_set_permits(3));
  EXPECT_FALSE(s.try_set_permits(5));
  auto p = s.try_acquire(2, 0ms, 10000ms);
  ASSERT_TRUE(p);
  EXPECT_EQ(p.count(), 2);
  auto ids = p.ids();
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0].size(), 32u);
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_EQ(raw()({"GET", "pes"}).str, "1");
  EXPECT_EQ(raw()({"ZCARD", zset("pes")}).integer, 2);
  const long long now = server_ms();
  for (const auto& id : ids) {
    auto score = raw()({"ZSCORE", zset("pes"), raw_id(id)});
    ASSERT_TRUE(score.is_string()) << id;
    const long long expiry = std::stoll(score.str);
    EXPECT_GT(expiry, now + 8000);
    EXPECT_LE(expiry, now + 10000);
  }
  EXPECT_EQ(s.available_permits(), 1);
  EXPECT_EQ(s.acquired_permits(), 2);
  auto listed = s.permits();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_GT(listed[0].lease_ms, 8000);
  EXPECT_FALSE(s.try_acquire(2, 0ms));  // one left
  p.release();
  EXPECT_FALSE(p);
  EXPECT_EQ(s.available_permits(), 3);
  EXPECT_EQ(raw()({"ZCARD", zset("pes")}).integer, 0);
  std::error_code ec;
  p.release(ec);
  EXPECT_EQ(ec, errc::not_owner);
  // setPermits: the total moves, the available count by the difference, below 0 while permits are out.
  auto q = s.acquire(2);
  EXPECT_EQ(s.set_permits(1), -1);
  q.release();
  EXPECT_EQ(s.available_permits(), 1);
}

// A permit without a lease is kept by the watchdog well past the watchdog timeout; one with a lease
// expires and is reclaimed by the next call, and its holder hears lock_lost on release.
TEST_F(permit_semaphore_test, the_watchdog_keeps_a_permit_and_a_lease_ends_one) {
  client c{cfg(600ms)};
  auto s = c.permit_semaphore("kept");
  ASSERT_TRUE(s.try_set_permits(2));
  auto kept = s.acquire(1);
  auto leased = s.acquire(1, 300ms);
  const auto leased_until = leased.valid_until();
  EXPECT_LE(leased_until, steady::now() + 300ms);
  std::this_thread::sleep_for(1800ms);  // three watchdog timeouts: the time under test
  EXPECT_TRUE(kept.valid());
  EXPECT_FALSE(leased.valid());
  EXPECT_EQ(s.available_permits(), 1);  // the leased one was reclaimed
  EXPECT_EQ(s.acquired_permits(), 1);
  auto score = raw()({"ZSCORE", zset("kept"), raw_id(kept.ids()[0])});
  ASSERT_TRUE(score.is_string());
  EXPECT_GT(std::stoll(score.str), server_ms() + 100);
  std::error_code ec;
  leased.release(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  EXPECT_EQ(s.available_permits(), 1);  // nothing given back twice
  kept.release();
  EXPECT_EQ(s.available_permits(), 2);
}

// A permit released by id by someone else (Redisson's tryRelease(ids)) is lost to its holder, who is
// told within an interval: on_lost and the stop token.
TEST_F(permit_semaphore_test, a_permit_taken_away_is_reported_lost) {
  client c{cfg(600ms)};
  auto s = c.permit_semaphore("taken");
  ASSERT_TRUE(s.try_set_permits(1));
  auto p = s.acquire(1);
  std::promise<lost_info> told;
  p.on_lost([&](const lost_info& i) { told.set_value(i); });
  auto token = p.lost_token();
  const auto ids = p.ids();
  ASSERT_TRUE(s.try_release(ids));
  EXPECT_FALSE(s.try_release(ids));  // all or nothing: gone now
  auto f = told.get_future();
  ASSERT_EQ(f.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(f.get().reason, lost_reason::deleted);
  EXPECT_TRUE(token.stop_requested());
  EXPECT_FALSE(p.valid());
  EXPECT_EQ(s.available_permits(), 1);
}

// update_lease_time: an unknown id is false; a permit's lease set short ends it.
TEST_F(permit_semaphore_test, update_lease_time_moves_a_permits_expiry) {
  client c{cfg()};
  auto s = c.permit_semaphore("upd");
  ASSERT_TRUE(s.try_set_permits(1));
  EXPECT_FALSE(s.update_lease_time("00112233445566778899aabbccddeeff", 1000ms));
  std::error_code ec;
  EXPECT_FALSE(s.update_lease_time("not-an-id", 1000ms, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  auto p = s.try_acquire(1, 0ms, 60000ms);
  ASSERT_TRUE(p);
  EXPECT_TRUE(s.update_lease_time(p.ids()[0], 200ms));
  ASSERT_TRUE(eventually([&] { return s.available_permits() == 1; }, 5000ms));
  EXPECT_TRUE(s.update_lease_time("00112233445566778899aabbccddeeff", std::nullopt) == false);
}

// Both directions with a Redisson peer: its leased permit is reclaimed by our acquisition when it
// expires (our waiter wakes at the expiry, not at a poll), ours by its tryAcquire, and it releases
// our permit by the id we show.
TEST_F(permit_semaphore_test, interop_with_a_redisson_peer) {
  client c{cfg(1500ms)};
  auto s = c.permit_semaphore("shared:pes");
  ASSERT_TRUE(s.try_set_permits(1));
  auto r = java_acquire("shared:pes", "0123456789abcdef0123456789abcdef", 700);
  ASSERT_TRUE(r.is_string());
  EXPECT_EQ(r.str, "OK");
  EXPECT_EQ(s.available_permits(), 0);
  const auto t0 = steady::now();
  auto ours = s.try_acquire(1, 10s);
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0);
  ASSERT_TRUE(ours);
  EXPECT_GE(waited.count(), 450);
  EXPECT_LT(waited.count(), 3000);
  // Its tryAcquire sees ours, and the nearest expiry of our watchdog permit.
  r = java_acquire("shared:pes", "fedcba9876543210fedcba9876543210", -1);
  ASSERT_TRUE(r.is_string());
  EXPECT_EQ(r.str.substr(0, 1), ":");
  // It releases our permit by its id; our holder then hears of the loss.
  std::promise<void> told;
  ours.on_lost([&](const lost_info&) { told.set_value(); });
  EXPECT_EQ(java_release("shared:pes", ours.ids()[0]), 1);
  EXPECT_EQ(told.get_future().wait_for(5s), std::future_status::ready);
  // Ours with a short lease, reclaimed by its tryAcquire once expired.
  auto brief = s.try_acquire(1, 0ms, 200ms);
  ASSERT_TRUE(brief);
  ASSERT_TRUE(eventually([&] {
    return java_acquire("shared:pes", "00000000000000000000000000000001", -1).str == "OK";
  }, 5000ms));
  EXPECT_EQ(raw()({"GET", "shared:pes"}).str, "0");
}

// A release whose reply is lost ran once: sent again, it finds its permits gone and the engine reads
// that as its first sending having run. The count is right, the holder is not told of a loss.
TEST_F(permit_semaphore_test, a_release_whose_reply_is_lost_gives_back_once) {
  fault_proxy proxy(server().port());
  auto conf = cfg();
  conf.port = proxy.port();
  conf.sync_lane = false;
  client c{conf};
  auto s = c.permit_semaphore("lost:release");
  ASSERT_TRUE(s.try_set_permits(3));
  auto p = s.acquire(2);
  proxy.lose_next_reply();
  p.release();
  EXPECT_EQ(proxy.replies_lost(), 1u);
  EXPECT_EQ(raw()({"GET", "lost:release"}).str, "3");
  EXPECT_EQ(raw()({"ZCARD", zset("lost:release")}).integer, 0);
}

// An acquisition whose reply is lost (its permits taken) is undone: the permits come back once.
TEST_F(permit_semaphore_test, an_acquisition_whose_reply_is_lost_is_given_back) {
  fault_proxy proxy(server().port());
  auto conf = cfg();
  conf.port = proxy.port();
  conf.sync_lane = false;
  client c{conf};
  auto s = c.permit_semaphore("lost:acquire");
  ASSERT_TRUE(s.try_set_permits(3));
  proxy.lose_next_reply();
  std::error_code ec;
  auto p = s.try_acquire(2, 0ms, std::nullopt, ec);
  EXPECT_FALSE(p);
  EXPECT_EQ(ec, errc::connection_lost) << ec.message();
  ASSERT_TRUE(eventually([&] { return raw()({"GET", "lost:acquire"}).str == "3"; }));
  EXPECT_EQ(raw()({"ZCARD", zset("lost:acquire")}).integer, 0);
}

// A waiter for 3 permits among waiters for 1 is served as soon as 3 are free.
TEST_F(permit_semaphore_test, a_waiter_for_three_is_served_when_three_are_free) {
  client c{cfg()};
  auto s = c.permit_semaphore("three");
  ASSERT_TRUE(s.try_set_permits(3));
  auto all = s.acquire(3);
  auto big = std::async(std::launch::async, [&] { return s.try_acquire(3, 10s); });
  std::this_thread::sleep_for(100ms);  // the big waiter waits first (its order is what is tested)
  // A waiter for 1 that comes later may slip in first (no queue, as Redisson's): it gives its
  // permit straight back, and the release's message serves the waiter for 3.
  auto small = std::async(std::launch::async, [&] {
    auto p = s.try_acquire(1, 300ms);
    return static_cast<bool>(p);  // released here
  });
  const auto t0 = steady::now();
  all.release();
  auto got = big.get();
  EXPECT_TRUE(got);
  EXPECT_EQ(got.count(), 3);
  EXPECT_LT(steady::now() - t0, 2000ms);
  small.get();
}

// Holder processes: one killed holding a watchdog permit gives it back within one lease; one frozen
// past its lease loses it to another holder and is told when it resumes.
TEST_F(permit_semaphore_test, a_killed_holder_gives_back_and_a_frozen_one_is_told) {
  const std::string url = server().url();
  client c{cfg()};
  auto s = c.permit_semaphore("procs");
  ASSERT_TRUE(s.try_set_permits(1));
  {
    child_process killed({PERMIT_WORKER_PATH, url, "procs", "1000"});
    ASSERT_TRUE(killed.read_line_starting("held ", 10s));
    EXPECT_FALSE(s.try_acquire(1, 0ms));
    killed.kill_now();
    const auto t0 = steady::now();
    auto p = s.try_acquire(1, 10s);
    ASSERT_TRUE(p);
    EXPECT_LT(steady::now() - t0, 1000ms + 1500ms);  // one lease, and a poll cap, with room
    p.release();
  }
  child_process frozen({PERMIT_WORKER_PATH, url, "procs", "1000"});
  ASSERT_TRUE(frozen.read_line_starting("held ", 10s));
  ASSERT_TRUE(frozen.freeze());
  auto p = s.try_acquire(1, 10s);  // after its lease: reclaimed
  ASSERT_TRUE(p);
  ASSERT_TRUE(frozen.thaw());
  auto lost = frozen.read_line_starting("lost ", 10s);
  ASSERT_TRUE(lost) << "the frozen holder was not told";
  frozen.close_stdin();
  auto st = frozen.wait_exit(10s);
  ASSERT_TRUE(st);
  EXPECT_EQ(WEXITSTATUS(*st), 3);
  p.release();
  EXPECT_EQ(s.available_permits(), 1);
}

// The async calls: a wait completed by an async release with a permit, and a cancelled wait that
// takes nothing.
TEST_F(permit_semaphore_test, async_acquire_release_and_cancellation) {
  client c{cfg()};
  auto s = c.permit_semaphore("async:pes");
  ASSERT_TRUE(s.try_set_permits(1));
  auto first = s.async_try_acquire(1, 0ms, std::nullopt, asio::use_future).get();
  ASSERT_TRUE(first);
  auto waiting = s.async_try_acquire(1, std::nullopt, std::nullopt, asio::use_future);
  EXPECT_EQ(waiting.wait_for(200ms), std::future_status::timeout);
  s.async_release(std::move(first), asio::use_future).get();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  auto second = waiting.get();
  ASSERT_TRUE(second);
  EXPECT_TRUE(second.valid());
  // A cancelled wait completes with operation_aborted and leaves the count alone.
  asio::cancellation_signal cancel;
  std::promise<std::error_code> done;
  s.async_try_acquire(1, std::nullopt, std::nullopt,
                      asio::bind_cancellation_slot(cancel.slot(), [&](std::error_code ec, permit p) {
                        EXPECT_FALSE(p);
                        done.set_value(ec);
                      }));
  std::this_thread::sleep_for(100ms);  // the wait has begun (what is cancelled is a wait)
  cancel.emit(asio::cancellation_type::terminal);
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(f.get(), errc::operation_aborted);
  second.release();
  EXPECT_EQ(s.available_permits(), 1);
}

// Bad input: counts and durations out of range are refused before anything is sent.
TEST_F(permit_semaphore_test, bad_arguments_are_refused) {
  client c{cfg()};
  auto s = c.permit_semaphore("bad");
  std::error_code ec;
  EXPECT_FALSE(s.try_acquire(0, 0ms, std::nullopt, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  ec.clear();
  EXPECT_FALSE(s.try_acquire(1, 0ms, 0ms, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  ec.clear();
  EXPECT_FALSE(s.try_set_permits(-1, std::nullopt, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  ec.clear();
  std::vector<std::string> none;
  EXPECT_FALSE(s.try_release(none, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_THROW(c.permit_semaphore(""), error);
  raw()({"HSET", "bad", "f", "1"});
  ec.clear();
  EXPECT_FALSE(s.try_acquire(1, 0ms, std::nullopt, ec));
  EXPECT_TRUE(ec) << "a hash in the semaphore's place";
}

// The async forms of the other calls: each completes with the value the server shows, through a
// future and through a plain callback that never runs inside its initiating call; bad arguments and
// a closed client complete with their errors, asynchronously too.
TEST_F(permit_semaphore_test, async_queries_and_updates) {
  using entries = std::vector<permit_entry>;
  client c{cfg()};
  auto s = c.permit_semaphore("async:pq");
  EXPECT_EQ(s.async_available_permits(asio::use_future).get(), 0);
  EXPECT_TRUE(s.async_try_set_permits(3, std::nullopt, asio::use_future).get());
  EXPECT_FALSE(s.async_try_set_permits(5, std::nullopt, asio::use_future).get());  // once only
  EXPECT_EQ(raw()({"GET", "async:pq"}).str, "3");
  EXPECT_EQ(s.async_add_permits(2, asio::use_future).get(), 5);
  EXPECT_EQ(raw()({"GET", "async:pq"}).str, "5");
  EXPECT_EQ(value_by_callback<long long>([&](auto h) { s.async_add_permits(-1, std::move(h)); }), 4);
  EXPECT_EQ(raw()({"GET", "async:pq"}).str, "4");

  auto p = s.try_acquire(2, 0ms, 60000ms);
  ASSERT_TRUE(p);
  auto ids = p.ids();
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(s.async_available_permits(asio::use_future).get(), 2);
  EXPECT_EQ(value_by_callback<long long>([&](auto h) { s.async_available_permits(std::move(h)); }), 2);
  EXPECT_EQ(s.async_acquired_permits(asio::use_future).get(), 2);
  EXPECT_EQ(value_by_callback<long long>([&](auto h) { s.async_acquired_permits(std::move(h)); }), 2);
  auto listed = value_by_callback<entries>([&](auto h) { s.async_permits(10, std::move(h)); });
  ASSERT_EQ(listed.size(), 2u);
  std::vector<std::string> listed_ids{listed[0].id, listed[1].id};
  std::sort(listed_ids.begin(), listed_ids.end());
  auto held_ids = ids;
  std::sort(held_ids.begin(), held_ids.end());
  EXPECT_EQ(listed_ids, held_ids);
  EXPECT_GT(listed[0].lease_ms, 50000);
  EXPECT_LE(listed[1].lease_ms, 60000);
  EXPECT_EQ(s.async_permits(1, asio::use_future).get().size(), 1u);

  // update_lease_time moves the zset's score: a longer lease, then none; an unknown id is false.
  EXPECT_TRUE(value_by_callback<bool>([&](auto h) { s.async_update_lease_time(ids[0], 200000ms, std::move(h)); }));
  EXPECT_GT(std::stoll(raw()({"ZSCORE", zset("async:pq"), raw_id(ids[0])}).str), server_ms() + 150000);
  EXPECT_TRUE(s.async_update_lease_time(ids[1], std::nullopt, asio::use_future).get());
  EXPECT_EQ(raw()({"ZSCORE", zset("async:pq"), raw_id(ids[1])}).str, "922337203685477");
  EXPECT_FALSE(s.async_update_lease_time("00112233445566778899aabbccddeeff", 1000ms, asio::use_future).get());

  // set_permits: the total (available plus out) becomes 6, with 2 out.
  EXPECT_EQ(value_by_callback<long long>([&](auto h) { s.async_set_permits(6, std::move(h)); }), 4);
  EXPECT_EQ(raw()({"GET", "async:pq"}).str, "4");
  EXPECT_EQ(s.async_set_permits(5, asio::use_future).get(), 3);

  // try_release of the permit's ids: all given back once, then nothing.
  EXPECT_TRUE(value_by_callback<bool>([&](auto h) { s.async_try_release(ids, std::move(h)); }));
  EXPECT_FALSE(s.async_try_release(ids, asio::use_future).get());
  EXPECT_EQ(raw()({"ZCARD", zset("async:pq")}).integer, 0);
  EXPECT_EQ(s.async_available_permits(asio::use_future).get(), 5);
  EXPECT_EQ(s.async_acquired_permits(asio::use_future).get(), 0);

  // Bad arguments: refused asynchronously, nothing sent.
  EXPECT_EQ(error_by_callback<bool>([&](auto h) { s.async_update_lease_time("not-an-id", 1000ms, std::move(h)); }),
            errc::invalid_argument);
  EXPECT_EQ(error_by_callback<bool>([&](auto h) { s.async_try_release({}, std::move(h)); }), errc::invalid_argument);
  EXPECT_EQ(error_by_callback<long long>([&](auto h) { s.async_set_permits(-1, std::move(h)); }),
            errc::invalid_argument);
  EXPECT_EQ(error_by_callback<bool>([&](auto h) { s.async_try_set_permits(1, 0ms, std::move(h)); }),
            errc::invalid_argument);
  EXPECT_EQ(error_of(s.async_try_release({"zz"}, asio::use_future)), errc::invalid_argument);
  EXPECT_EQ(raw()({"GET", "async:pq"}).str, "5");

  // A closed client: client_closed, asynchronously as well.
  client closing{cfg()};
  auto cs = closing.permit_semaphore("async:pq");
  closing.close();
  EXPECT_EQ(error_by_callback<long long>([&](auto h) { cs.async_acquired_permits(std::move(h)); }),
            errc::client_closed);
  EXPECT_EQ(error_of(cs.async_permits(10, asio::use_future)), errc::client_closed);
}

}  // namespace
}  // namespace redlease::test
