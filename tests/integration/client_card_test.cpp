// SPDX-License-Identifier: MIT
// Issue 37, items 9 and 10: who holds a lock. Each client keeps a card (host, pid, program, name)
// beside the locks, `run -v` / `--json` print the holder as `status` lists it, `status` shows each
// holder's card, and a read-write lock's waiting writer (which Redisson's layout does not record) is
// on its card, while a reader that arrives after it still gets in (Redisson's behaviour, documented).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <future>
#include <map>
#include <sstream>
#include <thread>

#include "cli_process.hpp"
#include "lock/client_card.hpp"
#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

namespace fs = std::filesystem;

std::string this_host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

class client_card_test : public lock_fixture {
 protected:
  std::map<std::string, std::string> card(const std::string& client_id) {
    std::map<std::string, std::string> out;
    auto r = raw()({"HGETALL", client_card_key(client_id)});
    for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) out[r.elements[i].str] = r.elements[i + 1].str;
    return out;
  }
  bool exists(const std::string& key) { return raw()({"EXISTS", key}).integer == 1; }
  // The server learns the acquire, renew and release scripts, so that their NOSCRIPT rounds do not
  // count in a test's commands.
  void warm_scripts() {
    client warm(cfg(300ms));
    auto l = warm.lock("card:warm");
    l.lock();
    ASSERT_TRUE(eventually([&] { return warm.stats().renew_calls >= 1; }));
    l.unlock();
  }
  std::string path(const std::string& f) const { return dir_.path(f); }
  cli_process& start(const std::vector<std::string>& args) {
    int n = ++count_;
    procs_.push_back(std::make_unique<cli_process>(REDLEASE_CLI_PATH, args, std::vector<std::string>{},
                                                   path("out." + std::to_string(n)), path("err." + std::to_string(n))));
    return *procs_.back();
  }
  std::pair<int, std::string> status(const std::vector<std::string>& names, bool json) {
    std::vector<std::string> args{"status"};
    args.insert(args.end(), names.begin(), names.end());
    args.insert(args.end(), {"--redis", server().url()});
    if (json) args.push_back("--json");
    auto& p = start(args);
    int st = p.wait();
    return {st, p.out() + p.err()};
  }

  scratch_dir dir_{"redlease-card-test"};
  int count_ = 0;
  std::vector<std::unique_ptr<cli_process>> procs_;  // gone before dir_ (declared after it)
};

TEST_F(client_card_test, a_holders_card_names_its_host_pid_program_and_name_and_expires) {
  auto c0 = cfg();
  c0.client_name = "billing-worker";
  client c(c0);
  auto l = c.lock("card:held");
  EXPECT_FALSE(exists(client_card_key(c.id()))) << "written before any lock";
  l.lock();
  // Written ahead of the acquisition on the same connection: there once the lock is.
  auto f = card(c.id());
  EXPECT_EQ(f["host"], this_host());
  EXPECT_EQ(f["pid"], std::to_string(::getpid()));
  EXPECT_EQ(f["program"], program_invocation_short_name);
  EXPECT_EQ(f["name"], "billing-worker");
  EXPECT_FALSE(f["started"].empty());
  auto ttl = raw()({"PTTL", client_card_key(c.id())}).integer;
  EXPECT_GT(ttl, 0) << "the card never expires";
  EXPECT_LE(ttl, client_card_ttl(c0).count());
  // The holder id is the field status lists, and the card's key is derived from it.
  const std::string holder = l.holder_id();
  EXPECT_EQ(holder, c.id() + ":" + std::to_string(this_thread_owner()));
  EXPECT_EQ(raw()({"HGET", "card:held", holder}).str, "1");
  EXPECT_EQ(client_id_of_holder(holder), c.id());
  auto w = c.write_lock("card:w");
  w.lock();
  EXPECT_EQ(w.holder_id(), holder + ":write");
  EXPECT_EQ(raw()({"HGET", "card:w", w.holder_id()}).str, "1");
  auto m = c.mutex("card:m");
  m.lock();
  EXPECT_EQ(m.holder_id(), raw()({"GET", "card:m"}).str);
  EXPECT_EQ(client_id_of_holder(m.holder_id()), "") << "a token names no client";
  m.unlock();
  w.unlock();
  l.unlock();
  EXPECT_EQ(l.holder_id(), "");
}

// The card costs one call for the client, not one per lock nor one per watchdog tick while it is
// fresh: every command a client holding 20 watchdog locks sends is an acquisition, a renewal call,
// or that one card call.
TEST_F(client_card_test, the_card_costs_one_call_not_one_per_lock_or_per_tick) {
  warm_scripts();
  client c(cfg(300ms));
  c.ping();
  const auto c0 = c.stats().commands;
  std::vector<reentrant_lock> locks;
  for (int i = 0; i < 20; ++i) {
    locks.push_back(c.lock("card:many:" + std::to_string(i)));
    locks.back().lock();
  }
  ASSERT_TRUE(eventually([&] { return c.stats().renew_calls >= 5; })) << "the watchdog did not tick";
  for (auto& l : locks) l.unlock();
  ASSERT_TRUE(eventually([&] { return c.stats().commands == c.stats().replies; }));
  const auto s = c.stats();
  EXPECT_EQ(s.commands - c0, 1 + 20 + s.renew_calls + 20) << "card + acquisitions + renewal calls + unlocks";
}

// While the watchdog renews, the card is written again each half TTL (one call every few ticks,
// not one per tick), so it outlives many TTLs; once nothing is held it expires. The TTL is cut to
// twice the 300 ms watchdog timeout here (a minute at least otherwise).
TEST_F(client_card_test, the_watchdog_keeps_the_card_alive_and_without_locks_it_expires) {
  struct floor_back {
    std::chrono::milliseconds old = detail::card_keeper::ttl_floor;
    ~floor_back() { detail::card_keeper::ttl_floor = old; }
  } restore;
  detail::card_keeper::ttl_floor = 0ms;
  warm_scripts();
  client c(cfg(300ms));
  c.ping();
  const auto c0 = c.stats().commands;
  auto l = c.lock("card:alive");
  l.lock();
  ASSERT_EQ(client_card_ttl(c.get_config()), 600ms);
  // 1.5 s of renewals: the first card, unrenewed, would have expired 0.9 s ago.
  client_stats s;
  ASSERT_TRUE(eventually([&] {
    s = c.stats();
    return s.renew_calls >= 15 && s.commands == s.replies;
  }));
  EXPECT_TRUE(exists(client_card_key(c.id()))) << "the card expired under a held lock";
  const auto writes = s.commands - c0 - 1 - s.renew_calls;  // all but the acquisition and renewals
  EXPECT_GE(writes, 3u) << "the card was not written again";
  EXPECT_LE(writes, s.renew_calls / 2) << "the card was written at every tick";
  l.unlock();
  EXPECT_TRUE(eventually([&] { return !exists(client_card_key(c.id())); }, 3000ms))
      << "the card outlived the client's last lock by more than its TTL";
}

TEST_F(client_card_test, the_card_is_deleted_at_close_or_left_to_expire_with_the_locks_still_held) {
  std::string id;
  {
    client c(cfg());
    id = c.id();
    auto l = c.lock("card:close");
    l.lock();
    l.unlock();
    ASSERT_TRUE(exists(client_card_key(id)));
  }  // closing answers what is out first: the DEL has run
  EXPECT_FALSE(exists(client_card_key(id))) << "PTTL " << raw()({"PTTL", client_card_key(id)}).integer;
  {
    client c(cfg());
    id = c.id();
    c.lock("card:kept").lock(5000ms);
  }
  // A lock left held at close is still described, for as long as it is held.
  ASSERT_TRUE(exists(client_card_key(id)));
  auto card_ttl = raw()({"PTTL", client_card_key(id)}).integer;
  EXPECT_GT(card_ttl, 0);
  EXPECT_LE(card_ttl, 5000);
  EXPECT_GE(card_ttl + 100, raw()({"PTTL", "card:kept"}).integer);
}

TEST_F(client_card_test, no_card_when_turned_off) {
  auto c0 = cfg();
  c0.client_card = false;
  client c(c0);
  auto l = c.lock("card:off");
  l.lock();
  EXPECT_FALSE(exists(client_card_key(c.id())));
  l.unlock();
}

// A user whose ACL allows its locks but not the card key: the locks work, and nothing is said.
TEST_F(client_card_test, a_refused_card_key_costs_the_locks_nothing_and_says_nothing) {
  ASSERT_TRUE(raw()({"ACL", "SETUSER", "nocard", "on", ">pw", "~locks:*", "~redisson_*", "~redlease_*", "&*", "+@all"})
                  .is_ok());
  auto c0 = cfg();
  c0.username = "nocard";
  c0.password = "pw";
  error_log log;
  c0.on_error = log.hook();
  client c(c0);
  for (const char* kind : {"reentrant", "write", "mutex"}) {
    SCOPED_TRACE(kind);
    auto l = lock_of_kind(c, kind, std::string("locks:") + kind);
    std::error_code ec;
    l.lock(ec);
    ASSERT_FALSE(ec) << ec.message() << ": " << last_error_text();
    l.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
  }
  EXPECT_FALSE(exists(client_card_key(c.id())));
  std::lock_guard<std::mutex> g(log.mu);
  EXPECT_TRUE(log.lines.empty()) << log.lines.front();
}

// `run -v --json` says who holds the lock, in the words `status` lists it with, and status shows
// that holder's card: the host and the pid of that very run.
TEST_F(client_card_test, run_prints_the_holder_that_status_shows_with_its_host_and_pid) {
  for (const std::string kind : {"", "--mutex", "--write"}) {
    SCOPED_TRACE(kind);
    const std::string name = "card:run" + kind;
    const std::string ready = path("ready" + kind);
    std::vector<std::string> args{"run", name, "--redis", server().url(), "-v", "--json"};
    if (!kind.empty()) args.push_back(kind);
    std::string body = "echo > " + ready + "; sleep 30 & p=$!; trap 'kill $p; exit 0' TERM; wait $p";
    args.insert(args.end(), {"--", "sh", "-c", body});
    auto& p = start(args);
    ASSERT_TRUE(eventually([&] { return fs::exists(ready); }, 10000ms)) << p.err();
    auto event = p.err();
    auto at = event.find("\"event\":\"acquired\"");
    ASSERT_NE(at, std::string::npos) << event;
    auto h = event.find("\"holder\":\"", at);
    ASSERT_NE(h, std::string::npos) << event;
    h += 10;
    const std::string holder = event.substr(h, event.find('"', h) - h);
    EXPECT_NE(event.find("\"pid\":" + std::to_string(p.pid()), at), std::string::npos) << event;

    auto [st, json] = status({name}, true);
    ASSERT_EQ(st, 0) << json;
    if (kind == "--mutex") {
      EXPECT_NE(json.find("\"token\":\"" + holder + "\""), std::string::npos) << json;
    } else {
      EXPECT_NE(json.find("{\"owner\":\"" + holder + "\",\"count\":1,\"client\":{\"host\":\"" + this_host() +
                          "\",\"pid\":\"" + std::to_string(p.pid()) + "\",\"program\":\"redlease\""),
                std::string::npos)
          << json;
      auto [st2, table] = status({name}, false);
      EXPECT_EQ(st2, 0);
      EXPECT_NE(table.find(holder + " x1 (host " + this_host() + ", pid " + std::to_string(p.pid()) +
                           ", program redlease, name "),
                std::string::npos)
          << table;
    }
    ::kill(p.pid(), SIGTERM);
    EXPECT_EQ(p.wait(), 0) << p.err();
    const std::string id(client_id_of_holder(holder));
    if (!id.empty()) {
      EXPECT_FALSE(exists(client_card_key(id))) << "the run's card outlived it";
    }
  }
}

TEST_F(client_card_test, status_says_when_a_holder_has_no_description) {
  raw()({"HSET", "card:redisson", "0b1c2d3e-redisson:7", "1"});
  raw()({"PEXPIRE", "card:redisson", "30000"});
  auto [st, table] = status({"card:redisson"}, false);
  EXPECT_EQ(st, 0) << table;
  EXPECT_NE(table.find("0b1c2d3e-redisson:7 x1 (no description: an older client or another library)"),
            std::string::npos)
      << table;
  auto [st2, json] = status({"card:redisson"}, true);
  EXPECT_NE(json.find("\"count\":1,\"client\":null}"), std::string::npos) << json;
}

// Item 10: R1 reads, W waits to write, R2 arrives and gets in ahead of W (Redisson does the same:
// writers can starve under a steady stream of readers; docs/lock-kinds.md). The waiting writer,
// which the lock's own keys do not record, is on W's card, and status lists it.
TEST_F(client_card_test, a_waiting_writer_shows_in_status_and_a_later_reader_still_gets_in) {
  const std::string name = "card:rw";
  client r1c(cfg()), wc(cfg()), r2c(cfg());
  auto r1 = r1c.read_lock(name);
  ASSERT_TRUE(r1.try_lock());
  auto w = wc.write_lock(name);
  auto writer = std::async(std::launch::async, [&] {
    bool got = w.try_lock(20000ms);
    if (got) w.unlock();
    return got;
  });
  const std::string field = client_card_wait_field(name);
  ASSERT_TRUE(eventually([&] { return raw()({"HEXISTS", client_card_key(wc.id()), field}).integer == 1; }))
      << "the wait is not on the writer's card";
  EXPECT_EQ(raw()({"HGET", client_card_key(wc.id()), field}).str.rfind("write since ", 0), 0u);

  auto [st, table] = status({name}, false);
  ASSERT_EQ(st, 0) << table;
  EXPECT_NE(table.find("waiting writers: " + wc.id() + " (host " + this_host() + ", pid " +
                       std::to_string(::getpid())),
            std::string::npos)
      << table;
  auto [st2, json] = status({name}, true);
  EXPECT_NE(json.find("\"waiting_writers\":[{\"client_id\":\"" + wc.id() + "\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"waiting_writers_complete\":true"), std::string::npos) << json;

  // The documented behaviour: a reader that comes after the writer is let in.
  auto r2 = r2c.read_lock(name);
  EXPECT_TRUE(r2.try_lock()) << "a later reader waited behind the writer";
  EXPECT_EQ(writer.wait_for(0ms), std::future_status::timeout) << "the writer got in past two readers";
  r1.unlock();
  r2.unlock();
  EXPECT_TRUE(writer.get());
  EXPECT_TRUE(eventually([&] { return raw()({"HEXISTS", client_card_key(wc.id()), field}).integer == 0; }))
      << "the wait stayed on the card after it ended";
  auto [st3, after] = status({name}, true);
  EXPECT_EQ(after.find("\"waiting_writers\":[{"), std::string::npos) << after;
}

// An uncontended write lock, or one granted at its first attempt, records no wait.
TEST_F(client_card_test, an_uncontended_writer_records_no_wait) {
  client c(cfg());
  auto w = c.write_lock("card:free");
  ASSERT_TRUE(w.try_lock(1000ms));
  EXPECT_EQ(raw()({"HEXISTS", client_card_key(c.id()), client_card_wait_field("card:free")}).integer, 0);
  w.unlock();
}

}  // namespace
}  // namespace redlease::test
