// SPDX-License-Identifier: MIT
// The lock layer over a fake topology, without a server: the engine hands the topology whole keyed
// requests and never sees which node served them. The fake re-routes every first send of a key (as
// a cluster topology follows a MOVED), answers from its "second node", and records what it was
// handed: the lock layer gets the grant as if nothing happened.
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "lock/lock_service.hpp"
#include "redlease/client_card.hpp"
#include "runtime/lock_runtime.hpp"

namespace redlease::detail {
namespace {

reply nil() { return reply{}; }
reply integer(long long v) {
  reply r;
  r.type = reply::kind::integer;
  r.integer = v;
  return r;
}

// What the fake was handed, and by which of its nodes it was answered.
struct sent {
  std::string key;
  keyed_request::kind what;
  std::string script;
  bool follows = false;
  bool always_eval = false;
  std::vector<std::string> nodes;  // the nodes it went to, in order
};

class fake_topology final : public topology {
 public:
  explicit fake_topology(asio::any_io_executor ex) : ex_(std::move(ex)) {}
  void start() override {}
  void close() override {}
  void exec(keyed_request r) override {
    log.push_back({std::string(r.key), r.what, r.script ? std::string(r.script->name) : std::string(), r.follows,
                   r.always_eval, {}});
    auto& entry = log.back();
    // The slot of a key seen for the first time is on node "b", though the table said "a": "a"
    // redirects, and the topology sends the same request to "b" (the lock layer is not told).
    const bool moved = seen_.insert(std::string(r.key)).second;
    if (moved) entry.nodes.push_back("a");
    entry.nodes.push_back("b");
    std::error_code ec = next_error;
    next_error.clear();
    reply answer = next_reply ? next_reply(entry) : nil();
    if (park) {  // answered when the test says (answer_parked)
      auto h = std::make_shared<decltype(r.handler)>(std::move(r.handler));  // move-only
      parked.push_back([h, ec, answer = std::move(answer)]() mutable { (*h)(ec, std::move(answer)); });
      return;
    }
    // Never inside the initiating function (Asio's rule, and the engine's expectation).
    asio::post(ex_, [h = std::move(r.handler), ec, answer = std::move(answer)]() mutable { h(ec, std::move(answer)); });
  }
  subscriber& sub_for(std::string_view) override { throw std::logic_error("no pub/sub in this test"); }
  void for_each_connection(const std::function<void(const connection&, bool)>&) const override {}
  void for_each_node(const std::function<void(const node&)>&) const override {}

  std::vector<sent> log;
  std::function<reply(const sent&)> next_reply;
  std::error_code next_error;
  // While set, replies wait in `parked` until answer_parked posts the first of them.
  bool park = false;
  std::vector<std::function<void()>> parked;
  void answer_parked(std::size_t i) {
    auto f = std::move(parked.at(i));
    parked.erase(parked.begin() + static_cast<std::ptrdiff_t>(i));
    asio::post(ex_, std::move(f));
  }

 protected:
  node& route(std::string_view) override { throw std::logic_error("the fake routes in exec"); }

 private:
  asio::any_io_executor ex_;
  std::set<std::string> seen_;
};

class fake_runtime final : public lock_runtime, public std::enable_shared_from_this<fake_runtime> {
 public:
  // Without the client's card unless asked: the tests below count the lock's own requests.
  explicit fake_runtime(bool card = false) : ex_(ctx.get_executor()), topo_(ex_) {
    cfg_.watchdog_timeout = std::chrono::seconds(30);
    cfg_.client_card = card;
  }
  const config& cfg() const noexcept override { return cfg_; }
  const std::string& uuid() const noexcept override { return uuid_; }
  const asio::any_io_executor& executor() const noexcept override { return ex_; }
  topology& topo() noexcept override { return topo_; }
  std::weak_ptr<lock_runtime> life() noexcept override { return std::weak_ptr<lock_runtime>(weak_from_this()); }

  asio::io_context ctx;
  fake_topology& fake() { return topo_; }

 private:
  config cfg_;
  std::string uuid_ = "00000000-test";
  asio::any_io_executor ex_;
  fake_topology topo_;
};

struct engine : ::testing::Test {
  std::shared_ptr<fake_runtime> rt = std::make_shared<fake_runtime>();
  std::unique_ptr<lock_service> svc = std::make_unique<lock_service>(*rt);
  void TearDown() override {
    svc->close();
    rt->ctx.poll();
  }
  bool acquire(const std::string& name, lock_kind kind = lock_kind::reentrant) {
    std::optional<std::pair<std::error_code, bool>> got;
    svc->acquire(name, kind, 1, ms(0), std::nullopt, nullptr, wait_strategy{},
                 [&](std::error_code ec, bool ok) { got.emplace(ec, ok); });
    rt->ctx.poll();
    EXPECT_TRUE(got.has_value()) << "the acquisition did not complete";
    if (!got) return false;
    EXPECT_FALSE(got->first) << got->first.message();
    return got->second;
  }
};

TEST_F(engine, a_request_re_routed_by_the_topology_is_a_grant_to_the_lock_layer) {
  ASSERT_TRUE(acquire("orders:42"));
  ASSERT_EQ(rt->fake().log.size(), 1u);
  const auto& s = rt->fake().log[0];
  EXPECT_EQ(s.key, "orders:42") << "the request carries its key to the topology";
  EXPECT_EQ(s.what, keyed_request::kind::script_acked);
  EXPECT_EQ(s.script, "acquire");
  EXPECT_EQ(s.nodes, (std::vector<std::string>{"a", "b"})) << "re-routed inside the topology";
  EXPECT_TRUE(svc->view("orders:42", 1, lock_kind::reentrant, false).held);

  // The release is a keyed request of the same key; the topology routes it (now straight to "b").
  rt->fake().next_reply = [](const sent&) { return integer(1); };
  std::optional<std::error_code> released;
  svc->release("orders:42", lock_kind::reentrant, 1, [&](std::error_code ec) { released = ec; });
  rt->ctx.poll();
  ASSERT_TRUE(released.has_value());
  EXPECT_FALSE(*released) << released->message();
  ASSERT_EQ(rt->fake().log.size(), 2u);
  EXPECT_EQ(rt->fake().log[1].key, "orders:42");
  EXPECT_EQ(rt->fake().log[1].nodes, (std::vector<std::string>{"b"}));
  EXPECT_FALSE(svc->view("orders:42", 1, lock_kind::reentrant, false).held);
}

// An attempt whose reply was lost is undone by a request that says it must follow the attempt to
// the node that served it (no reference to a node is kept: the request says so).
TEST_F(engine, the_undo_of_a_lost_grant_says_it_follows_its_attempt) {
  rt->fake().next_error = errc::request_timeout;
  std::optional<std::pair<std::error_code, bool>> got;
  svc->acquire("jobs:7", lock_kind::mutex, 1, ms(0), std::nullopt, nullptr, wait_strategy{},
               [&](std::error_code ec, bool ok) { got.emplace(ec, ok); });
  rt->ctx.poll();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->first, errc::request_timeout);
  ASSERT_GE(rt->fake().log.size(), 2u);
  EXPECT_FALSE(rt->fake().log[0].follows);
  const auto& undo = rt->fake().log[1];
  EXPECT_EQ(undo.key, "jobs:7");
  EXPECT_TRUE(undo.follows);
  EXPECT_TRUE(undo.always_eval) << "no NOSCRIPT round that would queue it behind a later attempt";
  EXPECT_EQ(undo.script, "mutex_release");
}

// The watchdog's renewal is a keyed request too: the engine never asks for a node.
TEST_F(engine, a_renewal_goes_to_the_topology_by_its_first_key) {
  ASSERT_TRUE(acquire("{batch}:1"));
  ASSERT_TRUE(acquire("{batch}:2"));
  rt->fake().next_reply = [](const sent&) {
    reply r;
    r.type = reply::kind::array;
    return r;  // no failures: every hold renewed
  };
  svc->on_failover("a test failover");  // checks every hold at once: one renewal call
  rt->ctx.poll();
  ASSERT_EQ(rt->fake().log.size(), 3u);
  const auto& renew = rt->fake().log[2];
  EXPECT_EQ(renew.script, "renew");
  EXPECT_TRUE(renew.key == "{batch}:1" || renew.key == "{batch}:2") << renew.key;
  EXPECT_TRUE(svc->view("{batch}:1", 1, lock_kind::reentrant, false).valid);
}

// A re-entry on the wire when the hold is found lost (a renewal finds the key gone): its grant found
// the key free, so it is no level of the hold. It is given back, and the re-entry says lock_lost;
// before, it became a fresh one-level hold, and the owner's outer unlock said not_owner.
TEST_F(engine, a_re_entry_granted_after_its_hold_was_found_lost_is_given_back) {
  ASSERT_TRUE(acquire("jobs:9"));
  rt->fake().park = true;
  std::optional<std::pair<std::error_code, bool>> reentry;
  svc->acquire("jobs:9", lock_kind::reentrant, 1, ms(0), std::nullopt, nullptr, wait_strategy{},
               [&](std::error_code ec, bool ok) { reentry.emplace(ec, ok); });
  rt->ctx.poll();
  ASSERT_EQ(rt->fake().parked.size(), 1u) << "the re-entry is on the wire";
  // The renewal a failover sends finds the key gone: the hold is lost.
  rt->fake().next_reply = [](const sent&) {
    reply r;
    r.type = reply::kind::array;
    r.elements = {integer(1), integer(0)};  // item 1: gone
    return r;
  };
  svc->on_failover("a test failover");
  ASSERT_EQ(rt->fake().parked.size(), 2u);
  rt->fake().park = false;
  rt->fake().next_reply = [](const sent&) { return integer(1); };  // the undo: released
  rt->fake().answer_parked(1);  // the renewal: gone
  rt->ctx.poll();
  ASSERT_FALSE(reentry.has_value());
  rt->fake().answer_parked(0);  // then the re-entry's grant
  rt->ctx.poll();
  ASSERT_TRUE(reentry.has_value());
  EXPECT_EQ(reentry->first, errc::lock_lost) << reentry->first.message();
  EXPECT_FALSE(reentry->second);
  const auto& undo = rt->fake().log.back();
  EXPECT_EQ(undo.key, "jobs:9");
  EXPECT_EQ(undo.script, "release") << "the grant is given back";
  // The owner's unlock of the lost hold says lock_lost, not not_owner.
  std::optional<std::error_code> released;
  svc->release("jobs:9", lock_kind::reentrant, 1, [&](std::error_code ec) { released = ec; });
  rt->ctx.poll();
  ASSERT_TRUE(released.has_value());
  EXPECT_EQ(*released, errc::lock_lost) << released->message();
}

// The client's card is a keyed request of its own key, sent as EVAL right before the first
// attempt (so that no NOSCRIPT round puts it behind the grant), and not again for the next lock.
TEST(engine_card, the_card_goes_by_its_own_key_ahead_of_the_first_attempt_only) {
  auto rt = std::make_shared<fake_runtime>(true);
  auto svc = std::make_unique<lock_service>(*rt);
  for (const char* name : {"orders:1", "orders:2"}) {
    std::optional<std::error_code> got;
    svc->acquire(name, lock_kind::reentrant, 1, ms(0), std::nullopt, nullptr, wait_strategy{},
                 [&](std::error_code ec, bool) { got = ec; });
    rt->ctx.poll();
    ASSERT_TRUE(got.has_value());
  }
  const auto& log = rt->fake().log;
  ASSERT_EQ(log.size(), 3u) << "one card, two attempts";
  EXPECT_EQ(log[0].script, "client_card");
  EXPECT_EQ(log[0].key, client_card_key("00000000-test"));
  EXPECT_TRUE(log[0].always_eval);
  EXPECT_EQ(log[1].script, "acquire");
  EXPECT_EQ(log[2].script, "acquire");
  svc->close();  // holds still valid: the card is left to expire with them (a PEXPIRE)
  rt->ctx.poll();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[3].key, client_card_key("00000000-test"));
  EXPECT_EQ(log[3].what, keyed_request::kind::command);
}

}  // namespace
}  // namespace redlease::detail
