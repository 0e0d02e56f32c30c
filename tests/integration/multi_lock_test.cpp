// SPDX-License-Identifier: MIT
// MultiLock (redlease::multi_lock) over two real redis-server processes: all or nothing, the loss
// of one member, mixed kinds, opposite orders, the async calls and misuse.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "lock_test_support.hpp"
#include "raw_client.hpp"
#include "redlease/multi_lock.hpp"

namespace redlease::test {
namespace {

using told_log = callback_log<multi_lost_info>;

class multi_lock_test : public redis_fixture {
 protected:
  void SetUp() override {
    redis_fixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    extra_ = start_servers(1);
    for (int i = 0; i < 2; ++i) raws_.push_back(std::make_unique<raw_client>(srv(i).client()));
  }
  void TearDown() override {
    raws_.clear();
    clients_.clear();
    extra_.clear();
    redis_fixture::TearDown();
  }
  redis_server& srv(int i) { return i == 0 ? server() : *extra_.at(0); }
  raw_client& raw(int i) { return *raws_.at(i); }
  // A new client on server `i` (0: A, 1: B), with a 1 s watchdog: renewals every third of it.
  client& make_client(int i) {
    clients_.push_back(std::make_unique<client>(short_timeouts(srv(i), 1000ms)));
    clients_.back()->ping();
    return *clients_.back();
  }
  // `name` on server `i`, locked by a client of its own (another holder).
  detail::lock_handle held_elsewhere(int i, const std::string& name) {
    auto h = make_client(i).lock(name);
    h.lock();
    return h;
  }
  bool exists(int i, const std::string& key) { return raw(i)({"EXISTS", key}).integer == 1; }
  // True once `key` is gone on server `i`, within `limit` (far below any lease it could have).
  bool gone(int i, const std::string& key, std::chrono::milliseconds limit = 500ms) {
    return eventually([&] { return !exists(i, key); }, limit);
  }

  std::vector<std::unique_ptr<redis_server>> extra_;
  std::vector<std::unique_ptr<client>> clients_;
  std::vector<std::unique_ptr<raw_client>> raws_;
};

TEST_F(multi_lock_test, a_reentrant_lock_on_a_and_a_read_lock_on_b_all_or_nothing) {
  client& a = make_client(0);
  client& b = make_client(1);
  multi_lock ml({a.lock("mx:a"), b.read_lock("mx:b")});
  ASSERT_TRUE(ml.try_lock());
  EXPECT_TRUE(ml.valid());
  EXPECT_EQ(raw(0)({"HLEN", "mx:a"}).integer, 1);
  EXPECT_EQ(raw(1)({"HGET", "mx:b", "mode"}).str, "read");
  ml.unlock();
  EXPECT_FALSE(ml.valid());
  EXPECT_FALSE(exists(0, "mx:a"));
  EXPECT_FALSE(exists(1, "mx:b"));

  // B's name write-locked by another client: refused within the wait, and nothing of ours left on
  // A (the 1 s lease is renewed while held, so a key left behind would stay: released, not expired).
  client& other = make_client(1);
  auto writer = other.write_lock("mx:b");
  writer.lock();
  auto t0 = steady::now();
  std::error_code ec;
  EXPECT_FALSE(ml.try_lock(300ms, ec));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_GE(ms_since(t0), 290);
  EXPECT_LT(ms_since(t0), 3000);
  EXPECT_TRUE(gone(0, "mx:a")) << raw(0)({"HGETALL", "mx:a"});
  EXPECT_EQ(raw(1)({"HGET", "mx:b", "mode"}).str, "write");
  EXPECT_FALSE(ml.valid());
  // Once the writer is gone, granted.
  writer.unlock();
  ASSERT_TRUE(ml.try_lock(2000ms));
  ml.unlock();
}

TEST_F(multi_lock_test, losing_one_member_is_losing_the_multi_lock) {
  client& a = make_client(0);
  client& b = make_client(1);
  auto user_handle = a.lock("loss:a");
  std::atomic<int> user_told{0};
  user_handle.on_lost([&](const lost_info&) { ++user_told; });  // the user's own callback stays theirs
  multi_lock ml({user_handle, b.lock("loss:b")});
  told_log log;
  ml.on_lost(log.hook());
  ml.lock();
  auto token = ml.lost_token();
  EXPECT_FALSE(token.stop_requested());
  EXPECT_GT(ml.valid_until(), steady::now() + 300ms);
  ASSERT_EQ(raw(0)({"DEL", "loss:a"}).integer, 1);
  // The next renewal (every third of the 1 s lease) finds it gone.
  ASSERT_TRUE(eventually([&] { return log.count() > 0; }, 3000ms));
  auto info = log.at(0);
  EXPECT_EQ(info.member, 0u);
  EXPECT_EQ(info.name, "loss:a");
  EXPECT_EQ(info.kind, lock_kind::reentrant);
  EXPECT_EQ(info.reason, lost_reason::deleted);
  EXPECT_TRUE(token.stop_requested());
  EXPECT_FALSE(ml.valid());
  EXPECT_EQ(ml.valid_until(), steady::time_point::min());
  EXPECT_TRUE(gone(1, "loss:b"));  // the other member released at once (its lease would be renewed)
  std::error_code ec;
  ml.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  EXPECT_EQ(log.count(), 1u);
  EXPECT_EQ(user_told.load(), 0);

  // Taken: member 1 overwritten by another holder while held.
  ASSERT_TRUE(ml.try_lock(1000ms));
  ASSERT_EQ(raw(1)({"DEL", "loss:b"}).integer, 1);
  ASSERT_EQ(raw(1)({"HSET", "loss:b", "someone-else:1", "1"}).integer, 1);
  ASSERT_TRUE(eventually([&] { return log.count() > 1; }, 3000ms));
  EXPECT_EQ(log.at(1).member, 1u);
  EXPECT_EQ(log.at(1).name, "loss:b");
  EXPECT_EQ(log.at(1).reason, lost_reason::taken);
  EXPECT_TRUE(gone(0, "loss:a"));
  EXPECT_EQ(raw(1)({"HGET", "loss:b", "someone-else:1"}).str, "1");  // theirs, left alone
  ml.unlock(ec);
  EXPECT_EQ(ec, errc::lock_lost);
  EXPECT_EQ(log.count(), 2u);
}

TEST_F(multi_lock_test, mixed_kinds_with_a_mutex_and_a_fair_lock) {
  client& a = make_client(0);
  client& b = make_client(1);
  multi_lock ml({a.mutex("mix:m"), b.fair_lock("mix:f"), a.write_lock("mix:w"), b.lock("mix:r")});
  EXPECT_EQ(ml.size(), 4u);
  EXPECT_EQ(ml.name(1), "mix:f");
  EXPECT_EQ(ml.kind(0), lock_kind::mutex);
  EXPECT_EQ(ml.kind(2), lock_kind::write);
  ml.lock();
  EXPECT_TRUE(ml.valid());
  EXPECT_TRUE(raw(0)({"GET", "mix:m"}).is_string());
  EXPECT_EQ(raw(1)({"HLEN", "mix:f"}).integer, 1);
  EXPECT_EQ(raw(0)({"HGET", "mix:w", "mode"}).str, "write");
  EXPECT_EQ(raw(1)({"HLEN", "mix:r"}).integer, 1);
  // Another holder of the mutex alone is refused while we hold it.
  client& other = make_client(0);
  EXPECT_FALSE(other.mutex("mix:m").try_lock());
  ml.unlock();  // waits for every member's release
  EXPECT_FALSE(exists(0, "mix:m"));
  EXPECT_FALSE(exists(1, "mix:f"));
  EXPECT_FALSE(exists(0, "mix:w"));
  EXPECT_FALSE(exists(1, "mix:r"));
  EXPECT_FALSE(ml.valid());
}

TEST_F(multi_lock_test, opposite_orders_neither_deadlock_nor_overlap) {
  // Thread 1 takes {x on A, y on B}, thread 2 {y on B, x on A}, each through clients of its own.
  client& a1 = make_client(0);
  client& b1 = make_client(1);
  client& a2 = make_client(0);
  client& b2 = make_client(1);
  multi_lock one({a1.lock("ord:x"), b1.lock("ord:y")});
  multi_lock two({b2.lock("ord:y"), a2.lock("ord:x")});
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::atomic<int> rounds{0};
  auto run = [&](multi_lock& ml) {
    for (int r = 0; r < 10; ++r) {
      ml.lock();
      if (inside.fetch_add(1) != 0) overlap = true;
      std::this_thread::sleep_for(2ms);  // the critical section's work, not a synchronisation
      inside.fetch_sub(1);
      ml.unlock();
      ++rounds;
    }
  };
  auto t0 = steady::now();
  std::thread t1([&] { run(one); });
  std::thread t2([&] { run(two); });
  t1.join();
  t2.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(rounds.load(), 20);
  EXPECT_LT(ms_since(t0), 15000);
  EXPECT_FALSE(exists(0, "ord:x"));
  EXPECT_FALSE(exists(1, "ord:y"));
}

// While one member is held by someone else, the multi lock gives the others back between its
// attempts: a plain waiter on one of them gets it within about one attempt's budget.
TEST_F(multi_lock_test, waiting_for_one_member_does_not_keep_the_others) {
  auto y_holder = held_elsewhere(1, "wt:y");
  multi_lock ml({make_client(0).lock("wt:x"), make_client(1).lock("wt:y")});
  auto result = ml.async_try_lock(5000ms, asio::use_future);
  auto x_waiter = make_client(0).lock("wt:x");
  auto t0 = steady::now();
  ASSERT_TRUE(x_waiter.try_lock(2000ms));  // the multi lock let go of x between attempts
  EXPECT_LT(ms_since(t0), 1000);
  x_waiter.unlock();
  y_holder.unlock();
  EXPECT_TRUE(result.get());  // then granted, within its wait
  EXPECT_TRUE(ml.valid());
  ml.unlock();
}

TEST_F(multi_lock_test, a_member_error_ends_the_attempt_and_releases_the_granted) {
  client& a = make_client(0);
  client& b = make_client(1);
  ASSERT_TRUE(raw(1)({"SET", "er:b", "a string, not a lock hash"}).is_ok());
  multi_lock ml({a.lock("er:a"), b.lock("er:b")});
  auto t0 = steady::now();
  std::error_code ec;
  EXPECT_FALSE(ml.try_lock(5000ms, ec));
  EXPECT_EQ(ec, errc::wrong_type);
  EXPECT_LT(ms_since(t0), 2000);  // not retried until the wait ends
  EXPECT_TRUE(gone(0, "er:a"));
  EXPECT_EQ(raw(1)({"GET", "er:b"}).str, "a string, not a lock hash");

  client& c = make_client(1);
  multi_lock closing({a.lock("er:a"), c.lock("er:c")});
  c.close();
  EXPECT_FALSE(closing.try_lock(1000ms, ec));
  EXPECT_EQ(ec, errc::client_closed);
  EXPECT_TRUE(gone(0, "er:a"));
  EXPECT_FALSE(exists(1, "er:c"));
}

TEST_F(multi_lock_test, async_calls_complete_outside_the_initiating_call) {
  client& a = make_client(0);
  client& b = make_client(1);
  multi_lock ml({a.lock("as:a"), b.lock("as:b")});
  bool inline_call = true;
  auto [ec, ok] = complete_outside_call<bool>([&](auto h) { ml.async_try_lock(1000ms, h); }, inline_call);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(ok);
  EXPECT_FALSE(inline_call);
  EXPECT_TRUE(ml.valid());
  EXPECT_THROW(ml.async_try_lock(0ms, asio::use_future).get(), std::system_error);  // would_deadlock
  auto unlocked = complete_outside_call<bool>(
      [&](auto h) { ml.async_unlock([h](std::error_code e) mutable { h(e, true); }); }, inline_call);
  EXPECT_FALSE(unlocked.first);
  EXPECT_FALSE(inline_call);
  EXPECT_FALSE(ml.valid());
  EXPECT_FALSE(exists(0, "as:a"));
  EXPECT_FALSE(exists(1, "as:b"));
  EXPECT_THROW(ml.async_unlock(asio::use_future).get(), std::system_error);  // not_owner
  EXPECT_TRUE(ml.async_try_lock(0ms, asio::use_future).get());
  ml.async_unlock(asio::use_future).get();
}

TEST_F(multi_lock_test, a_cancelled_async_acquisition_leaves_nothing) {
  auto holder = held_elsewhere(1, "cx:b");
  multi_lock ml({make_client(0).lock("cx:a"), make_client(1).lock("cx:b")});
  asio::cancellation_signal sig;
  std::promise<std::pair<std::error_code, bool>> got;
  auto t0 = steady::now();
  ml.async_try_lock(10000ms, asio::bind_cancellation_slot(sig.slot(), [&](std::error_code ec, bool ok) {
                      got.set_value({ec, ok});
                    }));
  sig.emit(asio::cancellation_type::terminal);
  auto [ec, ok] = got.get_future().get();
  EXPECT_EQ(ec, errc::operation_aborted);
  EXPECT_FALSE(ok);
  EXPECT_LT(ms_since(t0), 3000);
  EXPECT_TRUE(gone(0, "cx:a"));
  EXPECT_FALSE(ml.valid());
  holder.unlock();
  EXPECT_TRUE(ml.try_lock(2000ms));  // the multi lock is usable again
  ml.unlock();
}

TEST_F(multi_lock_test, misuse) {
  client& a = make_client(0);
  client& b = make_client(1);
  try {
    multi_lock ml(std::vector<detail::lock_handle>{});
    ADD_FAILURE() << "an empty list was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  EXPECT_THROW(multi_lock({a.lock("mu:d"), a.lock("mu:d")}), error);
  EXPECT_THROW(multi_lock({a.read_lock("mu:d"), b.lock("mu:e"), a.write_lock("mu:d")}), error);
  multi_lock_options bad;
  bad.retry_first = 500ms;
  bad.retry_cap = 100ms;
  EXPECT_THROW(multi_lock({a.lock("mu:d")}, bad), error);
  multi_lock same_name({a.lock("mu:d"), b.lock("mu:d")});  // one name on two servers is fine
  EXPECT_EQ(same_name.size(), 2u);

  multi_lock ml({a.lock("mu:a"), b.lock("mu:b")});
  std::error_code ec;
  ml.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
  EXPECT_FALSE(ml.try_lock(-1ms, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  ASSERT_TRUE(ml.try_lock());
  EXPECT_FALSE(ml.try_lock(ec));
  EXPECT_EQ(ec, errc::would_deadlock);
  ml.lock(ec);
  EXPECT_EQ(ec, errc::would_deadlock);
  EXPECT_TRUE(ml.valid());  // still held
  // A blocking call on a member client's I/O thread (a completion handler's) would deadlock.
  std::promise<std::error_code> on_io;
  b.async_command({"PING"}, [&](std::error_code, const reply&) {
    std::error_code e;
    ml.unlock(e);
    on_io.set_value(e);
  });
  EXPECT_EQ(on_io.get_future().get(), errc::would_deadlock);
  ml.unlock();
  ml.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
}

}  // namespace
}  // namespace redlease::test
