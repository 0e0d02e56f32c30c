// SPDX-License-Identifier: MIT
// The connection core's internals (detail::connection, detail::subscriber) against a real
// redis-server, where the public API cannot steer the moment that matters: a write still out when
// the next command comes.

#include <gtest/gtest.h>

#include <asio/io_context.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "net/subscriber.hpp"
#include "redis_fixture.hpp"
#include "redlease/config.hpp"

namespace redlease::test {
namespace {

using namespace std::chrono_literals;

struct quiet_listener : detail::subscriber::listener {
  void on_message(std::string_view, std::string_view) override {}
  void on_subscribed() override { ++confirmed; }
  std::size_t confirmed = 0;  // executor only
};

// Runs the executor until `done` or `limit` passes.
template <class Pred>
bool run_until(asio::io_context& io, Pred done, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    io.restart();
    io.run_for(5ms);
  }
  return true;
}

// A SUBSCRIBE (or PING) sent while an earlier write is parked on a full socket used to be appended
// to the very buffer that write points into: when it grew, the parked write sent freed memory
// (AddressSanitizer: heap-use-after-free in send_untracked). Now it waits in a buffer of its own and
// goes out after the parked write, in order.
TEST(connection_test, subscribes_sent_while_a_write_is_parked_go_out_after_it_intact) {
  REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  redis_server srv;
  asio::io_context io;
  auto cfg = config::from_url(srv.url());
  cfg.health_check_interval = 0ms;
  cfg.request_timeout = 60s;
  detail::subscriber sub(io.get_executor(), cfg);
  quiet_listener l;
  std::vector<std::string> names;
  auto add_batch = [&](int batch) {
    for (int i = 0; i < 20000; ++i) {
      names.push_back(std::string(190, 'c') + std::to_string(batch) + "-" + std::to_string(i));
      sub.add(names.back(), &l);
    }
  };
  sub.start();
  ASSERT_TRUE(run_until(io, [&] { return sub.conn().is_up(); }, 5000ms));

  // About 4 MB of SUBSCRIBEs per batch against a frozen server: the socket fills and the write parks.
  srv.pause();
  std::size_t sent = 0;
  for (int batch = 0; batch < 4; ++batch) {
    add_batch(batch);
    run_until(io, [] { return false; }, 100ms);
  }
  for (auto& n : names) sent += n.size();
  // The precondition of the test: writes were still out when later batches came.
  ASSERT_LT(sub.conn().stats().bytes_written.load(), sent);
  srv.resume();

  // Counted, not looked up: 80,000 lookups per poll starved the executor under TSan.
  bool all = run_until(io, [&] { return l.confirmed >= names.size(); }, 120000ms);
  EXPECT_TRUE(all) << l.confirmed << " of " << names.size() << " confirmed";
  for (auto* n : {&names.front(), &names[names.size() / 2], &names.back()}) EXPECT_TRUE(sub.confirmed(*n)) << *n;
  EXPECT_EQ(sub.conn().stats().connection_losses.load(), 0u);
  EXPECT_EQ(sub.conn().stats().protocol_errors.load(), 0u);
  auto rc = srv.client();
  auto numsub = rc({"PUBSUB", "NUMSUB", names.front(), names.back()});
  ASSERT_EQ(numsub.elements.size(), 4u);
  EXPECT_EQ(numsub.elements[1].integer, 1);
  EXPECT_EQ(numsub.elements[3].integer, 1);
  sub.close();
  io.restart();
  io.run_for(100ms);
}

}  // namespace
}  // namespace redlease::test
