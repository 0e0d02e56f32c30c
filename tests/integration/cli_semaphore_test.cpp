// SPDX-License-Identifier: MIT
// `redlease semaphore` and `redlease latch`, and `redlease status` on their keys, driven as a user
// would: the built binary, run as a child process against a real redis-server, checked through its
// exit status, its output and the server's state.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli_process.hpp"
#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

class cli_semaphore_test : public lock_fixture {
 protected:
  void TearDown() override {
    procs_.clear();
    lock_fixture::TearDown();
  }

  std::string url() { return server().url(); }
  // `--redis URL` goes before a `--` (run's command follows it).
  cli_process& start(std::vector<std::string> args) {
    args.insert(std::find(args.begin(), args.end(), "--"), {"--redis", url()});
    const std::string n = std::to_string(procs_.size());
    procs_.push_back(std::make_unique<cli_process>(REDLEASE_CLI_PATH, args, std::vector<std::string>{},
                                                   dir_.path("out." + n), dir_.path("err." + n)));
    return *procs_.back();
  }
  struct result {
    int status;
    std::string out, err;
  };
  result run(const std::vector<std::string>& args) {
    auto& p = start(args);
    int st = p.wait();
    return {st, p.out(), p.err()};
  }
  std::string get(const std::string& key) { return raw()({"GET", key}).str; }
  long long subscribers(const std::string& channel) {
    auto r = raw()({"PUBSUB", "NUMSUB", channel});
    return r.elements.size() == 2 ? r.elements[1].integer : -1;
  }
  static std::string semaphore_channel(const std::string& name) { return describe(lock_kind::semaphore, name).channel(); }
  static std::string latch_channel(const std::string& name) { return describe(lock_kind::latch, name).channel(); }

  scratch_dir dir_{"redlease-cli-semaphore-test"};
  std::vector<std::unique_ptr<cli_process>> procs_;
};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- semaphore ---------------------------------------------------------------------------------

TEST_F(cli_semaphore_test, set_add_drain_and_status_of_a_semaphore) {
  auto r = run({"semaphore", "pool", "set", "5"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "semaphore \"pool\" set (permits 5)\n");
  EXPECT_EQ(get("pool"), "5");
  // It exists: 75, unchanged, saying what it holds.
  r = run({"semaphore", "pool", "set", "3"});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_TRUE(has(r.err, "\"pool\" exists already (permits 5); not changed")) << r.err;
  EXPECT_EQ(get("pool"), "5");

  r = run({"semaphore", "pool", "add", "2"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "7\n");
  r = run({"semaphore", "pool", "add", "-3"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "4\n");

  r = run({"semaphore", "pool", "status", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "{\"semaphore\":\"pool\",\"exists\":true,\"permits\":4,\"ttl_ms\":-1,\"waiters\":0,\"channel\":\"" +
                       semaphore_channel("pool") + "\"}\n");
  r = run({"semaphore", "pool", "status"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "SEMAPHORE  PERMITS  TTL        WAITERS\npool       4        no expiry  0\n")) << r.out;

  r = run({"semaphore", "pool", "drain"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "4\n");
  EXPECT_EQ(get("pool"), "0");

  // A TTL, shown by status; a missing semaphore has no permits.
  r = run({"semaphore", "short", "set", "2", "--ttl", "1m"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_GT(raw()({"PTTL", "short"}).integer, 0);
  r = run({"semaphore", "short", "status", "--json"});
  EXPECT_TRUE(has(r.out, "\"permits\":2,\"ttl_ms\":")) << r.out;
  EXPECT_FALSE(has(r.out, "\"ttl_ms\":-")) << r.out;
  r = run({"semaphore", "missing", "status", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "\"exists\":false,\"permits\":0,\"ttl_ms\":-2")) << r.out;
}

// Each option only with the action that uses it; numbers are whole; the empty name is refused.
TEST_F(cli_semaphore_test, usage_errors_are_64_and_change_nothing) {
  raw()({"SET", "pool", "3"});
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"semaphore", "pool", "add"}, {"semaphore", "pool", "drain", "2"},
        {"semaphore", "pool", "add", "2", "--ttl", "1s"}, {"semaphore", "pool", "release", "1", "--wait", "1s"},
        {"semaphore", "pool", "frob"}, {"semaphore", "pool", "add", "2x"}, {"semaphore", "pool", "set", "-1"},
        {"semaphore", "pool", "acquire", "0"}, {"semaphore", "pool", "drain", "--json"}, {"semaphore", "", "drain"},
        {"latch", "gate", "set"}, {"latch", "gate", "set", "0"}, {"latch", "gate", "down", "--ttl", "1s"},
        {"latch", "gate", "set", "2", "--ttl", "0"}}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 64) << args[2] << ": " << r.err;
    EXPECT_EQ(r.out, "") << args[2];
  }
  EXPECT_EQ(get("pool"), "3");
  EXPECT_EQ(raw()({"EXISTS", "gate"}).integer, 0);
}

TEST_F(cli_semaphore_test, acquire_and_release_and_a_wait_that_runs_out) {
  ASSERT_EQ(run({"semaphore", "pool", "set", "2"}).status, 0);
  auto r = run({"semaphore", "pool", "acquire", "2"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(get("pool"), "0");
  auto t0 = steady::now();
  r = run({"semaphore", "pool", "acquire", "--wait", "300ms"});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_GE(ms_since(t0), 300);
  EXPECT_TRUE(has(r.err, "1 permit of \"pool\" not acquired within 300ms")) << r.err;
  EXPECT_EQ(get("pool"), "0");

  // A waiter without --wait, woken by a release from another process once enough are free.
  auto& waiter = start({"semaphore", "pool", "acquire", "2"});
  ASSERT_TRUE(eventually([&] { return subscribers(semaphore_channel("pool")) == 1; }, 10000ms)) << waiter.err();
  EXPECT_EQ(run({"semaphore", "pool", "release"}).status, 0);
  EXPECT_EQ(get("pool"), "1");
  EXPECT_EQ(run({"semaphore", "pool", "release", "1"}).status, 0);
  EXPECT_EQ(waiter.wait(), 0) << waiter.err();
  EXPECT_EQ(get("pool"), "0");
}

// ---- latch -------------------------------------------------------------------------------------

// Two processes wait; the count reaches zero from the test; both exit 0.
TEST_F(cli_semaphore_test, a_latch_releases_waiters_in_two_processes) {
  auto r = run({"latch", "gate", "set", "2"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "latch \"gate\" set (count 2)\n");
  r = run({"latch", "gate", "set", "5"});
  EXPECT_EQ(r.status, 75);
  EXPECT_TRUE(has(r.err, "\"gate\" exists already (count 2); not changed")) << r.err;

  auto& a = start({"latch", "gate", "wait"});
  auto& b = start({"latch", "gate", "wait", "--wait", "60s"});
  ASSERT_TRUE(eventually([&] { return subscribers(latch_channel("gate")) == 2; }, 10000ms)) << a.err() << b.err();
  r = run({"latch", "gate", "status", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "{\"latch\":\"gate\",\"exists\":true,\"count\":2,\"ttl_ms\":-1,\"waiters\":2,\"channel\":\"" +
                       latch_channel("gate") + "\"}\n");
  EXPECT_EQ(run({"latch", "gate", "down"}).status, 0);
  EXPECT_EQ(get("gate"), "1");
  EXPECT_EQ(subscribers(latch_channel("gate")), 2);  // both still wait
  client c{cfg()};
  c.count_down_latch("gate").count_down();
  EXPECT_EQ(a.wait(), 0) << a.err();
  EXPECT_EQ(b.wait(), 0) << b.err();
  EXPECT_EQ(raw()({"EXISTS", "gate"}).integer, 0);
  // A latch that does not exist reads 0: wait passes at once.
  EXPECT_EQ(run({"latch", "gate", "wait"}).status, 0);
}

TEST_F(cli_semaphore_test, a_deleted_latch_releases_its_waiters_and_a_wait_can_run_out) {
  ASSERT_EQ(run({"latch", "gate", "set", "5", "--ttl", "10m"}).status, 0);
  EXPECT_GT(raw()({"PTTL", "gate"}).integer, 0);
  auto t0 = steady::now();
  auto r = run({"latch", "gate", "wait", "--wait", "300ms"});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_GE(ms_since(t0), 300);
  EXPECT_TRUE(has(r.err, "\"gate\" did not reach zero within 300ms")) << r.err;

  auto& waiter = start({"latch", "gate", "wait"});
  ASSERT_TRUE(eventually([&] { return subscribers(latch_channel("gate")) == 1; }, 10000ms)) << waiter.err();
  client c{cfg()};
  EXPECT_TRUE(c.count_down_latch("gate").delete_latch());
  EXPECT_EQ(waiter.wait(), 0) << waiter.err();
  r = run({"latch", "gate", "status"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "LATCH  COUNT       TTL  WAITERS\ngate   0 (no key)  -    0\n")) << r.out;
}

// ---- status and wrong types ----------------------------------------------------------------------

// A string holding a whole number is a semaphore or a latch: the waiters tell which.
TEST_F(cli_semaphore_test, status_tells_a_semaphore_and_a_latch_by_their_waiters) {
  raw()({"SET", "pool", "0"});
  raw()({"SET", "gate", "3"});
  raw()({"SET", "plain", "7"});
  auto& sem_waiter = start({"semaphore", "pool", "acquire"});
  auto& latch_waiter = start({"latch", "gate", "wait"});
  ASSERT_TRUE(eventually([&] { return subscribers(semaphore_channel("pool")) == 1; }, 10000ms)) << sem_waiter.err();
  ASSERT_TRUE(eventually([&] { return subscribers(latch_channel("gate")) == 1; }, 10000ms)) << latch_waiter.err();

  auto r = run({"status", "pool", "gate", "plain", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "{\"lock\":\"pool\",\"state\":\"set\",\"kind\":\"semaphore\",\"ttl_ms\":-1,\"value\":0,"
                         "\"waiters\":1,"))
      << r.out;
  EXPECT_TRUE(has(r.out, "{\"channel\":\"" + semaphore_channel("pool") + "\",\"subscribers\":1}")) << r.out;
  EXPECT_TRUE(has(r.out, "{\"lock\":\"gate\",\"state\":\"set\",\"kind\":\"latch\",\"ttl_ms\":-1,\"value\":3,"))
      << r.out;
  EXPECT_TRUE(has(r.out, "{\"channel\":\"" + latch_channel("gate") + "\",\"subscribers\":1}")) << r.out;
  EXPECT_TRUE(has(r.out, "{\"lock\":\"plain\",\"state\":\"set\",\"kind\":\"semaphore or latch\",\"ttl_ms\":-1,"
                         "\"value\":7,\"waiters\":0,"))
      << r.out;
  r = run({"status", "pool", "gate", "plain"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "permits 0")) << r.out;
  EXPECT_TRUE(has(r.out, "count 3")) << r.out;
  EXPECT_TRUE(has(r.out, "value 7 (a semaphore's permits or a latch's count)")) << r.out;
  // A semaphore's waiter on a name with no key shows on a free lock's row.
  raw()({"DEL", "pool"});
  r = run({"status", "pool", "--json"});
  EXPECT_TRUE(has(r.out, "\"state\":\"free\"")) << r.out;
  EXPECT_TRUE(has(r.out, "{\"channel\":\"" + semaphore_channel("pool") + "\",\"subscribers\":1}")) << r.out;

  EXPECT_EQ(run({"semaphore", "pool", "set", "1"}).status, 0);
  EXPECT_EQ(sem_waiter.wait(), 0) << sem_waiter.err();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(run({"latch", "gate", "down"}).status, 0);
  EXPECT_EQ(latch_waiter.wait(), 0) << latch_waiter.err();
}

// A key that holds something else: 65, named, and left as it was.
TEST_F(cli_semaphore_test, a_key_of_the_wrong_type_is_65) {
  raw()({"HSET", "h", "f", "v"});
  raw()({"SET", "word", "abc"});
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"semaphore", "h", "status"}, {"semaphore", "h", "add", "1"},
        {"semaphore", "h", "set", "1"}, {"semaphore", "h", "acquire", "--wait", "0"}, {"latch", "h", "down"},
        {"latch", "h", "wait"}, {"latch", "h", "status", "--json"}}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 65) << args[0] << " " << args[2] << ": " << r.err;
    EXPECT_TRUE(has(r.err, "\"h\" is not a ")) << r.err;
    EXPECT_TRUE(has(r.err, "the key holds a hash")) << r.err;
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"semaphore", "word", "status"}, {"semaphore", "word", "release"},
        {"semaphore", "word", "acquire", "--wait", "0"}, {"semaphore", "word", "set", "2"}, {"latch", "word", "down"},
        {"latch", "word", "wait", "--wait", "0"}, {"latch", "word", "set", "2"}}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 65) << args[0] << " " << args[2] << ": " << r.err;
    EXPECT_TRUE(has(r.err, "\"word\" is not a ")) << r.err;
    EXPECT_TRUE(has(r.err, "a string that is not a whole number")) << r.err;
  }
  EXPECT_EQ(raw()({"HGET", "h", "f"}).str, "v");
  EXPECT_EQ(get("word"), "abc");
}

// ---- doctor ------------------------------------------------------------------------------------

/// The line of `text` that reports `check` ("" if none).
std::string check_line(const std::string& text, const std::string& check) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.size() > 5 && line.compare(5, check.size() + 1, check + " ") == 0) return line;
  return {};
}

// The doctor dry-runs the semaphore's and the latch's scripts and channels. A user with the other
// kinds' patterns but not their channels (the documented line before they were in it): a WARN for
// each, whose advice is the documented line (acl_patterns_for), which makes both OK.
TEST_F(cli_semaphore_test, doctor_checks_the_semaphores_and_the_latchs_permissions) {
  auto r = run({"doctor", "locks:*"});
  EXPECT_TRUE(check_line(r.out, "acl.semaphore").starts_with("OK   acl.semaphore")) << r.out;
  EXPECT_TRUE(check_line(r.out, "acl.latch").starts_with("OK   acl.latch")) << r.out;

  const auto acl = acl_patterns_for("locks:*");
  const auto theirs = [](const std::string& ch) {
    for (lock_kind k : {lock_kind::semaphore, lock_kind::latch})
      for (const auto& p : describe(k, "locks:*").acl_channels)
        if (p == ch) return true;
    return false;
  };
  std::vector<std::string> setuser{"ACL", "SETUSER", "app", "on", ">pw", "resetchannels", "+@all"};
  for (const auto& k : acl.keys) setuser.push_back("~" + k);
  for (const auto& ch : acl.channels)
    if (!theirs(ch)) setuser.push_back("&" + ch);
  raw().command(setuser);
  r = run({"doctor", "locks:*", "--acl-user", "app"});
  const std::string sem = check_line(r.out, "acl.semaphore"), latch = check_line(r.out, "acl.latch");
  EXPECT_TRUE(sem.starts_with("WARN")) << r.out;
  EXPECT_TRUE(has(sem, "publish, wait: This user has no permissions to access the '" +
                           semaphore_channel("locks:redlease-doctor") + "' channel"))
      << sem;
  EXPECT_TRUE(latch.starts_with("WARN")) << r.out;
  EXPECT_TRUE(has(latch, latch_channel("locks:redlease-doctor") + "' channel")) << latch;
  const auto advised = sem.substr(sem.find("ACL SETUSER app "));
  EXPECT_TRUE(has(advised, " &redisson_sc:{locks:*")) << advised;
  EXPECT_TRUE(has(advised, " &redisson_countdownlatch__channel__{locks:*")) << advised;
  EXPECT_TRUE(check_line(r.out, "acl.lock").starts_with("OK")) << r.out;

  std::vector<std::string> fix{"ACL", "SETUSER", "app"};
  std::istringstream words(advised.substr(std::string("ACL SETUSER app ").size()));
  for (std::string w; words >> w;) fix.push_back(w);
  raw().command(fix);
  r = run({"doctor", "locks:*", "--acl-user", "app"});
  EXPECT_TRUE(check_line(r.out, "acl.semaphore").starts_with("OK")) << r.out;
  EXPECT_TRUE(check_line(r.out, "acl.latch").starts_with("OK")) << r.out;
}

// ---- run --semaphore ----------------------------------------------------------------------------

// `run --semaphore` holds its permits (kept by the watchdog) while the command runs, which gets their
// ids; `semaphore NAME status` lists them with their leases; a second run that finds none free within
// --wait exits 75; the permits are back once the command has exited.
TEST_F(cli_semaphore_test, run_holds_permits_of_a_permit_expirable_semaphore) {
  client c{cfg()};
  auto s = c.permit_semaphore("jobs");
  ASSERT_TRUE(s.try_set_permits(2));
  const std::string ready = dir_.path("ready"), go = dir_.path("go");
  auto& holder = start({"run", "--semaphore", "jobs", "--permits", "2", "--watchdog-timeout", "3s", "--", "sh", "-c",
                        "echo \"$REDLEASE_PERMIT_IDS\" > " + ready + ".tmp; mv " + ready + ".tmp " + ready +
                            "; while [ ! -e " + go + " ]; do sleep 0.01; done"});
  ASSERT_TRUE(eventually([&] { return !read_whole_file(ready).empty(); }, 10000ms)) << holder.err();
  const std::string ids = read_whole_file(ready);
  ASSERT_EQ(ids.size(), 2 * 32 + 2) << ids;  // "ID ID\n"
  const std::string first = ids.substr(0, 32), second = ids.substr(33, 32);

  auto r = run({"semaphore", "jobs", "status", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has(r.out, "\"permits\":0,")) << r.out;
  EXPECT_TRUE(has(r.out, "\"acquired\":2,\"permits_out\":[{\"id\":\"")) << r.out;
  EXPECT_TRUE(has(r.out, "{\"id\":\"" + first + "\",\"lease_ms\":")) << r.out;
  EXPECT_TRUE(has(r.out, "{\"id\":\"" + second + "\",\"lease_ms\":")) << r.out;
  EXPECT_FALSE(has(r.out, "\"lease_ms\":-")) << "kept by the watchdog: a lease" << r.out;
  r = run({"semaphore", "jobs", "status"});
  EXPECT_TRUE(has(r.out, "\nPERMIT ")) << r.out;
  EXPECT_TRUE(has(r.out, first)) << r.out;

  auto t0 = steady::now();
  r = run({"run", "--semaphore", "jobs", "--wait", "300ms", "--", "true"});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_GE(ms_since(t0), 300);
  EXPECT_TRUE(has(r.err, "1 permit of semaphore \"jobs\" not acquired within 300ms")) << r.err;

  FILE* f = std::fopen(go.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  EXPECT_EQ(holder.wait(), 0) << holder.err();
  EXPECT_EQ(s.available_permits(), 2);
  EXPECT_EQ(s.acquired_permits(), 0);
}

// A permit given back by someone else (by its id) is lost to its holder: the command is stopped and
// run exits 76, as for a lost lock.
TEST_F(cli_semaphore_test, run_stops_the_command_when_its_permit_is_lost) {
  client c{cfg()};
  auto s = c.permit_semaphore("jobs");
  ASSERT_TRUE(s.try_set_permits(1));
  const std::string ready = dir_.path("ready");
  auto& holder = start({"run", "--semaphore", "jobs", "--watchdog-timeout", "900ms", "--", "sh", "-c",
                        "echo > " + ready + "; sleep 30"});
  ASSERT_TRUE(eventually([&] { return !read_whole_file(ready).empty(); }, 10000ms)) << holder.err();
  auto out = s.permits(10);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(s.try_release(std::vector<std::string>{out[0].id}));
  EXPECT_EQ(holder.wait(), 76) << holder.err();
  EXPECT_TRUE(has(holder.err(), "lost")) << holder.err();
  EXPECT_EQ(s.available_permits(), 1);  // given back once, by its releaser
}

// A signal while run waits for permits ends the wait (128+N): the command does not run, and no
// permit is left taken.
TEST_F(cli_semaphore_test, a_signal_ends_a_run_waiting_for_permits) {
  client c{cfg()};
  auto s = c.permit_semaphore("jobs");
  ASSERT_TRUE(s.try_set_permits(0));
  const std::string ran = dir_.path("ran");
  auto& waiter = start({"run", "--semaphore", "jobs", "--", "sh", "-c", "echo ran > " + ran});
  ASSERT_TRUE(eventually([&] { return subscribers(semaphore_channel("jobs")) == 1; }, 10000ms)) << waiter.err();
  ASSERT_EQ(::kill(waiter.pid(), SIGTERM), 0);
  EXPECT_EQ(waiter.wait(), 128 + SIGTERM) << waiter.err();
  EXPECT_TRUE(has(waiter.err(), "SIGTERM while waiting")) << waiter.err();
  EXPECT_TRUE(read_whole_file(ran).empty());
  EXPECT_EQ(s.add_permits(1), 1);
  EXPECT_EQ(s.acquired_permits(), 0);
}

TEST_F(cli_semaphore_test, run_semaphore_usage_errors_are_64) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--permits", "2", "jobs", "--", "true"},
        {"run", "--semaphore", "--mutex", "jobs", "--", "true"}, {"run", "--semaphore", "--redlock", "jobs", "--", "true"},
        {"run", "--semaphore", "--permits", "0", "jobs", "--", "true"}}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 64) << args[1] << " " << args[2] << ": " << r.err;
  }
  EXPECT_EQ(raw()({"EXISTS", "jobs"}).integer, 0);
}

}  // namespace
}  // namespace redlease::test
