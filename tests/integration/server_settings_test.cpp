// SPDX-License-Identifier: MIT
// The server settings production teams use (issue "Production server settings"): a prefix-restricted
// ACL user, a user without scripting, renamed commands, maxclients, noeviction at its limit, an
// evicting policy, min-replicas-to-write without replicas, a password changed under a holder. Real
// redis-server processes in each setting; every test asserts the typed cause and the server's words.
#include <gtest/gtest.h>

#include <malloc.h>
#include <sys/wait.h>

#include <asio/use_future.hpp>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "lock_test_support.hpp"
#include "redlease/redlease.hpp"

namespace redlease::test {
namespace {

// The documented line for a user limited to the prefix `locks:` (docs/deployment.md).
const std::vector<std::string> prefix_user_rules = {
    "~locks:*", "~redisson_unlock_latch:{locks:*", "&redisson_lock__channel:{locks:*",
    "&redlease_mutex__channel:{locks:*", "+@read", "+@write", "+@scripting", "+@pubsub", "+ping", "+client|setname"};

std::string field(const client& c, owner_id o) { return c.id() + ":" + std::to_string(o); }

struct cli_result {
  int status = -1;
  std::string err;
};

cli_result run_cli(const std::string& args, const std::string& env = "") {
  std::string err = "/tmp/redlease-settings-" + std::to_string(::getpid()) + ".err";
  std::string cmd = env + " " + std::string(REDLEASE_CLI_PATH) + " " + args + " >/dev/null 2>" + err;
  int st = std::system(cmd.c_str());
  std::ifstream f(err);
  std::stringstream text;
  text << f.rdbuf();
  std::remove(err.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, text.str()};
}

class server_settings : public lock_fixture {
 protected:
  void add_user(const std::string& name, const std::vector<std::string>& rules) {
    std::vector<std::string> cmd{"ACL", "SETUSER", name, "on", ">pw"};
    cmd.insert(cmd.end(), rules.begin(), rules.end());
    ASSERT_EQ(raw().command(cmd).str, "OK");
  }
  config as_user(const std::string& name, std::chrono::milliseconds watchdog = 30000ms) {
    auto c = cfg(watchdog);
    c.username = name;
    c.password = "pw";
    return c;
  }
  std::string user_url(const std::string& name) {
    return "redis://" + name + ":@127.0.0.1:" + std::to_string(server().port());
  }
};

// ---- ACL ------------------------------------------------------------------------------------------

TEST_F(server_settings, PrefixRestrictedUserTakesWaitsReleasesRenewsAndForceUnlocks) {
  add_user("app", prefix_user_rules);
  for (bool mutex : {false, true}) {
    SCOPED_TRACE(mutex ? "mutex" : "reentrant");
    client holder(as_user("app", 600ms));
    client waiter(as_user("app"));
    std::string name = mutex ? "locks:m" : "locks:r";
    auto lh = mutex ? detail::lock_handle(holder.mutex(name)) : detail::lock_handle(holder.lock(name));
    auto lw = mutex ? detail::lock_handle(waiter.mutex(name)) : detail::lock_handle(waiter.lock(name));
    ASSERT_TRUE(lh.try_lock());
    std::this_thread::sleep_for(1500ms);  // over two leases: the watchdog renewed it
    EXPECT_TRUE(lh.valid());
    EXPECT_GT(raw()({"PTTL", name}).integer, 0);
    auto w = std::async(std::launch::async, [&] {
      auto t0 = steady::now();
      bool got = lw.try_lock(5000ms);
      return std::pair{got, ms_since(t0)};
    });
    ASSERT_TRUE(eventually([&] {
      auto r = raw()({"PUBSUB", "NUMSUB", mutex ? "redlease_mutex__channel:{" + name + "}" : "redisson_lock__channel:{" + name + "}"});
      return r.elements.size() == 2 && r.elements[1].integer >= 1;
    }));
    lh.unlock();
    auto [got, waited] = w.get();
    EXPECT_TRUE(got);
    EXPECT_LT(waited, 2000) << "the waiter slept instead of being woken";
    EXPECT_TRUE(lw.force_unlock());
    EXPECT_EQ(raw()({"EXISTS", name}).integer, 0);
  }
}

TEST_F(server_settings, UserWithoutChannelsReleasesAndItsWaitersPoll) {
  // Redis 7's default for a new user: no channel at all.
  add_user("app", {"~locks:*", "~redisson_unlock_latch:{locks:*", "resetchannels", "+@all"});
  error_log log;
  auto wc = as_user("app");
  wc.on_error = log.hook();
  client holder(as_user("app"));
  client waiter(wc);
  auto lh = holder.lock("locks:a");
  auto lw = waiter.lock("locks:a");
  ASSERT_TRUE(lh.try_lock(0ms, 10000ms));  // a 10 s lease: sleeping it out would be obvious
  ASSERT_EQ(lh.hold_count(), 1);
  auto w = std::async(std::launch::async, [&] {
    auto t0 = steady::now();
    bool got = lw.try_lock(8000ms);
    auto waited = ms_since(t0);
    if (got) lw.unlock();  // by the thread that holds it
    return std::pair{got, waited};
  });
  ASSERT_TRUE(eventually([&] { return log.count("SUBSCRIBE") >= 1; }, 3000ms));
  lh.unlock();  // the release works although its PUBLISH is refused
  auto [got, waited] = w.get();
  EXPECT_TRUE(got);
  EXPECT_LT(waited, 3000) << "the waiter slept out the lease";
  EXPECT_EQ(log.count("SUBSCRIBE"), 1u) << "said once";
  EXPECT_EQ(log.count("NOPERM"), 1u);

  // Through the CLI: run releases (exit 0) and the next run can take the lock at once.
  auto r = run_cli("run --redis " + user_url("app") + " locks:cli -- true", "REDLEASE_PASSWORD=pw");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(raw()({"EXISTS", "locks:cli"}).integer, 0);
}

// Under an ACL without channels every waiter's SUBSCRIBE is refused, and the client remembers the
// refusal so that the next waiter on that name polls at once. It remembers the latest 1024 names at
// most: it kept one entry per name for as long as nobody waited on it again (review 5d: 130 B a
// name, 2.6 MB for 20,000 names, for the client's life). (Under a sanitizer mallinfo2 says little.)
TEST_F(server_settings, RefusedChannelsAreRememberedForAFewNamesNotForEvery) {
  add_user("app", {"~locks:*", "~redisson_unlock_latch:{locks:*", "resetchannels", "+@all"});
  constexpr int n = 20000;
  for (int base = 0; base < n; base += 1000) {  // held by someone else, for two minutes
    std::vector<std::vector<std::string>> cmds;
    for (int i = base; i < base + 1000; ++i) {
      cmds.push_back({"HSET", "locks:many:" + std::to_string(i), "someone-else:1", "1"});
      cmds.push_back({"PEXPIRE", "locks:many:" + std::to_string(i), "120000"});
    }
    raw().pipeline(cmds);
  }
  client c(as_user("app"));
  auto wait_on = [&](int from, int to) {
    std::vector<std::future<bool>> fs;
    for (int i = from; i < to; ++i)
      fs.push_back(c.lock("locks:many:" + std::to_string(i)).async_try_lock(c.new_owner(), 20ms, asio::use_future));
    int got = 0;
    for (auto& f : fs) got += f.get();
    return got;
  };
  EXPECT_EQ(wait_on(0, 500), 0);  // warm: connections, scripts, the one warning
  auto heap = [] {
    ::malloc_trim(0);
    auto m = ::mallinfo2();
    return static_cast<long long>(m.uordblks + m.hblkhd);
  };
  const long long before = heap();
  for (int base = 500; base < n; base += 500) EXPECT_EQ(wait_on(base, base + 500), 0);
  const long long grown = heap() - before;
  const double per_name = static_cast<double>(grown) / (n - 500);
  std::printf("heap after %d refused names: %+lld bytes, %.1f B per name\n", n - 500, grown, per_name);
  // One entry per name is about 130 B (and 250 B with the order kept); 1024 of them spread over
  // 19,500 names is about 13 B, with room for the allocator's caches.
  EXPECT_LT(per_name, 60) << "one entry kept per refused name";
}

TEST_F(server_settings, RefusedSubscribeIsNoPermissionWithTheServersWords) {
  add_user("app", prefix_user_rules);
  client c(as_user("app"));
  std::error_code ec;
  auto sub = c.subscribe("not-mine", [](std::string_view, std::string_view) {}, ec);
  EXPECT_EQ(ec, errc::no_permission);
  EXPECT_NE(last_error_text().find("NOPERM"), std::string::npos) << last_error_text();
  EXPECT_FALSE(sub);
  // The connection goes on: a permitted channel works.
  auto ok = c.subscribe("redisson_lock__channel:{locks:x}", [](std::string_view, std::string_view) {});
  EXPECT_TRUE(ok);
}

TEST_F(server_settings, KeyOutsideThePrefixIsNoPermissionNamingIt) {
  add_user("app", prefix_user_rules);
  client c(as_user("app"));
  auto l = c.lock("other:a");
  try {
    l.try_lock();
    FAIL() << "took a lock outside the user's keys";
  } catch (const redlease::error& e) {
    EXPECT_EQ(e.code(), errc::no_permission);
    EXPECT_NE(std::string(e.what()).find("NOPERM"), std::string::npos) << e.what();
  }
  auto r = run_cli("run -q --redis " + user_url("app") + " other:b -- true", "REDLEASE_PASSWORD=pw");
  EXPECT_EQ(r.status, 78) << r.err;
  EXPECT_NE(r.err.find("NOPERM"), std::string::npos) << r.err;
}

TEST_F(server_settings, UserWithoutScriptingFailsAtOnceWithTheServersWords) {
  add_user("noscript", {"~*", "&*", "+@all", "-@scripting"});
  client c(as_user("noscript"));
  auto l = c.lock("k");
  auto t0 = steady::now();
  std::error_code ec;
  EXPECT_FALSE(l.try_lock(5000ms, ec));  // a configuration refusal is not waited out
  EXPECT_EQ(ec, errc::no_permission);
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_NE(last_error_text().find("evalsha"), std::string::npos) << last_error_text();
  // An async completion carries the words to its handler's thread, for the handler's duration.
  std::promise<std::pair<std::error_code, std::string>> seen;
  l.async_try_lock(c.new_owner(), 0ms, [&](std::error_code e, bool) { seen.set_value({e, last_error_text()}); });
  auto [aec, words] = seen.get_future().get();
  EXPECT_EQ(aec, errc::no_permission);
  EXPECT_NE(words.find("evalsha"), std::string::npos) << words;
  // A later success on this thread clears them.
  c.ping();
  EXPECT_TRUE(last_error_text().empty());
}

// ---- renamed commands -----------------------------------------------------------------------------

class renamed_scripting : public server_settings {
 protected:
  server_options options() const override {
    server_options o;
    o.extra_args = {"--rename-command", "EVALSHA", "", "--rename-command", "EVAL", "evil-eval"};
    return o;
  }
};

TEST_F(renamed_scripting, IsUnknownCommandAndAConfigurationExit) {
  client c(cfg());
  auto l = c.lock("k");
  std::error_code ec;
  EXPECT_FALSE(l.try_lock(3000ms, ec));
  EXPECT_EQ(ec, errc::unknown_command);
  EXPECT_NE(last_error_text().find("unknown command"), std::string::npos) << last_error_text();
  auto r = run_cli("run --redis " + server().url() + " k -- true");
  EXPECT_EQ(r.status, 78) << r.err;
  EXPECT_NE(r.err.find("unknown command"), std::string::npos) << r.err;
}

// ---- maxclients -----------------------------------------------------------------------------------

TEST_F(server_settings, MaxclientsIsServerFullWithTheServersWords) {
  client first(cfg());
  first.ping();
  auto n = raw()({"CLIENT", "LIST"}).str;
  long long clients = std::count(n.begin(), n.end(), '\n');
  raw()({"CONFIG", "SET", "maxclients", std::to_string(clients)});
  client c(cfg());
  std::error_code ec;
  c.ping(ec);
  EXPECT_EQ(ec, errc::server_full) << ec.message();
  auto r = run_cli("status x --redis " + server().url());
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_NE(r.err.find("max number of clients reached"), std::string::npos) << r.err;
}

// ---- memory ---------------------------------------------------------------------------------------

TEST_F(server_settings, NoevictionAtItsLimitReleasesAndRetriesAcquisitions) {
  raw()({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  client c(cfg());
  auto l = c.lock("full");
  auto m = c.mutex("full-m");
  l.lock();
  l.lock();  // count 2: the first unlock decrements (HINCRBY), the second deletes
  m.lock();
  raw()({"SET", "filler", std::string(64 * 1024, 'x')});
  raw()({"CONFIG", "SET", "maxmemory", "1"});
  ASSERT_EQ(raw().command({"SET", "probe", "x"}).str.substr(0, 3), "OOM");

  l.unlock();
  EXPECT_EQ(raw()({"HGET", "full", field(c, this_thread_owner())}).str, "1");
  l.unlock();
  m.unlock();
  EXPECT_EQ(raw()({"EXISTS", "full"}).integer, 0);
  EXPECT_EQ(raw()({"EXISTS", "full-m"}).integer, 0);

  // A new acquisition is retried within its wait, then reports the cause.
  auto t0 = steady::now();
  std::error_code ec;
  EXPECT_FALSE(l.try_lock(400ms, ec));
  EXPECT_EQ(ec, errc::server_oom);
  EXPECT_GE(ms_since(t0), 300) << "not retried within the wait";
  EXPECT_NE(last_error_text().find("OOM"), std::string::npos) << last_error_text();
  EXPECT_GE(c.stats().commands, 3u);
  raw()({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_TRUE(l.try_lock(400ms));
  l.unlock();
}

// The unlock of a re-entered fair, write or read hold decrements (and latches a retry): out of memory
// it works too, as the reentrant lock's does. Before, only the reentrant lock's release carried
// allow-oom: the others failed with server_oom and the holds stayed until memory was freed.
TEST_F(server_settings, NoevictionAtItsLimitReleasesEveryKindsInnerLevels) {
  raw()({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  client c(cfg());
  auto f = c.fair_lock("full-f");
  auto w = c.write_lock("full-w");
  auto r = c.read_lock("full-r");
  for (auto* l : {static_cast<detail::lock_handle*>(&f), static_cast<detail::lock_handle*>(&w),
                  static_cast<detail::lock_handle*>(&r)}) {
    l->lock();
    l->lock();
  }
  raw()({"SET", "filler", std::string(64 * 1024, 'x')});
  raw()({"CONFIG", "SET", "maxmemory", "1"});
  ASSERT_EQ(raw().command({"SET", "probe", "x"}).str.substr(0, 3), "OOM");
  for (auto* l : {static_cast<detail::lock_handle*>(&f), static_cast<detail::lock_handle*>(&w),
                  static_cast<detail::lock_handle*>(&r)}) {
    SCOPED_TRACE(l->name());
    std::error_code ec;
    l->unlock(ec);  // the inner level
    EXPECT_FALSE(ec) << ec.message() << ": " << last_error_text();
    EXPECT_TRUE(l->valid());
    l->unlock(ec);
    EXPECT_FALSE(ec) << ec.message() << ": " << last_error_text();
    EXPECT_EQ(raw()({"EXISTS", l->name()}).integer, 0);
  }
  raw()({"CONFIG", "SET", "maxmemory", "0"});
  raw()({"DEL", "filler"});
}

TEST_F(server_settings, EvictingPolicyTellsTheHolder) {
  raw()({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
  client c(cfg(600ms));
  auto l = c.lock("evicted");
  std::promise<lost_info> lost;
  std::atomic<bool> once{false};
  l.on_lost([&](const lost_info& i) {
    if (!once.exchange(true)) lost.set_value(i);
  });
  l.lock();
  raw()({"CONFIG", "SET", "maxmemory", "2mb"});
  // Write more than fits: the oldest keys, the lock among them, are evicted.
  std::string blob(2048, 'x');
  auto rc = server().client();
  for (int i = 0; i < 4000 && raw()({"EXISTS", "evicted"}).integer == 1; ++i) rc({"SET", "fill:" + std::to_string(i), blob});
  ASSERT_EQ(raw()({"EXISTS", "evicted"}).integer, 0) << "the lock was never evicted";
  auto f = lost.get_future();
  ASSERT_EQ(f.wait_for(3s), std::future_status::ready) << "the holder was not told";
  EXPECT_EQ(f.get().reason, lost_reason::deleted);
  EXPECT_FALSE(l.valid());
}

// ---- replicas -------------------------------------------------------------------------------------

TEST_F(server_settings, MinReplicasWithoutReplicasRefusesAndNamesTheCauseOfALoss) {
  client c(cfg(600ms));
  auto l = c.lock("norepl");
  std::promise<lost_info> lost;
  l.on_lost([&](const lost_info& i) { lost.set_value(i); });
  l.lock();
  raw()({"CONFIG", "SET", "min-replicas-to-write", "1"});
  // Renewals are refused from now on: the loss at the deadline names the cause.
  auto f = lost.get_future();
  ASSERT_EQ(f.wait_for(3s), std::future_status::ready);
  auto info = f.get();
  EXPECT_EQ(info.reason, lost_reason::expired);
  EXPECT_EQ(info.cause, errc::no_replicas);
  EXPECT_NE(info.detail.find("NOREPLICAS"), std::string::npos) << info.detail;

  auto other = c.lock("norepl2");
  std::error_code ec;
  EXPECT_FALSE(other.try_lock(0ms, ec));
  EXPECT_EQ(ec, errc::no_replicas);
  auto t0 = steady::now();
  EXPECT_FALSE(other.try_lock(300ms, ec));
  EXPECT_EQ(ec, errc::no_replicas);
  EXPECT_GE(ms_since(t0), 200);
  raw()({"CONFIG", "SET", "min-replicas-to-write", "0"});
}

TEST_F(server_settings, CliReleaseRefusedExitsNonZeroWithTheServersWordsEvenQuiet) {
  std::string cmd = "redis-cli -p " + std::to_string(server().port()) + " CONFIG SET min-replicas-to-write 1";
  auto r = run_cli("run -q --redis " + server().url() + " rel -- sh -c '" + cmd + " >/dev/null'");
  EXPECT_EQ(r.status, 79) << r.err;
  EXPECT_NE(r.err.find("could not release"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("NOREPLICAS"), std::string::npos) << r.err;
  raw()({"CONFIG", "SET", "min-replicas-to-write", "0"});
}

// ---- credentials ----------------------------------------------------------------------------------

TEST_F(server_settings, PasswordChangedUnderAHolderNamesTheCause) {
  add_user("app", {"~*", "&*", "+@all"});
  client c(as_user("app", 600ms));
  auto l = c.lock("pw");
  std::promise<lost_info> lost;
  l.on_lost([&](const lost_info& i) { lost.set_value(i); });
  l.lock();
  raw()({"ACL", "SETUSER", "app", "resetpass", ">changed"});
  raw()({"CLIENT", "KILL", "USER", "app"});  // its connections re-authenticate, with the old password
  auto f = lost.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  auto info = f.get();
  EXPECT_EQ(info.reason, lost_reason::expired);
  EXPECT_EQ(info.cause, errc::auth_failed) << info.cause.message();
}

}  // namespace
}  // namespace redlease::test
