// SPDX-License-Identifier: MIT
// `redlease doctor` against real redis-server processes, each set up with one deployment problem:
// every test asserts the status and the words of the line of the check that must catch it. Also the
// INFO parser the doctor uses.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_process.hpp"
#include "info_parser.hpp"
#include "lock_test_support.hpp"
#include "test_certs.hpp"

namespace redlease::test {
namespace {

namespace fs = std::filesystem;

struct result {
  int status = -1;
  std::string out, err;
};

/// Runs `redlease doctor ARGS...` to completion (killed after 20 s), with only `env_extra` of the
/// REDLEASE_* variables.
result run_doctor(const std::vector<std::string>& args, const std::vector<std::string>& env_extra = {}) {
  char tmpl[] = "/tmp/redlease-doctor-test-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return {};
  }
  std::string dir = tmpl;
  std::vector<std::string> argv{"doctor"};
  argv.insert(argv.end(), args.begin(), args.end());
  result r;
  {
    cli_process p(REDLEASE_CLI_PATH, argv, env_extra, dir + "/out", dir + "/err");
    if (p.running()) {
      r.status = p.wait(20s);
      r.out = p.out();
      r.err = p.err();
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return r;
}

/// The line of the human table for `check` ("" if none): "<STATUS> <check> <detail>".
std::string line_of(const std::string& out, const std::string& check) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string status, name;
    words >> status >> name;
    if (name == check) return line;
  }
  return {};
}

std::string status_of(const std::string& out, const std::string& check) {
  std::istringstream words(line_of(out, check));
  std::string status;
  words >> status;
  return status;
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

bool any_fail(const std::string& out) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("FAIL", 0) == 0) return true;
  return false;
}

// A strict JSON reader, just enough to validate the doctor's lines: one object of strings and
// numbers per line (no nesting needed, but arrays/objects/literals are accepted).
class json_reader {
 public:
  explicit json_reader(std::string_view s) : s_(s) {}
  /// Parses one whole object; fills `strings` with its top-level string members.
  bool object(std::map<std::string, std::string>& strings) {
    ws();
    if (!eat('{')) return false;
    ws();
    if (eat('}')) return end();
    for (;;) {
      std::string key, value;
      ws();
      if (!string(key)) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (peek() == '"') {
        if (!string(value)) return false;
        strings[key] = value;
      } else if (!any()) {
        return false;
      }
      ws();
      if (eat(',')) continue;
      if (eat('}')) return end();
      return false;
    }
  }

 private:
  bool end() {
    ws();
    return i_ == s_.size();
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool string(std::string& out) {
    if (!eat('"')) return false;
    while (i_ < s_.size()) {
      auto c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      if (e == 'u') {
        if (i_ + 4 > s_.size()) return false;
        for (int k = 0; k < 4; ++k)
          if (!std::isxdigit(static_cast<unsigned char>(s_[i_ + k]))) return false;
        out += '?';
        i_ += 4;
      } else if (std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos) {
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        return false;
      }
    }
    return false;
  }
  bool any() {
    char c = peek();
    if (c == '"') {
      std::string ignored;
      return string(ignored);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t start = i_;
      if (c == '-') ++i_;
      while (i_ < s_.size() && ((s_[i_] >= '0' && s_[i_] <= '9') || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E' ||
                                s_[i_] == '+' || s_[i_] == '-'))
        ++i_;
      return i_ > start + (c == '-' ? 1 : 0);
    }
    for (std::string_view lit : {"true", "false", "null"})
      if (s_.substr(i_, lit.size()) == lit) {
        i_ += lit.size();
        return true;
      }
    if (eat('[')) {
      ws();
      if (eat(']')) return true;
      for (;;) {
        ws();
        if (!any()) return false;
        ws();
        if (eat(',')) continue;
        return eat(']');
      }
    }
    return false;  // nested objects: the doctor prints none
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

class doctor_test : public ::testing::Test {
 protected:
  void SetUp() override {
    REDLEASE_REQUIRE(redis_server::available(), no_redis_server);
  }
  static std::unique_ptr<redis_server> start(std::vector<std::string> extra = {}, std::string password = {}) {
    server_options o;
    o.extra_args = std::move(extra);
    o.password = std::move(password);
    o.unix_socket = false;
    return std::make_unique<redis_server>(o);
  }
  static std::string url_for(const redis_server& s, const std::string& user, const std::string& password) {
    return "redis://" + user + ":" + password + "@127.0.0.1:" + std::to_string(s.port());
  }
  /// Sends one command made of the words of `line` (no quoting in the doctor's ACL lines).
  static raw_reply send_words(raw_client& c, const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> args;
    for (std::string w; in >> w;) args.push_back(w);
    return c.command(args);
  }
};

// The rules of docs/deployment.md's line for a user limited to `locks:`: what the doctor must
// advise, word for word, for the pattern locks:*. Every kind's keys (names, latch, fencing tokens,
// fair queue and deadlines, read timeout keys) and channels, and TIME (a name's first token).
const std::string documented_keys =
    "~locks:* ~redisson_unlock_latch:{locks:* ~redisson_lock_token:{locks:* ~redlease_mutex_token:{locks:* "
    "~redlease_rwlock_token:{locks:* ~redisson_lock_queue:{locks:* ~redisson_lock_timeout:{locks:* ~{locks:*";
const std::string documented_channels =
    "&redisson_lock__channel:{locks:* &redlease_mutex__channel:{locks:* &redisson_rwlock:{locks:* "
    "&redisson_sc:{locks:* &redisson_countdownlatch__channel__{locks:*";
const std::string documented_commands = "+@read +@write +@scripting +@pubsub +ping +time +client|setname";
const std::string documented_rules = documented_keys + " " + documented_channels + " " + documented_commands;
// The line the docs gave before: the reentrant lock's and the mutex's names, latch and channels only.
const std::string old_documented_rules =
    "~locks:* ~redisson_unlock_latch:{locks:* &redisson_lock__channel:{locks:* &redlease_mutex__channel:{locks:* "
    "+@read +@write +@scripting +@pubsub +ping +client|setname";
// The keys the locks need, without any channel (Redis 7's default for a new user): locks work,
// waiters poll.
const std::string without_channels = documented_keys + " resetchannels " + documented_commands;
// All but the latch pattern: a reentrant release declares its latch key, and is refused.
const std::string without_latch =
    "~locks:* ~redisson_lock_token:{locks:* ~redlease_mutex_token:{locks:* ~redlease_rwlock_token:{locks:* "
    "~redisson_lock_queue:{locks:* ~redisson_lock_timeout:{locks:* ~{locks:* " +
    documented_channels + " " + documented_commands;
// What the doctor itself needs to check without touching keys.
const std::string doctor_rights = "+acl|dryrun +acl|whoami +info +config|get +command|info +time";

/// True once the server has logged a refused access to `channel` (ACL LOG).
bool refused_channel(raw_client& admin, const std::string& channel) {
  auto log = admin({"ACL", "LOG"});
  for (const auto& entry : log.elements)
    for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2)
      if (entry.elements[i].str == "object" && entry.elements[i + 1].str == channel) return true;
  return false;
}

/// The ACL SETUSER line in the advice of `line` ("" if none).
std::string advised_line(const std::string& line, const std::string& user) {
  auto at = line.find("ACL SETUSER " + user + " ");
  return at == std::string::npos ? std::string() : line.substr(at);
}

TEST_F(doctor_test, healthy_default_server_has_no_fail_and_warns_about_persistence) {
  auto s = start();
  auto r = run_doctor({"--redis", s->url()});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(any_fail(r.out)) << r.out;
  EXPECT_EQ(status_of(r.out, "connectivity"), "OK") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "connectivity"), "user default")) << r.out;
  EXPECT_EQ(status_of(r.out, "latency"), "OK") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "latency"), "PING median")) << r.out;
  EXPECT_TRUE(has(line_of(r.out, "version"), "Redis 7.")) << r.out;
  EXPECT_TRUE(has(line_of(r.out, "topology"), "master, 0 replicas")) << r.out;
  EXPECT_EQ(status_of(r.out, "acl"), "OK") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "acl"), "ACL DRYRUN")) << r.out;
  for (auto check :
       {"acl.lock", "acl.mutex", "acl.fair", "acl.rwlock", "acl.commands", "eviction", "memory", "min-replicas",
        "commands", "clock"})
    EXPECT_EQ(status_of(r.out, check), "OK") << check << "\n" << r.out;
  EXPECT_TRUE(has(line_of(r.out, "eviction"), "noeviction")) << r.out;
  EXPECT_EQ(status_of(r.out, "persistence"), "WARN") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "persistence"), "no AOF and no replica")) << r.out;
  EXPECT_TRUE(has(line_of(r.out, "persistence"), "longest lease")) << r.out;
  EXPECT_TRUE(has(line_of(r.out, "persistence"), "appendfsync always")) << r.out;
  EXPECT_TRUE(has(line_of(r.out, "summary"), "0 FAIL")) << r.out;
  EXPECT_EQ(r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1, 12), "WARN summary") << r.out;
  // Nothing is left on the server: DRYRUN touches no key.
  EXPECT_EQ(s->client()({"DBSIZE"}).integer, 0);
}

TEST_F(doctor_test, live_probe_warns_that_waiters_poll_without_channels_and_the_advised_line_wakes_them) {
  auto s = start();
  auto admin = s->client();
  ASSERT_TRUE(send_words(admin, "ACL SETUSER locker on >pw " + without_channels).is_ok());
  auto r = run_doctor({"--redis", url_for(*s, "locker", "pw"), "locks:*"});
  // Locks work without the channels: WARN lines, no FAIL.
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(any_fail(r.out)) << r.out;
  // DRYRUN is refused to such a user: the doctor says so and probes with the library.
  EXPECT_EQ(status_of(r.out, "acl"), "WARN") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "acl"), "ACL DRYRUN refused")) << r.out;
  const std::string lock_ch = "redisson_lock__channel:{locks:redlease-doctor}";
  const std::string mutex_ch = "redlease_mutex__channel:{locks:redlease-doctor-mutex}";
  // The releases work: their PUBLISH is skipped, not fatal.
  for (auto check : {"probe.lock.acquire", "probe.lock.release", "probe.mutex.acquire", "probe.mutex.release"})
    EXPECT_EQ(status_of(r.out, check), "OK") << check << "\n" << r.out;
  EXPECT_EQ(admin({"EXISTS", "locks:redlease-doctor"}).integer, 0);
  EXPECT_EQ(admin({"EXISTS", "locks:redlease-doctor-mutex"}).integer, 0);
  std::string publish = line_of(r.out, "probe.publish");
  EXPECT_EQ(status_of(r.out, "probe.publish"), "WARN") << r.out;
  EXPECT_TRUE(has(publish, lock_ch + ": NOPERM")) << publish;
  EXPECT_TRUE(has(publish, "locks work, but a release skips its unlock message")) << publish;
  std::string wait = line_of(r.out, "probe.wait");
  EXPECT_EQ(status_of(r.out, "probe.wait"), "WARN") << r.out;
  EXPECT_TRUE(has(wait, lock_ch + ": NOPERM")) << wait;
  EXPECT_TRUE(has(wait, mutex_ch + ": NOPERM")) << wait;
  EXPECT_TRUE(has(wait, "poll with backoff (10 ms doubling to 500 ms) instead of being woken at once")) << wait;
  std::string acl = advised_line(wait, "locker");
  EXPECT_EQ(acl, "ACL SETUSER locker " + documented_rules) << wait;
  EXPECT_EQ(advised_line(publish, "locker"), acl) << publish;

  // What the WARN says: the library works for that user, its waiters poll instead of sleeping out
  // the holder's lease.
  auto cfg = config::from_url(url_for(*s, "locker", "pw"));
  {
    client holder{cfg}, waiter{cfg};
    auto held = holder.lock("locks:poll");
    ASSERT_TRUE(held.try_lock(0ms, 10000ms));  // a 10 s lease: sleeping it out would be obvious
    std::atomic<long long> got_after{-1};
    std::thread t([&] {
      auto l = waiter.lock("locks:poll");
      if (l.try_lock(8000ms)) {
        got_after = 1;
        l.unlock();
      }
    });
    // The waiter is waiting once its SUBSCRIBE was refused: the server logs the refusal.
    EXPECT_TRUE(eventually([&] { return refused_channel(admin, "redisson_lock__channel:{locks:poll}"); }, 10000ms));
    auto t_unlock = steady::now();
    held.unlock();
    t.join();
    EXPECT_EQ(got_after.load(), 1);
    EXPECT_LT(ms_since(t_unlock), 2000) << "the waiter slept out the lease";
  }

  // Exactly the advised line, on a user that has nothing else: every step passes.
  ASSERT_TRUE(admin({"ACL", "DELUSER", "locker"}).type == raw_reply::kind::integer);
  ASSERT_TRUE(admin({"ACL", "SETUSER", "locker", "on", ">pw"}).is_ok());
  auto applied = send_words(admin, acl);
  ASSERT_TRUE(applied.is_ok()) << applied.to_string() << " for " << acl;
  r = run_doctor({"--redis", url_for(*s, "locker", "pw"), "locks:*"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(any_fail(r.out)) << r.out;
  for (auto check : {"connectivity", "latency", "probe.lock.acquire", "probe.lock.release", "probe.mutex.acquire",
                     "probe.mutex.release", "probe.publish", "probe.wait", "probe.fencing", "probe.fair",
                     "probe.rwlock", "commands"})
    EXPECT_EQ(status_of(r.out, check), "OK") << check << "\n" << r.out;
  // What the doctor cannot read as this user is a WARN, never a FAIL.
  EXPECT_EQ(status_of(r.out, "eviction"), "WARN") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "eviction"), "cannot read")) << r.out;

  // And the library really works for that user: a waiter is woken by the holder's unlock message
  // (long before the holder's lease would run out), and the watchdog renews.
  cfg.watchdog_timeout = 3000ms;
  client holder{cfg}, waiter{cfg};
  auto held = holder.lock("locks:job");
  held.lock();
  EXPECT_TRUE(eventually([&] { return holder.stats().renewed_locks > 0; }, 10000ms));  // renewed every 1 s
  std::atomic<long long> woke_after{-1};
  std::thread t([&] {
    auto l = waiter.lock("locks:job");
    auto t0 = steady::now();
    if (l.try_lock(5000ms)) {
      woke_after = ms_since(t0);
      l.unlock();
    }
  });
  EXPECT_TRUE(eventually([&] {
    return admin({"PUBSUB", "NUMSUB", "redisson_lock__channel:{locks:job}"}).elements[1].integer == 1;
  }));
  auto t_unlock = steady::now();
  held.unlock();
  t.join();
  EXPECT_GE(woke_after.load(), 0);
  EXPECT_LT(ms_since(t_unlock), 1000);  // the lease had ~2 s left: the message woke the waiter
}

TEST_F(doctor_test, acl_dryrun_warns_about_the_channels_and_agrees_with_the_live_probe) {
  auto s = start();
  auto admin = s->client();
  ASSERT_TRUE(send_words(admin, "ACL SETUSER watcher on >pw " + without_channels + " " + doctor_rights).is_ok());
  auto r = run_doctor({"--redis", url_for(*s, "watcher", "pw"), "--probe", "locks:*"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(any_fail(r.out)) << r.out;
  EXPECT_EQ(status_of(r.out, "acl"), "OK") << r.out;
  std::string line = line_of(r.out, "acl.lock");
  EXPECT_EQ(status_of(r.out, "acl.lock"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "publish, wait: This user has no permissions to access the "
                        "'redisson_lock__channel:{locks:redlease-doctor}' channel"))
      << r.out;
  EXPECT_TRUE(has(line, "locks work, but")) << line;
  EXPECT_TRUE(has(line, "poll with backoff")) << line;
  EXPECT_EQ(status_of(r.out, "acl.mutex"), "WARN") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "acl.mutex"), "'redlease_mutex__channel:{locks:redlease-doctor-mutex}' channel"))
      << r.out;
  EXPECT_EQ(status_of(r.out, "acl.commands"), "OK") << r.out;
  EXPECT_EQ(status_of(r.out, "probe.lock.release"), "OK") << r.out;
  EXPECT_EQ(status_of(r.out, "probe.publish"), "WARN") << r.out;
  EXPECT_EQ(status_of(r.out, "probe.wait"), "WARN") << r.out;
  std::string acl = advised_line(line, "watcher");
  EXPECT_EQ(acl, "ACL SETUSER watcher " + documented_rules) << line;
  // An administrator checking the user by name sees the same (and no key is touched).
  auto by_admin = run_doctor({"--redis", s->url(), "--acl-user", "watcher", "locks:*"});
  EXPECT_EQ(by_admin.status, 0) << by_admin.out;
  EXPECT_EQ(line_of(by_admin.out, "acl.lock"), line) << by_admin.out;
  EXPECT_EQ(admin({"DBSIZE"}).integer, 0);
  EXPECT_EQ(status_of(run_doctor({"--redis", s->url(), "--acl-user", "nosuch"}).out, "acl"), "FAIL");

  ASSERT_TRUE(send_words(admin, acl).is_ok());
  r = run_doctor({"--redis", url_for(*s, "watcher", "pw"), "--probe", "locks:*"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(any_fail(r.out)) << r.out;
  for (auto check : {"acl.lock", "acl.mutex", "acl.commands", "probe.lock.release", "probe.mutex.release",
                     "probe.publish", "probe.wait"})
    EXPECT_EQ(status_of(r.out, check), "OK") << check << "\n" << r.out;
  by_admin = run_doctor({"--redis", s->url(), "--acl-user", "watcher", "locks:*"});
  EXPECT_EQ(by_admin.status, 0) << by_admin.out;
  EXPECT_EQ(status_of(by_admin.out, "acl.lock"), "OK") << by_admin.out;
  EXPECT_EQ(status_of(by_admin.out, "acl.mutex"), "OK") << by_admin.out;
}

TEST_F(doctor_test, missing_latch_key_permission_fails_the_reentrant_release) {
  auto s = start();
  auto admin = s->client();
  ASSERT_TRUE(send_words(admin, "ACL SETUSER nolatch on >pw " + without_latch).is_ok());
  // ACL DRYRUN, by an administrator: the release declares the latch key.
  auto r = run_doctor({"--redis", s->url(), "--acl-user", "nolatch", "locks:*"});
  EXPECT_EQ(r.status, 78) << r.out << r.err;
  std::string line = line_of(r.out, "acl.lock");
  EXPECT_EQ(status_of(r.out, "acl.lock"), "FAIL") << r.out;
  EXPECT_TRUE(has(line, "release: This user has no permissions to access the "
                        "'redisson_unlock_latch:{locks:redlease-doctor}:"))
      << line;
  EXPECT_FALSE(has(line, "acquire")) << line;
  EXPECT_EQ(advised_line(line, "nolatch"), "ACL SETUSER nolatch " + documented_rules) << line;
  EXPECT_EQ(status_of(r.out, "acl.mutex"), "OK") << r.out;  // a mutex has no latch
  // The fair and read-write releases declare it too: those kinds cannot be used (WARN, named).
  EXPECT_EQ(status_of(r.out, "acl.fair"), "WARN") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "acl.fair"), "the fair lock cannot be used by user nolatch")) << r.out;
  EXPECT_TRUE(has(line_of(r.out, "acl.fair"), "release: This user has no permissions to access the "
                                              "'redisson_unlock_latch:{locks:redlease-doctor}:"))
      << r.out;
  EXPECT_EQ(status_of(r.out, "acl.rwlock"), "WARN") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "acl.rwlock"), "the read-write lock cannot be used by user nolatch")) << r.out;
  EXPECT_EQ(status_of(r.out, "acl.commands"), "FAIL") << r.out;  // the EVAL fallback declares it too
  EXPECT_TRUE(has(line_of(r.out, "acl.commands"), "EVAL (after NOSCRIPT)")) << r.out;

  // Live, as the user: the release fails with the server's words, and the probe's lock is not left
  // held for its lease (force-unlock needs the name only).
  r = run_doctor({"--redis", url_for(*s, "nolatch", "pw"), "locks:*"});
  EXPECT_EQ(r.status, 78) << r.out << r.err;
  EXPECT_EQ(status_of(r.out, "probe.lock.acquire"), "OK") << r.out;
  line = line_of(r.out, "probe.lock.release");
  EXPECT_EQ(status_of(r.out, "probe.lock.release"), "FAIL") << r.out;
  EXPECT_TRUE(has(line, "NOPERM")) << line;
  EXPECT_EQ(advised_line(line, "nolatch"), "ACL SETUSER nolatch " + documented_rules) << line;
  EXPECT_EQ(status_of(r.out, "probe.lock.release.cleanup"), "OK") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "probe.lock.release.cleanup"), "force-unlocked locks:redlease-doctor")) << r.out;
  EXPECT_EQ(admin({"EXISTS", "locks:redlease-doctor"}).integer, 0);
  for (auto check : {"probe.mutex.release", "probe.publish", "probe.wait"})
    EXPECT_EQ(status_of(r.out, check), "OK") << check << "\n" << r.out;
}

// The line the docs recommended before covered the reentrant lock and the mutex without fencing, and
// the doctor called it OK throughout. It now says what that line breaks: fencing tokens on acl.lock
// and acl.mutex (and TIME on acl.commands), and the fair and read-write locks by name (WARN, not
// FAIL: the other kinds work). The advised line makes every kind work, fenced.
TEST_F(doctor_test, the_old_documented_acl_line_warns_naming_fencing_and_the_kinds_it_breaks) {
  auto s = start();
  auto admin = s->client();
  ASSERT_TRUE(send_words(admin, "ACL SETUSER old on >pw " + old_documented_rules).is_ok());
  auto r = run_doctor({"--redis", s->url(), "--acl-user", "old", "locks:*"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(any_fail(r.out)) << r.out;
  const std::string fenced = "locks work, but fenced acquisitions (lock_and_get_token) fail with no_permission";
  std::string line = line_of(r.out, "acl.lock");
  EXPECT_EQ(status_of(r.out, "acl.lock"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "fencing: This user has no permissions to access the "
                        "'redisson_lock_token:{locks:redlease-doctor}' key"))
      << line;
  EXPECT_TRUE(has(line, fenced)) << line;
  EXPECT_TRUE(has(line, "grant user old the fencing token keys")) << line;
  line = line_of(r.out, "acl.mutex");
  EXPECT_EQ(status_of(r.out, "acl.mutex"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "'redlease_mutex_token:{locks:redlease-doctor-mutex}' key")) << line;
  EXPECT_TRUE(has(line, fenced)) << line;
  line = line_of(r.out, "acl.fair");
  EXPECT_EQ(status_of(r.out, "acl.fair"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "the fair lock cannot be used by user old (the other kinds are not affected)")) << line;
  EXPECT_TRUE(has(line, "acquire, release, give-up, force-unlock: This user has no permissions to access the "
                        "'redisson_lock_queue:{locks:redlease-doctor}' key"))
      << line;
  line = line_of(r.out, "acl.rwlock");
  EXPECT_EQ(status_of(r.out, "acl.rwlock"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "the read-write lock cannot be used by user old")) << line;
  EXPECT_TRUE(has(line, "read timeout key: This user has no permissions to access the '{locks:redlease-doctor}:"))
      << line;
  EXPECT_TRUE(has(line, ":rwlock_timeout:1' key")) << line;
  EXPECT_TRUE(has(line, "'redisson_rwlock:{locks:redlease-doctor}' channel")) << line;
  line = line_of(r.out, "acl.commands");
  EXPECT_EQ(status_of(r.out, "acl.commands"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "TIME (the first fencing token of a name): This user has no permissions to run the 'time' "
                        "command"))
      << line;
  EXPECT_TRUE(has(line, "grant user old the TIME command")) << line;
  for (auto check : {"acl.lock", "acl.mutex", "acl.fair", "acl.rwlock", "acl.commands"})
    EXPECT_EQ(advised_line(line_of(r.out, check), "old"), "ACL SETUSER old " + documented_rules) << check;

  // Probed live as that user (no ACL DRYRUN): the same, read without writing anything.
  r = run_doctor({"--redis", url_for(*s, "old", "pw"), "locks:*"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  for (auto check : {"probe.lock.acquire", "probe.lock.release", "probe.mutex.acquire", "probe.mutex.release"})
    EXPECT_EQ(status_of(r.out, check), "OK") << check << "\n" << r.out;
  line = line_of(r.out, "probe.fencing");
  EXPECT_EQ(status_of(r.out, "probe.fencing"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "token key redisson_lock_token:{locks:redlease-doctor}: NOPERM")) << line;
  EXPECT_TRUE(has(line, "TIME: NOPERM")) << line;
  EXPECT_TRUE(has(line, fenced)) << line;
  line = line_of(r.out, "probe.fair");
  EXPECT_EQ(status_of(r.out, "probe.fair"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "the other kinds work, but the fair lock cannot be used")) << line;
  line = line_of(r.out, "probe.rwlock");
  EXPECT_EQ(status_of(r.out, "probe.rwlock"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "the other kinds work, but read locks cannot be taken")) << line;
  for (auto check : {"probe.fencing", "probe.fair", "probe.rwlock"})
    EXPECT_EQ(advised_line(line_of(r.out, check), "old"), "ACL SETUSER old " + documented_rules) << check;
  EXPECT_EQ(admin({"DBSIZE"}).integer, 0);  // nothing written

  // What the WARNs say is what the library finds: a fenced acquisition is refused.
  auto cfg = config::from_url(url_for(*s, "old", "pw"));
  {
    client c{cfg};
    std::error_code ec;
    c.lock("locks:fenced").lock_and_get_token(ec);
    EXPECT_EQ(ec, errc::no_permission);
  }

  // The advised line: every check passes, and every kind takes a fenced lock and releases it.
  ASSERT_TRUE(send_words(admin, "ACL SETUSER old " + documented_rules).is_ok());
  r = run_doctor({"--redis", s->url(), "--acl-user", "old", "locks:*"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  for (auto check : {"acl.lock", "acl.mutex", "acl.fair", "acl.rwlock", "acl.commands"})
    EXPECT_EQ(status_of(r.out, check), "OK") << check << "\n" << r.out;
  r = run_doctor({"--redis", url_for(*s, "old", "pw"), "locks:*"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  for (auto check : {"probe.lock.release", "probe.mutex.release", "probe.publish", "probe.wait", "probe.fencing",
                     "probe.fair", "probe.rwlock"})
    EXPECT_EQ(status_of(r.out, check), "OK") << check << "\n" << r.out;
  client c{cfg};
  std::vector<detail::lock_handle> locks{c.lock("locks:k1"), c.mutex("locks:k2"), c.fair_lock("locks:k3"),
                                         c.read_lock("locks:k4"), c.write_lock("locks:k5")};
  for (auto& l : locks) {
    std::error_code ec;
    auto token = l.try_lock_and_get_token(0ms, ec);
    EXPECT_FALSE(ec) << l.name() << ": " << ec.message() << " " << last_error_text();
    EXPECT_TRUE(token && *token > 0) << l.name();
    if (token) l.unlock(ec);
    EXPECT_FALSE(ec) << l.name() << ": " << ec.message() << " " << last_error_text();
  }
}

TEST_F(doctor_test, keyspace_channel_is_checked_when_mutex_waiters_would_use_it) {
  auto s = start({"--notify-keyspace-events", "KEA"});
  auto admin = s->client();
  // The documented line, and CONFIG GET (the library asks whether keyspace events are on).
  ASSERT_TRUE(send_words(admin, "ACL SETUSER ks on >pw " + documented_rules + " +config|get").is_ok());
  auto r = run_doctor({"--redis", s->url(), "--acl-user", "ks", "locks:*"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  std::string line = line_of(r.out, "acl.mutex");
  EXPECT_EQ(status_of(r.out, "acl.mutex"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "'__keyspace@0__:locks:redlease-doctor-mutex' channel")) << line;
  EXPECT_TRUE(has(line, "poll with backoff")) << line;
  std::string acl = advised_line(line, "ks");
  EXPECT_EQ(acl, "ACL SETUSER ks " + documented_rules + " &__keyspace@0__:locks:*") << line;
  EXPECT_EQ(status_of(r.out, "acl.lock"), "OK") << r.out;
  ASSERT_TRUE(send_words(admin, acl).is_ok());
  r = run_doctor({"--redis", url_for(*s, "ks", "pw"), "locks:*"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(status_of(r.out, "probe.wait"), "OK") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "probe.wait"), "__keyspace@0__:locks:redlease-doctor-mutex")) << r.out;
}

TEST_F(doctor_test, renamed_evalsha_fails) {
  auto s = start({"--rename-command", "EVALSHA", ""});
  auto r = run_doctor({"--redis", s->url()});
  EXPECT_EQ(r.status, 78) << r.out << r.err;
  EXPECT_EQ(status_of(r.out, "commands"), "FAIL") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "commands"), "renamed or disabled")) << r.out;
  EXPECT_TRUE(has(line_of(r.out, "commands"), "EVALSHA")) << r.out;
  EXPECT_FALSE(has(line_of(r.out, "commands"), "EVAL,")) << r.out;  // EVAL itself is there
  EXPECT_TRUE(has(line_of(r.out, "commands"), "rename-command")) << r.out;
  EXPECT_EQ(status_of(r.out, "acl.lock"), "FAIL") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "acl.lock"), "'EVALSHA' not found")) << r.out;
}

TEST_F(doctor_test, renamed_publish_warns_that_releases_wake_no_waiter) {
  // The scripts PUBLISH through pcall: locks work without it.
  auto s = start({"--rename-command", "PUBLISH", ""});
  auto r = run_doctor({"--redis", s->url(), "--probe"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_FALSE(any_fail(r.out)) << r.out;
  std::string line = line_of(r.out, "commands");
  EXPECT_EQ(status_of(r.out, "commands"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "PUBLISH")) << line;
  EXPECT_TRUE(has(line, "locks work, but a release skips its unlock message")) << line;
  EXPECT_TRUE(has(line, "rename-command")) << line;
  EXPECT_EQ(status_of(r.out, "acl.lock"), "WARN") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "acl.lock"), "rename-command")) << r.out;  // not an ACL line
  EXPECT_EQ(status_of(r.out, "probe.lock.release"), "OK") << r.out;
  EXPECT_EQ(status_of(r.out, "probe.publish"), "WARN") << r.out;
  EXPECT_EQ(status_of(r.out, "probe.wait"), "OK") << r.out;
}

// The commands the scripts call are read from the embedded scripts, so every lock kind's are
// checked: one that only the fair lock needs breaks that kind (WARN, naming it; the reentrant lock
// and mutex are not affected), one the scripts can do without only costs speed, and the token's
// INCR only fencing.
TEST_F(doctor_test, renamed_commands_of_other_kinds_name_the_kind_they_break) {
  auto s = start({"--rename-command", "ZADD", "", "--rename-command", "LPOS", "", "--rename-command", "INCR", "",
                  "--rename-command", "UNLINK", ""});
  auto r = run_doctor({"--redis", s->url()});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  std::string line = line_of(r.out, "commands");
  EXPECT_EQ(status_of(r.out, "commands"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "ZADD: the fair lock and the permit-expirable semaphore cannot work")) << line;
  EXPECT_TRUE(has(line, "LPOS: a fair waiter that gives up reads the whole queue")) << line;
  EXPECT_TRUE(has(line, "INCR: fencing tokens cannot work")) << line;
  EXPECT_TRUE(has(line, "UNLINK: a forced unlock deletes the lock with DEL")) << line;
  EXPECT_FALSE(has(line, "the reentrant lock and mutex")) << line;
  EXPECT_TRUE(has(line, "rename-command")) << line;
  // One of the reentrant lock's own script commands: FAIL.
  auto core = start({"--rename-command", "HINCRBY", ""});
  r = run_doctor({"--redis", core->url()});
  EXPECT_EQ(r.status, 78) << r.out << r.err;
  EXPECT_EQ(status_of(r.out, "commands"), "FAIL") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "commands"), "HINCRBY: the reentrant lock and mutex")) << r.out;
}

TEST_F(doctor_test, memory_near_maxmemory_warns_that_acquisitions_are_refused_not_releases) {
  auto s = start({"--maxmemory-policy", "noeviction"});
  auto admin = s->client();
  // 16 MiB of data and 1 MiB of room (about 95 %): the doctor's own connections (a few hundred KiB
  // at most) do not reach the limit, so its trial grant is taken.
  for (int i = 0; i < 16; ++i) admin({"SET", "filler:" + std::to_string(i), std::string(1 << 20, 'x')});
  auto used = cli::parse_info(admin({"INFO", "memory"}).str).integer("used_memory");
  ASSERT_TRUE(used);
  ASSERT_TRUE(admin({"CONFIG", "SET", "maxmemory", std::to_string(*used + (1 << 20))}).is_ok());
  auto r = run_doctor({"--redis", s->url()});
  std::string line = line_of(r.out, "memory");
  EXPECT_EQ(status_of(r.out, "memory"), "WARN") << r.out;
  EXPECT_TRUE(has(line, "near the limit")) << line;
  EXPECT_TRUE(has(line, "new acquisitions are refused with OOM")) << line;
  EXPECT_TRUE(has(line, "releases still work")) << line;
  EXPECT_FALSE(has(line, "HINCRBY")) << line;  // Redis 7: the allow-oom release
  EXPECT_EQ(r.status, 0) << r.out;
  admin({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(admin({"EXISTS", "redlease-doctor"}).integer, 0);  // the trial grant was released
}

// Past maxmemory with noeviction every grant is refused (OOM): the doctor tries one and FAILs,
// whatever the figures alone would say, and its summary does not say "locks work".
TEST_F(doctor_test, a_server_that_refuses_every_grant_for_memory_fails) {
  auto s = start({"--maxmemory-policy", "noeviction"});
  auto admin = s->client();
  ASSERT_TRUE(admin({"CONFIG", "SET", "maxmemory", "1"}).is_ok());
  auto r = run_doctor({"--redis", s->url()});
  EXPECT_EQ(r.status, 78) << r.out << r.err;
  const std::string line = line_of(r.out, "memory");
  EXPECT_EQ(status_of(r.out, "memory"), "FAIL") << r.out;
  EXPECT_TRUE(has(line, "a grant of redlease-doctor is refused: OOM command not allowed")) << line;
  EXPECT_TRUE(has(line, "fix: the server is out of memory with nothing to evict: raise maxmemory")) << line;
  EXPECT_EQ(status_of(r.out, "summary"), "FAIL") << r.out;
  EXPECT_FALSE(has(line_of(r.out, "summary"), "locks work")) << r.out;
  admin({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(admin({"EXISTS", "redlease-doctor"}).integer, 0);
}

// Each TLS failure's line says what to change, as the CLI's flags: the CA (--cacert), the name
// (--sni), the certificate's dates, the scheme.
TEST_F(doctor_test, a_tls_failure_has_a_fix_line_for_its_cause) {
  REDLEASE_REQUIRE(test_certs::available(), "openssl not found");
  test_certs certs;
  auto tls_server = [&](const cert_pair& pair) {
    server_options o;
    o.unix_socket = false;
    o.tls.cert_file = pair.cert;
    o.tls.key_file = pair.key;
    o.tls.ca_file = certs.ca();
    return std::make_unique<redis_server>(o);
  };
  auto expect_fix = [&](const std::vector<std::string>& args, const std::string& fix) {
    auto r = run_doctor(args);
    EXPECT_EQ(r.status, 69) << r.out << r.err;
    const std::string line = line_of(r.out, "connectivity");
    EXPECT_EQ(status_of(r.out, "connectivity"), "FAIL") << r.out;
    EXPECT_TRUE(has(line, "; fix: " + fix)) << line;
  };
  auto good = tls_server(certs.server());
  expect_fix({"--redis", good->tls_url(), "--cacert", certs.other_ca()},
             "the server's certificate is signed by a CA this machine does not trust: pass that CA with --cacert");
  expect_fix({"--redis", "redis://127.0.0.1:" + std::to_string(good->tls_port())},
             "the port speaks TLS: use rediss://");
  auto named = tls_server(certs.localhost_only());
  expect_fix({"--redis", named->tls_url(), "--cacert", certs.ca()},
             "the certificate does not name the host connected to: connect with a name it holds (the URL's host, "
             "or --sni NAME)");
  auto expired = tls_server(certs.expired());
  expect_fix({"--redis", expired->tls_url(), "--cacert", certs.ca()},
             "the server's certificate has expired or is not valid yet: renew it");
}

TEST_F(doctor_test, allkeys_lru_warns_that_locks_can_be_evicted) {
  auto s = start({"--maxmemory-policy", "allkeys-lru"});
  auto r = run_doctor({"--redis", s->url()});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(status_of(r.out, "eviction"), "WARN") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "eviction"), "allkeys-lru")) << r.out;
  EXPECT_TRUE(has(line_of(r.out, "eviction"), "noeviction")) << r.out;
}

TEST_F(doctor_test, min_replicas_to_write_without_a_replica_fails) {
  auto s = start({"--min-replicas-to-write", "1"});
  auto r = run_doctor({"--redis", s->url()});
  EXPECT_EQ(r.status, 78) << r.out << r.err;
  EXPECT_EQ(status_of(r.out, "min-replicas"), "FAIL") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "min-replicas"), "min-replicas-to-write 1")) << r.out;
  EXPECT_TRUE(has(line_of(r.out, "min-replicas"), "NOREPLICAS")) << r.out;
}

TEST_F(doctor_test, maxclients_reached_exits_69_saying_so) {
  auto s = start({"--maxclients", "1"});
  // Take the only slot (the fixture's own probe may still be closing: retry until ours is in).
  std::unique_ptr<raw_client> hog;
  ASSERT_TRUE(eventually([&] {
    hog = std::make_unique<raw_client>(s->client());
    return hog->command({"PING"}).str == "PONG";
  }));
  auto r = run_doctor({"--redis", s->url()});
  EXPECT_EQ(r.status, 69) << r.out << r.err;
  EXPECT_EQ(status_of(r.out, "connectivity"), "FAIL") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "connectivity"), "max number of clients reached")) << r.out;
  EXPECT_TRUE(has(line_of(r.out, "connectivity"), "maxclients")) << r.out;
}

TEST_F(doctor_test, wrong_password_exits_69) {
  auto s = start({}, "s3cret");
  std::string bare = "redis://127.0.0.1:" + std::to_string(s->port());
  auto r = run_doctor({"--redis", "redis://:wrong@127.0.0.1:" + std::to_string(s->port())});
  EXPECT_EQ(r.status, 69) << r.out << r.err;
  EXPECT_EQ(status_of(r.out, "connectivity"), "FAIL") << r.out;
  EXPECT_TRUE(has(line_of(r.out, "connectivity"), "authentication failed")) << r.out;
  EXPECT_EQ(run_doctor({"--redis", bare}, {"REDLEASE_PASSWORD=wrong"}).status, 69);
  r = run_doctor({"--redis", bare}, {"REDLEASE_PASSWORD=s3cret"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(has(line_of(r.out, "connectivity"), "authenticated")) << r.out;
}

TEST_F(doctor_test, json_lines_are_objects_with_the_four_fields) {
  // A server with FAILs, and --probe: details then hold the library's quoted messages.
  auto s = start({"--rename-command", "EVALSHA", ""});
  auto r = run_doctor({"--redis", s->url(), "--json", "--probe"});
  EXPECT_EQ(r.status, 78) << r.out << r.err;
  std::istringstream in(r.out);
  std::vector<std::map<std::string, std::string>> lines;
  for (std::string line; std::getline(in, line);) {
    std::map<std::string, std::string> fields;
    ASSERT_TRUE(json_reader(line).object(fields)) << "not a JSON object: " << line;
    for (auto key : {"check", "status", "detail", "advice"})
      ASSERT_TRUE(fields.count(key)) << key << " missing in " << line;
    EXPECT_TRUE(fields["status"] == "OK" || fields["status"] == "WARN" || fields["status"] == "FAIL") << line;
    lines.push_back(fields);
  }
  ASSERT_GE(lines.size(), 10u) << r.out;
  EXPECT_EQ(lines.back()["check"], "summary");
  EXPECT_EQ(lines.back()["status"], "FAIL");
  bool seen = false;
  for (auto& f : lines)
    if (f["check"] == "probe.lock.acquire") {
      seen = true;
      EXPECT_EQ(f["status"], "FAIL");
      EXPECT_TRUE(has(f["detail"], "try_lock \"redlease-doctor\"")) << f["detail"];
      EXPECT_TRUE(has(f["detail"], "unknown command 'EVALSHA'")) << f["detail"];
      EXPECT_TRUE(has(f["advice"], "rename-command")) << f["advice"];
    }
  EXPECT_TRUE(seen) << r.out;
}

TEST(doctor_info_parser, sections_fields_and_oddities) {
  auto info = cli::parse_info(
      "# Server\r\nredis_version:7.0.15\r\nos:Linux 6.1 x86_64\r\n\r\n# Replication\r\nrole:master\r\n"
      "connected_slaves:1\r\nslave0:ip=10.0.0.2,port=6380,state=online,offset=1,lag=0\r\n"
      "nocolon\r\n:nokey\r\nrole:again\nbare_lf:1\nurl:redis://x:1");
  EXPECT_EQ(info.sections, (std::vector<std::string>{"Server", "Replication"}));
  EXPECT_EQ(info.get("redis_version"), "7.0.15");
  EXPECT_EQ(info.get("os"), "Linux 6.1 x86_64");
  EXPECT_EQ(info.get("role"), "master");  // the first value of a repeated key
  EXPECT_EQ(info.section_of["role"], "Replication");
  EXPECT_EQ(info.integer("connected_slaves"), 1);
  EXPECT_EQ(info.integer("bare_lf"), 1);
  EXPECT_EQ(info.get("url"), "redis://x:1");  // split at the first ':'
  EXPECT_FALSE(info.get("nocolon"));
  EXPECT_FALSE(info.integer("os"));
  auto slave = cli::info_subfields(*info.get("slave0"));
  EXPECT_EQ(slave["ip"], "10.0.0.2");
  EXPECT_EQ(slave["state"], "online");
  EXPECT_EQ(cli::parse_version("7.0.15"), (std::array<int, 3>{7, 0, 15}));
  EXPECT_EQ(cli::parse_version("6.2"), (std::array<int, 3>{6, 2, 0}));
  EXPECT_FALSE(cli::parse_version("v7"));
  EXPECT_FALSE(cli::parse_integer("12x"));
  EXPECT_FALSE(cli::parse_integer("99999999999999999999"));
  EXPECT_TRUE(cli::parse_info("").values.empty());
}

}  // namespace
}  // namespace redlease::test
