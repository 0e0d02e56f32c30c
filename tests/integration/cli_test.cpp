// SPDX-License-Identifier: MIT
// The `redlease` command-line tool, driven as a user would: the built binary, run as a child process
// against a real redis-server, checked through its exit status, its output and the server's state.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_process.hpp"
#include "fault_proxy.hpp"
#include "lock_test_support.hpp"
#include "loopback_socket.hpp"
#include "test_certs.hpp"

namespace redlease::test {
namespace {

namespace fs = std::filesystem;

/// Whether the process `pid` runs: gone, or a zombie nobody reaps (a container's init may not), is not.
bool process_running(const std::string& pid) {
  std::string stat = read_whole_file("/proc/" + pid + "/stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

/// A redlease process of the built binary (tests/support/cli_process.hpp).
class cli_proc : public cli_process {
 public:
  cli_proc(const std::vector<std::string>& args, const std::vector<std::string>& env_extra, std::string out_path,
           std::string err_path)
      : cli_process(REDLEASE_CLI_PATH, args, env_extra, std::move(out_path), std::move(err_path)) {}
};

struct result {
  int status;
  std::string out, err;
};

/// The number in `"key":N` of a JSON line, or -1000 if absent.
long long json_number(const std::string& text, const std::string& key) {
  auto at = text.find("\"" + key + "\":");
  if (at == std::string::npos) return -1000;
  at += key.size() + 3;
  std::size_t end = at;
  if (end < text.size() && text[end] == '-') ++end;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
  if (end == at) return -1000;
  return std::stoll(text.substr(at, end - at));
}

/// The line of `text` containing `needle` ("" if none).
std::string line_with(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) return line;
  return {};
}

class cli_test : public lock_fixture {
 protected:
  void SetUp() override {
    lock_fixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    char tmpl[] = "/tmp/redlease-cli-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    procs_.clear();
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
    lock_fixture::TearDown();
  }

  std::string path(const std::string& file) const { return dir_ + "/" + file; }
  std::string url() { return server().url(); }

  cli_proc& start(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    int n = ++count_;
    procs_.push_back(std::make_unique<cli_proc>(args, env, path("out." + std::to_string(n)),
                                                path("err." + std::to_string(n))));
    return *procs_.back();
  }
  result run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    auto& p = start(args, env);
    int st = p.wait();
    return {st, p.out(), p.err()};
  }
  bool exists(const std::string& key) { return raw()({"EXISTS", key}).integer == 1; }
  bool file_exists(const std::string& file) { return fs::exists(path(file)); }
  long long subscribers(const std::string& channel) {
    auto r = raw()({"PUBSUB", "NUMSUB", channel});
    return r.elements.size() == 2 ? r.elements[1].integer : -1;
  }

  // Holds the lock, starts three redlease runs on it and waits until all three wait on its channel,
  // then lets go: they all contend. Each command appends "start <ns>" and "end <ns>" around a short
  // sleep; the intervals must never overlap.
  void check_no_overlap(bool use_mutex) {
    const int n = 3;
    const std::string log = path("log");
    client c{cfg()};
    redlease::detail::lock_handle l = use_mutex ? redlease::detail::lock_handle(c.mutex("shared"))
                                                : redlease::detail::lock_handle(c.lock("shared"));
    l.lock();
    std::string body = "echo \"start $(date +%s%N)\" >> '" + log + "'; sleep 0.2; echo \"end $(date +%s%N)\" >> '" +
                       log + "'";
    std::vector<cli_proc*> ps;
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> args{"run", "shared", "--redis", url(), "--json"};
      if (use_mutex) args.push_back("--mutex");
      args.insert(args.end(), {"--", "sh", "-c", body});
      ps.push_back(&start(args));
    }
    std::string channel = use_mutex ? "redlease_mutex__channel:{shared}" : "redisson_lock__channel:{shared}";
    EXPECT_TRUE(eventually([&] { return subscribers(channel) == n; }, 10000ms));
    l.unlock();
    for (auto* p : ps) {
      EXPECT_EQ(p->wait(), 0) << p->err();
      EXPECT_NE(p->err().find("\"event\":\"acquired\""), std::string::npos) << p->err();
      EXPECT_NE(p->err().find("\"event\":\"released\""), std::string::npos) << p->err();
    }
    std::istringstream in(read_whole_file(log));
    std::vector<std::pair<std::string, long long>> events;
    std::string word;
    long long ns;
    while (in >> word >> ns) events.emplace_back(word, ns);
    ASSERT_EQ(events.size(), 2u * n) << read_whole_file(log);
    for (std::size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].first, i % 2 == 0 ? "start" : "end") << "overlap at line " << i;
      if (i > 0) {
        EXPECT_GE(events[i].second, events[i - 1].second);
      }
    }
  }

  std::string dir_;
  int count_ = 0;
  std::vector<std::unique_ptr<cli_proc>> procs_;
};

// ---- exit statuses ----------------------------------------------------------------------------

TEST_F(cli_test, exit_status_is_the_commands) {
  auto r = run({"run", "x", "--redis", url(), "--", "sh", "-c", "exit 3"});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_FALSE(exists("x"));
  r = run({"run", "x", "--redis", url(), "--", "true"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");  // quiet by default when all goes well
  r = run({"run", "x", "--redis", url(), "--", "sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.status, 137) << r.err;
  EXPECT_FALSE(exists("x"));
  r = run({"run", "x", "--redis", url(), "--mutex", "--", "sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(r.status, 143) << r.err;
  EXPECT_FALSE(exists("x"));
}

TEST_F(cli_test, exit_status_for_a_command_not_found_or_not_executable) {
  auto r = run({"run", "x", "--redis", url(), "--", "redlease-no-such-command-xyz"});
  EXPECT_EQ(r.status, 127) << r.err;
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  EXPECT_FALSE(exists("x"));  // released
  r = run({"run", "x", "--redis", url(), "--", path("no/such/file")});
  EXPECT_EQ(r.status, 127) << r.err;

  write_file(path("script.sh"), "#!/bin/sh\nexit 0\n");
  ASSERT_EQ(::chmod(path("script.sh").c_str(), 0644), 0);
  r = run({"run", "x", "--redis", url(), "--", path("script.sh")});
  EXPECT_EQ(r.status, 126) << r.err;
  EXPECT_FALSE(exists("x"));
  r = run({"run", "x", "--redis", url(), "--", dir_});  // a directory
  EXPECT_EQ(r.status, 126) << r.err;
}

TEST_F(cli_test, exit_status_64_for_usage_errors) {
  EXPECT_EQ(run({"run", "x", "--redis", url(), "--wait", "5x", "--", "true"}).status, 64);
  EXPECT_EQ(run({"run", "x", "--redis", url(), "--kill-after", "-1s", "--", "true"}).status, 64);
  EXPECT_EQ(run({"run", "x", "--redis", url()}).status, 64);        // no command
  EXPECT_EQ(run({"run", "x", "--redis", url(), "--"}).status, 64);  // no command
  EXPECT_EQ(run({"run", "--redis", url()}).status, 64);             // no name
  EXPECT_EQ(run({"run", "x", "--redis", url(), "--lease", "0", "--", "true"}).status, 64);
  EXPECT_EQ(run({"run", "x", "--redis", url(), "--lease", "1s", "--watchdog-timeout", "1s", "--", "true"}).status, 64);
  EXPECT_EQ(run({"run", "x", "--redis", "http://nope", "--", "true"}).status, 64);
  EXPECT_EQ(run({"run", "x", "--redis", url(), "--quiet", "--verbose", "--", "true"}).status, 64);
  EXPECT_EQ(run({"status", "--redis", url()}).status, 64);
  EXPECT_EQ(run({"frobnicate"}).status, 64);
  EXPECT_EQ(run({}).status, 64);
  EXPECT_FALSE(exists("x"));
}

// An unknown subcommand is named as such (CLI11 alone said "A subcommand is required").
TEST_F(cli_test, an_unknown_subcommand_is_named) {
  auto r = run({"frob", "x"});
  EXPECT_EQ(r.status, 64);
  EXPECT_NE(r.err.find("unknown command 'frob'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run, status, unlock"), std::string::npos) << r.err;
  r = run({});
  EXPECT_EQ(r.status, 64);
  EXPECT_EQ(r.err.find("unknown command"), std::string::npos) << r.err;
}

// The empty name is a usage error for every subcommand that takes names, before Redis is asked
// (status showed a row with a blank name; unlock said "" was not locked; both exited 0).
TEST_F(cli_test, an_empty_lock_name_is_a_usage_error_everywhere) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "", "--redis", url(), "--", "true"},
        std::vector<std::string>{"status", "", "--redis", url()},
        std::vector<std::string>{"status", "ok", "", "--redis", url()},
        std::vector<std::string>{"unlock", "--force", "", "--redis", url()}}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 64) << args[0] << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("a lock name must not be empty"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_EQ(r.out, "") << args[0];
  }
}

// A --watchdog-timeout too short to renew is refused, saying the minimum and why (1ms was accepted,
// and the lock was lost before the command ran: exit 76).
TEST_F(cli_test, a_watchdog_timeout_too_short_to_renew_is_a_usage_error) {
  for (std::string t : {"1ms", "99ms", "0.05s"}) {
    auto r = run({"run", "x", "--redis", url(), "--watchdog-timeout", t, "--", "touch", path("ran")});
    EXPECT_EQ(r.status, 64) << t << ": " << r.err;
    EXPECT_NE(r.err.find("--watchdog-timeout must be at least 100ms"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("renewed every third of it"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(file_exists("ran"));
  auto r = run({"run", "x", "--redis", url(), "--watchdog-timeout", "100ms", "--", "touch", path("ran")});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(file_exists("ran"));
  EXPECT_FALSE(exists("x"));
}

// A --lease too short to outlast the grant's reply and the command's start is refused, saying the
// minimum and why (1ms was accepted, and the lock expired before the command ran: exit 76).
TEST_F(cli_test, a_lease_too_short_to_start_the_command_is_a_usage_error) {
  for (std::string t : {"1ms", "99ms", "0.05s", "0"}) {
    auto r = run({"run", "x", "--redis", url(), "--lease", t, "--", "touch", path("ran")});
    EXPECT_EQ(r.status, 64) << t << ": " << r.err;
    EXPECT_NE(r.err.find("--lease must be at least 100ms"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the lease starts when Redis grants the lock"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(file_exists("ran"));
  EXPECT_FALSE(exists("x"));
  // The floor is accepted: the command runs (0), or, on a machine too loaded to run it and release
  // within 100 ms, the lease runs out first (76); never 64.
  auto r = run({"run", "x", "--redis", url(), "--lease", "100ms", "--", "touch", path("ran")});
  EXPECT_TRUE(r.status == 0 || r.status == 76) << r.status << ": " << r.err;
  EXPECT_EQ(r.err.find("--lease must be"), std::string::npos) << r.err;
  if (r.status == 0) {
    EXPECT_TRUE(file_exists("ran"));
  }
  EXPECT_FALSE(exists("x"));
}

/// The numbers of the "Exit status:" paragraph of `text` (up to the next blank line or "Environment:").
std::set<int> exit_statuses_in(const std::string& text) {
  std::set<int> out;
  auto at = text.find("Exit status");
  if (at == std::string::npos) return out;
  auto end = std::min(text.find("\n\n", at), text.find("Environment:", at));
  std::string para = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  for (std::size_t i = 0; i < para.size();) {
    if (std::isdigit(static_cast<unsigned char>(para[i])) && (i == 0 || !std::isalnum(static_cast<unsigned char>(para[i - 1])))) {
      std::size_t j = i;
      while (j < para.size() && std::isdigit(static_cast<unsigned char>(para[j]))) ++j;
      out.insert(std::stoi(para.substr(i, j - i)));
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

// Each subcommand's --help lists its own exit statuses, all of those it can return (exit_code_for
// and each command's own): status and demo printed the root's, which is about `run`, and run's
// left out 65, 70, 78 and 79.
TEST_F(cli_test, each_subcommands_help_lists_its_own_exit_statuses) {
  const std::map<std::string, std::set<int>> expected = {
      {"run", {64, 65, 69, 70, 75, 76, 78, 79, 126, 127, 128}},
      {"status", {0, 64, 65, 69, 70, 78}},
      {"unlock", {0, 64, 65, 69, 70, 78}},
      {"doctor", {0, 64, 69, 70, 78}},
      {"demo", {0, 1, 64, 69, 70, 78}},
      {"semaphore", {0, 64, 65, 69, 70, 75, 78}},
      {"latch", {0, 64, 65, 69, 70, 75, 78}},
      {"top", {0, 64, 69, 70, 78}},
      {"exporter", {0, 64, 69, 70, 78}},
  };
  for (const auto& [sub, codes] : expected) {
    auto r = run({sub, "--help"});
    EXPECT_EQ(r.status, 0) << sub;
    EXPECT_EQ(exit_statuses_in(r.out), codes) << sub << " --help:\n" << r.out;
  }
  // The root's names every subcommand's.
  auto root = run({"--help"});
  std::set<int> all;
  for (const auto& [sub, codes] : expected) {
    EXPECT_NE(root.out.find(sub), std::string::npos) << root.out;
    all.insert(codes.begin(), codes.end());
  }
  EXPECT_EQ(exit_statuses_in(root.out), all) << root.out;
}

// The benchmark is its own program (redlease-bench, bench/): `redlease bench`, with any options,
// says so and exits 64, and the root's help does not list it.
TEST_F(cli_test, bench_points_to_redlease_bench) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"bench"}, std::vector<std::string>{"bench", "--quick", "--json", "--check"}}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 64);
    EXPECT_NE(r.err.find("run redlease-bench"), std::string::npos) << r.err;
  }
  EXPECT_EQ(run({"--help"}).out.find("bench "), std::string::npos);
}

// docs/cli.md's `run` section names every option `redlease run --help` prints (--fair, --read,
// --write and the TLS/Sentinel flags were missing from its table).
TEST_F(cli_test, cli_md_documents_every_run_option) {
  const fs::path doc = fs::path(__FILE__).parent_path().parent_path().parent_path() / "docs" / "cli.md";
  std::string md = read_whole_file(doc.string());
  ASSERT_FALSE(md.empty()) << doc;
  auto begin = md.find("## `redlease run`");
  ASSERT_NE(begin, std::string::npos);
  std::string section = md.substr(begin, md.find("\n## ", begin + 1) - begin);
  auto r = run({"run", "--help"});
  ASSERT_EQ(r.status, 0);
  std::istringstream in(r.out);
  int options = 0;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("  -")) continue;
    std::string names = line.substr(2, line.find(' ', 2) - 2);  // "-q,--quiet"
    for (std::size_t at = 0; at < names.size();) {
      auto comma = names.find(',', at);
      std::string opt = names.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      ++options;
      EXPECT_NE(section.find("`" + opt), std::string::npos) << opt << " is not in docs/cli.md's run section";
      at = comma == std::string::npos ? names.size() : comma + 1;
    }
  }
  EXPECT_GE(options, 20) << r.out;
}

TEST_F(cli_test, exit_status_69_when_redis_is_unreachable) {
  // A bound but not listening socket: connecting to it is refused, and nobody else can take the port.
  loopback_socket refusing(false);
  std::string dead = "redis://127.0.0.1:" + std::to_string(refusing.port());
  auto t0 = steady::now();
  auto r = run({"run", "x", "--redis", dead, "--", "touch", path("ran")});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_FALSE(file_exists("ran"));
  EXPECT_EQ(run({"status", "x", "--redis", dead}).status, 69);
  EXPECT_EQ(run({"unlock", "--force", "x", "--redis", dead}).status, 69);
  EXPECT_LT(ms_since(t0), 15000);
  // The default URL comes from REDLEASE_URL.
  EXPECT_EQ(run({"run", "x", "--", "true"}, {"REDLEASE_URL=" + dead}).status, 69);
  EXPECT_EQ(run({"run", "x", "--", "true"}, {"REDLEASE_URL=" + url()}).status, 0);
}

TEST_F(cli_test, unreachable_redis_says_why_with_the_address) {
  loopback_socket refusing(false);
  const std::string at = "127.0.0.1:" + std::to_string(refusing.port());
  auto refused = run({"run", "x", "--redis", "redis://:s3cret@" + at, "--", "true"});
  EXPECT_EQ(refused.status, 69) << refused.err;
  EXPECT_NE(refused.err.find(at + ": connection refused"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.err.find("s3cret"), std::string::npos) << refused.err;
  auto unknown = run({"run", "x", "--redis", "redis://nonexistent.invalid:6379", "--", "true"});
  EXPECT_EQ(unknown.status, 69) << unknown.err;
  EXPECT_NE(unknown.err.find("nonexistent.invalid:6379: name not found"), std::string::npos) << unknown.err;
}

// ---- mutual exclusion -------------------------------------------------------------------------

TEST_F(cli_test, two_runs_never_overlap_reentrant) {
  check_no_overlap(false);
  EXPECT_FALSE(exists("shared"));
}

TEST_F(cli_test, two_runs_never_overlap_mutex) {
  check_no_overlap(true);
  EXPECT_FALSE(exists("shared"));
}

// ---- waiting ----------------------------------------------------------------------------------

TEST_F(cli_test, wait_zero_on_a_held_lock_exits_75_at_once) {
  client c{cfg()};
  auto l = c.lock("held");
  l.lock();
  auto t0 = steady::now();
  auto r = run({"run", "held", "--redis", url(), "--wait", "0", "--", "touch", path("ran")});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_FALSE(file_exists("ran"));
  EXPECT_NE(r.err.find("is held by another owner"), std::string::npos) << r.err;

  t0 = steady::now();
  r = run({"run", "held", "--redis", url(), "--wait", "300ms", "--json", "--", "touch", path("ran")});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_GE(ms_since(t0), 300);
  EXPECT_NE(r.err.find("{\"event\":\"not_acquired\",\"lock\":\"held\""), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists("ran"));

  r = run({"run", "held", "--redis", url(), "--mutex", "--wait", "0", "--", "true"});  // a hash, not a mutex
  EXPECT_EQ(r.status, 65) << r.err;
  EXPECT_NE(r.err.find("\"held\" holds a hash where a mutex keeps a string"), std::string::npos) << r.err;
  l.unlock();
}

// The server's WRONGTYPE does not say which key: `run` names the key of the kind that holds another
// type (a fair lock keeps four).
TEST_F(cli_test, a_key_of_the_wrong_type_is_named) {
  raw()({"SET", "redisson_lock_timeout:{fq}", "x"});
  auto r = run({"run", "--fair", "fq", "--redis", url(), "--", "touch", path("ran")});
  EXPECT_EQ(r.status, 65) << r.err;
  EXPECT_NE(r.err.find("\"redisson_lock_timeout:{fq}\" holds a string where the fair lock keeps a zset"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("\"fq\" holds"), std::string::npos) << r.err;
  // The server's words, without the location Redis adds inside a script (" script: 83bfcc..., on
  // @user_script:18."), which points into our script.
  EXPECT_NE(r.err.find("WRONGTYPE Operation against a key holding the wrong kind of value"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("user_script"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("script: "), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists("ran"));
  EXPECT_FALSE(exists("fq"));
}

// An application's hash named by mistake: run, status and unlock agree that it is not a lock, at
// once (run waited for ever; status showed it "held reentrant no expiry ... name xbob").
TEST_F(cli_test, an_application_hash_is_not_a_lock_for_run_status_and_unlock) {
  raw()({"HSET", "user:42", "name", "bob"});
  for (const char* kind : {"", "--fair", "--read", "--write"}) {
    SCOPED_TRACE(kind);
    std::vector<std::string> args{"run", "user:42", "--wait", "20s", "--redis", url()};
    if (*kind) args.push_back(kind);
    args.insert(args.end(), {"--", "touch", path("ran")});
    auto t0 = steady::now();
    auto r = run(args);
    EXPECT_EQ(r.status, 65) << r.err;
    EXPECT_NE(r.err.find("not a lock"), std::string::npos) << r.err;
    EXPECT_LT(ms_since(t0), 10000);
    EXPECT_FALSE(file_exists("ran"));
  }
  auto s = run({"status", "user:42", "--redis", url()});
  EXPECT_EQ(s.status, 65) << s.err;
  EXPECT_NE(s.out.find("not a lock"), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("reentrant"), std::string::npos) << s.out;
  s = run({"status", "user:42", "--redis", url(), "--json"});
  EXPECT_EQ(s.status, 65) << s.err;
  EXPECT_NE(s.out.find("\"state\":\"other\""), std::string::npos) << s.out;
  auto u = run({"unlock", "--force", "user:42", "--redis", url()});
  EXPECT_EQ(u.status, 65) << u.err;
  EXPECT_EQ(raw()({"HGET", "user:42", "name"}).str, "bob");
}

// A plain string without expiry cannot be told from another library's mutex token: run --mutex
// waits, and says once why the wait will not end; status warns of it.
TEST_F(cli_test, a_string_with_no_expiry_is_said_once_while_a_mutex_waits) {
  raw()({"SET", "plain", "hello"});
  auto r = run({"run", "--mutex", "plain", "--wait", "2500ms", "--redis", url(), "--", "touch", path("ran")});
  EXPECT_EQ(r.status, 75) << r.err;
  const std::string note = "held with no expiry by a value redlease did not write; it will never expire";
  auto at = r.err.find(note);
  EXPECT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(note, at + 1), std::string::npos) << "said once: " << r.err;
  EXPECT_FALSE(file_exists("ran"));
  // With --wait 0 too, with the refusal.
  r = run({"run", "--mutex", "plain", "--wait", "0", "--redis", url(), "--", "touch", path("ran")});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_NE(r.err.find(note), std::string::npos) << r.err;
  auto s = run({"status", "plain", "--redis", url()});
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_NE(s.out.find("warning: no expiry"), std::string::npos) << s.out;
  // A mutex that expires says nothing of the kind.
  raw()({"SET", "expiring", "hello", "PX", "60000"});
  r = run({"run", "--mutex", "expiring", "--wait", "1500ms", "--redis", url(), "--", "true"});
  EXPECT_EQ(r.status, 75) << r.err;
  EXPECT_EQ(r.err.find("no expiry"), std::string::npos) << r.err;
}

// A mistake on the command line is said after the tool's name, like every other error, and says what
// is wrong, in the tool's words. Before: "--wait: invalid duration '-5s' ..." with no name and no
// word of "negative"; every bad URL was `config::from_url("..."): invalid Redis URL`.
TEST_F(cli_test, a_mistake_is_said_with_the_tools_name_and_what_is_wrong) {
  auto r = run({"run", "x", "--redis", url(), "--wait=-5s", "--", "true"});
  EXPECT_EQ(r.status, 64);
  EXPECT_EQ(r.err.rfind("redlease: --wait: invalid duration '-5s': negative durations are not allowed\n", 0), 0u)
      << r.err;
  r = run({"status", "x", "--redis", "redsi://127.0.0.1:6379"});
  EXPECT_EQ(r.status, 64);
  EXPECT_EQ(r.err, "redlease: invalid Redis URL \"redsi://127.0.0.1:6379\": unknown scheme 'redsi' (the schemes are "
                   "redis://, rediss:// (TLS), redis-sentinel://, rediss-sentinel://, unix:// and redis+unix://)\n");
  r = run({"run", "x", "--redis", "redis://:hunter2@/0", "--", "true"});
  EXPECT_EQ(r.status, 64);
  EXPECT_EQ(r.err, "redlease: invalid Redis URL \"redis://***@/0\": missing host\n");
  r = run({"unlock", "--force", "x", "--redis", "127.0.0.1:6379"});
  EXPECT_EQ(r.status, 64);
  EXPECT_EQ(r.err, "redlease: invalid Redis URL \"127.0.0.1:6379\": no scheme: for a host and port write "
                   "redis://127.0.0.1:6379\n");
  EXPECT_FALSE(exists("x"));
}

// A refusal of what status and unlock read names the lock, not the library call that was refused
// (it said "client::command: NOPERM ...").
TEST_F(cli_test, a_refusal_names_the_lock) {
  ASSERT_EQ(raw()({"ACL", "SETUSER", "prefixed", "on", ">pw", "~locks:*", "&*", "+@all"}).str, "OK");
  const std::string as_user = "redis://prefixed:pw@127.0.0.1:" + std::to_string(server().port());
  for (const std::vector<std::string>& args : {std::vector<std::string>{"status", "other:job", "--redis", as_user},
                                               std::vector<std::string>{"unlock", "--force", "other:job", "--redis",
                                                                        as_user}}) {
    auto r = run(args);
    EXPECT_EQ(r.status, 78) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err.rfind("redlease: lock \"other:job\": NOPERM ", 0), 0u) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err.find("client::"), std::string::npos) << args[0] << ": " << r.err;
  }
  raw()({"ACL", "DELUSER", "prefixed"});
}

TEST_F(cli_test, signal_while_waiting_exits_without_running_the_command) {
  client c{cfg()};
  auto l = c.lock("held");
  l.lock();
  auto& p = start({"run", "held", "--redis", url(), "--", "touch", path("ran")});
  ASSERT_TRUE(eventually([&] { return subscribers("redisson_lock__channel:{held}") == 1; }, 10000ms)) << p.err();
  ::kill(p.pid(), SIGTERM);
  EXPECT_EQ(p.wait(), 128 + SIGTERM) << p.err();
  l.unlock();
  EXPECT_FALSE(file_exists("ran"));
  EXPECT_FALSE(exists("held"));
}

// The signal comes while the acquisition is on the wire (the network delays it by 800 ms): the
// acquisition is cancelled, its grant given back when it arrives, and nothing is left held. Without
// the cancellation the delayed request would still reach the server after the process exited, and
// the lock would stay held for its whole lease.
TEST_F(cli_test, signal_with_the_acquisition_on_the_wire_leaves_nothing_held) {
  fault_proxy proxy(server().port());
  proxy.set_latency(800ms, 0ms);
  const std::string via = "redis://127.0.0.1:" + std::to_string(proxy.port());
  auto& p = start({"run", "wire", "--redis", via, "--", "touch", path("ran")});
  // The handshake went through; more bytes came from the client than reached the server: the
  // acquisition is in the proxy's delay line.
  ASSERT_TRUE(proxy.wait_for([&] { return proxy.forwarded_up() > 0 && proxy.bytes_up() > proxy.forwarded_up(); },
                             10000ms))
      << p.err();
  EXPECT_FALSE(exists("wire"));
  ::kill(p.pid(), SIGTERM);
  EXPECT_EQ(p.wait(), 128 + SIGTERM) << p.err();
  EXPECT_FALSE(file_exists("ran"));
  // The process waited for the acquisition's reply and for the give-back's: nothing is held, and
  // nothing of the acquisition is left on the wire to take it later.
  EXPECT_FALSE(exists("wire")) << p.err();
}

// ---- a lost lock --------------------------------------------------------------------------------

TEST_F(cli_test, lost_lock_terminates_the_command_and_exits_76) {
  // The command traps TERM, notes it and exits 0: redlease still reports the loss with 76.
  std::string body = "trap 'echo term > " + path("term") + "; kill $p; exit 0' TERM; echo > " + path("ready") +
                     "; sleep 30 & p=$!; wait $p";
  auto& p = start({"run", "lost", "--redis", url(), "--watchdog-timeout", "600ms", "--json", "--", "sh", "-c", body});
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << p.err();
  ASSERT_TRUE(exists("lost"));
  ASSERT_EQ(raw()({"DEL", "lost"}).integer, 1);
  auto t0 = steady::now();
  EXPECT_EQ(p.wait(), 76) << p.err();
  EXPECT_LT(ms_since(t0), 5000);
  EXPECT_EQ(read_whole_file(path("term")), "term\n");
  auto err = p.err();
  EXPECT_NE(err.find("{\"event\":\"lost\",\"lock\":\"lost\",\"reason\":\"deleted\"}"), std::string::npos) << err;
  EXPECT_NE(err.find("\"event\":\"terminating\""), std::string::npos) << err;
  EXPECT_EQ(err.find("\"event\":\"killing\""), std::string::npos) << err;
}

TEST_F(cli_test, lost_lock_kills_a_command_that_ignores_sigterm) {
  std::string body = "trap '' TERM; echo > " + path("ready") + "; exec sleep 30";
  auto& p = start({"run", "lost", "--redis", url(), "--watchdog-timeout", "600ms", "--kill-after", "300ms", "--", "sh",
                   "-c", body});
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << p.err();
  ASSERT_EQ(raw()({"DEL", "lost"}).integer, 1);
  auto t0 = steady::now();
  EXPECT_EQ(p.wait(), 76) << p.err();
  EXPECT_GE(ms_since(t0), 300);
  EXPECT_LT(ms_since(t0), 5000);
  auto err = p.err();  // the human messages
  EXPECT_NE(err.find("lost"), std::string::npos) << err;
  EXPECT_NE(err.find("SIGTERM"), std::string::npos) << err;
  EXPECT_NE(err.find("SIGKILL"), std::string::npos) << err;
}

TEST_F(cli_test, lost_lock_is_silent_with_quiet) {
  std::string body = "echo > " + path("ready") + "; exec sleep 30";
  auto& p = start({"run", "lost", "--redis", url(), "--watchdog-timeout", "600ms", "--quiet", "--mutex", "--", "sh",
                   "-c", body});
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << p.err();
  ASSERT_EQ(raw()({"SET", "lost", "someone-else"}).str, "OK");  // taken by another owner
  EXPECT_EQ(p.wait(), 76);
  EXPECT_EQ(p.err(), "");
  EXPECT_EQ(raw()({"GET", "lost"}).str, "someone-else");  // not released: not ours
}

TEST_F(cli_test, fixed_lease_running_out_is_a_lost_lock) {
  std::string body = "echo > " + path("ready") + "; exec sleep 30";
  auto& p = start({"run", "lease", "--redis", url(), "--lease", "1500ms", "--json", "--", "sh", "-c", body});
  EXPECT_EQ(p.wait(), 76) << p.err();
  EXPECT_TRUE(file_exists("ready"));
  EXPECT_NE(p.err().find("\"reason\":\"expired\""), std::string::npos) << p.err();
}

// ---- signals and environment -------------------------------------------------------------------

TEST_F(cli_test, signals_are_forwarded_and_the_lock_released) {
  for (auto [sig, name] : {std::pair{SIGTERM, "TERM"}, std::pair{SIGINT, "INT"}, std::pair{SIGHUP, "HUP"}}) {
    SCOPED_TRACE(name);
    std::string ready = path(std::string("ready") + name), got = path(std::string("got") + name);
    std::string body = "trap 'echo $REDLEASE_LOCK_NAME > " + got + "; kill $p; exit 42' " + std::string(name) +
                       "; echo > " + ready + "; sleep 30 & p=$!; wait $p";
    auto& p = start({"run", "sig", "--redis", url(), "--", "sh", "-c", body});
    ASSERT_TRUE(eventually([&] { return fs::exists(ready); }, 10000ms)) << p.err();
    ASSERT_TRUE(exists("sig"));
    ::kill(p.pid(), sig);
    EXPECT_EQ(p.wait(), 42) << p.err();
    EXPECT_EQ(read_whole_file(got), "sig\n");
    EXPECT_FALSE(exists("sig"));
  }
}

// Without a controlling terminal (cron, systemd, CI: `setsid` here) the command runs in a process
// group of its own, and redlease signals that group. A signal sent to redlease's whole group, as
// timeout(1) sends it, reaches the command once (forwarded), not twice; the processes the command
// started get it too. Before, the command heard it directly and again forwarded, and a TERM handler
// that treats the second as "abort now" (Go's NotifyContext, asyncio) never finished its cleanup.
TEST_F(cli_test, a_signal_to_redleases_group_reaches_the_command_once) {
  // The command counts the TERMs it gets (perl counts each delivery, even two before its handler
  // runs), then exits 0 a little after the first; its child sleeps and says whether TERM reached it.
  // The parent's handler is set after the fork (a child that inherited it counted its own TERM as
  // the parent's second), and "ready" waits for the child's handler (a TERM before it killed the
  // child silently): both made this test fail under load.
  write_file(path("count.pl"),
             "my $first = 0;\n"
             "my $kid = fork; if ($kid == 0) { $SIG{TERM} = sub { open(my $f, '>', '" + path("kid") +
             "'); print $f \"term\\n\"; close $f; exit 0 }; open(my $k, '>', '" + path("kidready") +
             "'); close $k; sleep 30; exit 0 }\n"
             "$SIG{TERM} = sub { open(my $f, '>>', '" + path("terms") + "'); print $f \"t\\n\"; close $f; $first ||= 1; };\n"
             "for (1 .. 1000) { last if -e '" + path("kidready") + "'; select(undef, undef, undef, 0.01) }\n"
             "open(my $r, '>', '" + path("ready") + "'); close $r;\n"
             "my $after = 0; for (1 .. 1500) { select(undef, undef, undef, 0.02); $after++ if $first; last if $after > 15 }\n"
             "waitpid($kid, 0); exit 0;\n");
  write_file(path("launch.sh"), "setsid -w '" + std::string(REDLEASE_CLI_PATH) + "' run grp --redis " + url() +
                                    " -- perl " + path("count.pl") + " & p=$!\n"
                                    "i=0; while [ ! -e " + path("ready") + " ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done\n"
                                    "kill -TERM -- -$p\nwait $p\n");
  const std::string cmd = "bash " + path("launch.sh");
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st)) << cmd;
  EXPECT_EQ(WEXITSTATUS(st), 0) << cmd;
  EXPECT_EQ(read_whole_file(path("terms")), "t\n") << "the command got the group's TERM more than once (or not at all)";
  EXPECT_EQ(read_whole_file(path("kid")), "term\n") << "the command's own child did not get the TERM";
  EXPECT_FALSE(exists("grp"));
}

// A lost lock stops the processes the command started as well, when the command has a group of its
// own (no terminal): killing only the shell of `sh -c 'a; b'` left `a` running without the lock.
TEST_F(cli_test, a_lost_lock_stops_the_commands_children_too) {
  const std::string body = "sleep 30 & echo $! > " + path("kid") + "; echo > " + path("ready") + "; wait";
  write_file(path("launch.sh"), "exec setsid -w '" + std::string(REDLEASE_CLI_PATH) + "' run lostkids --redis " + url() +
                                    " --watchdog-timeout 600ms --kill-after 300ms -- sh -c '" + body + "'\n");
  cli_process p("/bin/bash", {path("launch.sh")}, {}, path("out"), path("err"));
  ASSERT_TRUE(eventually([&] { return file_exists("ready"); }, 10000ms)) << p.err();
  const std::string kid = read_whole_file(path("kid")).substr(0, read_whole_file(path("kid")).find('\n'));
  ASSERT_FALSE(kid.empty());
  ASSERT_EQ(raw()({"DEL", "lostkids"}).integer, 1);
  EXPECT_EQ(p.wait(), 76) << p.err();
  EXPECT_TRUE(eventually([&] { return !process_running(kid); }, 5000ms)) << "the command's child ran on without the lock";
  if (process_running(kid)) ::kill(std::stoi(kid), SIGKILL);
}

// A command killed by SIGINT or SIGTERM (Ctrl-C, a stop) ends redlease by the same signal once the
// lock is released: a shell stops the loop or script that ran it only when its child died of the
// signal (an exit status of 130 does not stop it). Before, redlease exited 128+N.
TEST_F(cli_test, a_command_killed_by_a_signal_ends_redlease_by_that_signal) {
  for (auto [sig, name] : {std::pair{SIGINT, "INT"}, std::pair{SIGTERM, "TERM"}}) {
    SCOPED_TRACE(name);
    auto& p = start({"run", "reraise", "--redis", url(), "--", "sh", "-c", std::string("kill -") + name + " $$"});
    EXPECT_EQ(p.wait(), 128 + sig) << p.err();
    EXPECT_EQ(p.term_signal(), sig) << p.err();
    EXPECT_FALSE(exists("reraise"));
  }
  // Other signals (SIGUSR1 here; a crash's SIGSEGV, SIGQUIT's core dump) stay the command's:
  // redlease exits 128+N.
  auto& p = start({"run", "reraise", "--redis", url(), "--", "sh", "-c", "kill -USR1 $$"});
  EXPECT_EQ(p.wait(), 128 + SIGUSR1) << p.err();
  EXPECT_EQ(p.term_signal(), 0);
}

// A signal that was ignored when redlease started (SIGHUP under nohup) stays ignored: a command that
// dies of it anyway (it set it back to its default) does not take redlease down with it: 128+N.
TEST_F(cli_test, a_signal_ignored_at_start_is_not_raised_again) {
  // A launcher that ignores SIGHUP (as nohup does) and says how redlease ended: "<signal> <status>".
  write_file(path("launch.pl"),
             "$SIG{HUP} = 'IGNORE';\nmy $p = fork;\nif ($p == 0) { exec @ARGV; exit 127; }\nwaitpid($p, 0);\n"
             "print(($? & 127), ' ', ($? >> 8), \"\\n\");\n");
  write_file(path("child.pl"), "$SIG{HUP} = 'DEFAULT';\nkill 'HUP', $$;\nsleep 5;\n");
  const std::string cmd = "perl " + path("launch.pl") + " '" + std::string(REDLEASE_CLI_PATH) + "' run hup --redis " +
                          url() + " -- perl " + path("child.pl") + " > " + path("how");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(read_whole_file(path("how")), "0 " + std::to_string(128 + SIGHUP) + "\n")
      << "(\"1 0\": redlease died of the SIGHUP it was started ignoring)";
  EXPECT_FALSE(exists("hup"));
}

// A closed stderr (`... 2>&1 | head -1`) does not kill redlease with SIGPIPE while the command runs
// and the lock is held: the command runs to its end and the lock is released. Before, redlease died
// at its first event line (141), the command ran on and the lock stayed held for a lease.
TEST_F(cli_test, a_closed_stderr_does_not_stop_redlease) {
  write_file(path("pipe.sh"), "'" + std::string(REDLEASE_CLI_PATH) + "' run -v piped --redis " + url() +
                                 " -- sh -c 'sleep 0.3; echo done > " + path("done") +
                                 "' 2>&1 | true\nexit ${PIPESTATUS[0]}\n");
  const std::string cmd = "bash " + path("pipe.sh");
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st)) << cmd;
  EXPECT_EQ(WEXITSTATUS(st), 0) << cmd;
  EXPECT_EQ(read_whole_file(path("done")), "done\n");
  EXPECT_FALSE(exists("piped")) << "the lock was left held";
}

// If redlease dies (SIGKILL, the OOM killer), the command does not run on without the lock: the
// kernel kills it. Before, it ran on, and a second run could start beside it once the lease ran out.
TEST_F(cli_test, the_command_does_not_outlive_redlease) {
  auto& p = start({"run", "orphan", "--redis", url(), "--", "sh", "-c", "echo $$ > " + path("pid") + "; exec sleep 30"});
  ASSERT_TRUE(eventually([&] { return read_whole_file(path("pid")).size() > 1; }, 10000ms)) << p.err();
  const std::string child = read_whole_file(path("pid")).substr(0, read_whole_file(path("pid")).find('\n'));
  ::kill(p.pid(), SIGKILL);
  p.wait();
  EXPECT_TRUE(eventually([&] { return !process_running(child); }, 5000ms)) << "the command ran on after redlease was killed";
  if (process_running(child)) ::kill(std::stoi(child), SIGKILL);
}

TEST_F(cli_test, command_sees_the_lock_name_and_no_redlease_descriptors) {
  std::string name = "env:lock name";
  auto r = run({"run", name, "--redis", url(), "--", "sh", "-c",
                "printf %s \"$REDLEASE_LOCK_NAME\" > " + path("name") + "; ls /proc/$$/fd"},
               {"REDLEASE_LOCK_NAME=outer"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_whole_file(path("name")), name);
  // Only stdin, stdout and stderr: the client's sockets and redlease's own descriptors stay behind.
  EXPECT_EQ(r.out, "0\n1\n2\n");  // (no redirection of ls: dash would keep a saved copy of fd 1)
  EXPECT_FALSE(exists(name));
}

TEST_F(cli_test, command_gets_a_fencing_token_that_grows_run_after_run) {
  auto first = run({"run", "fenced", "--redis", url(), "--", "sh", "-c",
                    "printf %s \"$REDLEASE_FENCING_TOKEN\" > " + path("t1")},
                   {"REDLEASE_FENCING_TOKEN=1"});
  ASSERT_EQ(first.status, 0) << first.err;
  auto second = run({"run", "--mutex", "--wait", "0", "fenced-m", "--redis", url(), "--", "sh", "-c",
                     "printf %s \"$REDLEASE_FENCING_TOKEN\" > " + path("m1")});
  ASSERT_EQ(second.status, 0) << second.err;
  auto third = run({"run", "fenced", "--redis", url(), "--", "sh", "-c",
                    "printf %s \"$REDLEASE_FENCING_TOKEN\" > " + path("t2")});
  ASSERT_EQ(third.status, 0) << third.err;
  auto t1 = std::stoull(read_whole_file(path("t1")));
  auto t2 = std::stoull(read_whole_file(path("t2")));
  EXPECT_GT(t1, 1u);  // not the inherited value
  EXPECT_GT(t2, t1);
  EXPECT_GT(std::stoull(read_whole_file(path("m1"))), 0u);
}

// A user whose ACL predates fencing (no token keys): `run` takes the lock without a token and says so
// once, as a `no_fencing_token` event with --json (it was a plain line inside the JSON stream) and
// not at all with -q. The `acquired` event names each kind.
TEST_F(cli_test, no_fencing_token_notice_is_a_json_event_and_quiet_hides_it) {
  ASSERT_TRUE(raw()({"ACL", "SETUSER", "notoken", "on", ">pw", "~nt:*", "~redisson_unlock_latch:{nt:*", "&*", "+@all"})
                  .is_ok());
  const std::string u = "redis://notoken:pw@127.0.0.1:" + std::to_string(server().port());
  const std::string no_token = "test -z \"$REDLEASE_FENCING_TOKEN\"";
  for (std::string kind : {"reentrant", "mutex", "write"}) {
    std::vector<std::string> args{"run", "--json", "nt:" + kind, "--redis", u};
    if (kind != "reentrant") args.push_back("--" + kind);
    args.insert(args.end(), {"--", "sh", "-c", no_token});
    auto r = run(args);
    EXPECT_EQ(r.status, 0) << kind << ": " << r.err;
    std::istringstream in(r.err);
    int lines = 0;
    for (std::string line; std::getline(in, line); ++lines)
      EXPECT_TRUE(line.starts_with("{\"event\":\"") && line.ends_with("}")) << kind << ": not a JSON event: " << line;
    EXPECT_EQ(lines, 5) << r.err;  // no_fencing_token, acquired, started, exited, released
    EXPECT_NE(r.err.find("{\"event\":\"no_fencing_token\",\"lock\":\"nt:" + kind + "\",\"message\":\"NOPERM"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("{\"event\":\"acquired\",\"lock\":\"nt:" + kind + "\",\"kind\":\"" + kind + "\""),
              std::string::npos)
        << r.err;
  }
  auto quiet = run({"run", "-q", "nt:q", "--redis", u, "--", "sh", "-c", no_token});
  EXPECT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  auto plain = run({"run", "nt:p", "--redis", u, "--", "sh", "-c", no_token});
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.err.rfind("redlease: no fencing token for lock \"nt:p\": NOPERM", 0), 0u) << plain.err;
  EXPECT_NE(plain.err.find("taking the lock without one\n"), std::string::npos) << plain.err;
  raw()({"ACL", "DELUSER", "notoken"});
}

// A lock whose own key the ACL user may not touch: one message, naming the patterns the lock needs
// (its key, latch, token key and channel), not first a warning about the token key.
TEST_F(cli_test, a_name_outside_the_users_key_patterns_is_one_message_with_the_patterns_it_needs) {
  ASSERT_TRUE(raw()({"ACL", "SETUSER", "boxed", "on", ">pw", "~locks:*", "~redisson_unlock_latch:{locks:*",
                     "~redisson_lock_token:{locks:*", "&*", "+@all"})
                  .is_ok());
  const std::string u = "redis://boxed:pw@127.0.0.1:" + std::to_string(server().port());
  auto r = run({"run", "other:job", "--redis", u, "--", "touch", path("ran")});
  EXPECT_EQ(r.status, 78) << r.err;
  EXPECT_FALSE(file_exists("ran"));
  EXPECT_EQ(r.err.find("no fencing token"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("redlease: lock \"other:job\": the name is outside the key patterns of ACL user boxed (NOPERM", 0),
            0u)
      << r.err;
  EXPECT_NE(r.err.find("this lock needs ~other:job ~redisson_unlock_latch:{other:job}:* "
                       "~redisson_lock_token:{other:job} &redisson_lock__channel:{other:job}"),
            std::string::npos)
      << r.err;
  // Inside its patterns the same user takes the lock, with a token.
  auto ok = run({"run", "locks:job", "--redis", u, "--", "sh", "-c", "test -n \"$REDLEASE_FENCING_TOKEN\""});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.err, "");
  raw()({"ACL", "DELUSER", "boxed"});
}

// Out of memory: the server's state is the cause, said once, not the fencing token key.
TEST_F(cli_test, an_oom_refusal_names_the_servers_memory_not_the_token_key) {
  raw()({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  raw()({"CONFIG", "SET", "maxmemory", "1"});
  auto r = run({"run", "--wait", "0", "oomjob", "--redis", url(), "--", "touch", path("ran")});
  raw()({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_FALSE(file_exists("ran"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.find("fencing token"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("lock \"oomjob\": OOM command not allowed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("out of memory: maxmemory reached with nothing to evict"), std::string::npos) << r.err;
  EXPECT_FALSE(exists("oomjob"));
}

TEST_F(cli_test, fair_read_and_write_kinds_run_the_command) {
  client c{cfg()};
  auto r = c.read_lock("cli:rw");
  r.lock();
  // Readers share: a second reader runs at once; a writer does not get in while a reader holds it.
  auto reader = run({"run", "--read", "--wait", "0", "cli:rw", "--redis", url(), "--", "true"});
  EXPECT_EQ(reader.status, 0) << reader.err;
  auto writer = run({"run", "--write", "--wait", "0", "cli:rw", "--redis", url(), "--", "true"});
  EXPECT_EQ(writer.status, 75) << writer.err;
  r.unlock();
  writer = run({"run", "--write", "--wait", "0", "cli:rw", "--redis", url(), "--", "true"});
  EXPECT_EQ(writer.status, 0) << writer.err;
  auto fair = run({"run", "--fair", "cli:fair", "--redis", url(), "--", "sh", "-c", "test -n \"$REDLEASE_FENCING_TOKEN\""});
  EXPECT_EQ(fair.status, 0) << fair.err;
  auto both = run({"run", "--fair", "--mutex", "cli:x", "--redis", url(), "--", "true"});
  EXPECT_EQ(both.status, 64);
}

// ---- status -----------------------------------------------------------------------------------

TEST_F(cli_test, status_shows_a_fair_locks_queue_and_a_read_write_locks_mode_and_readers) {
  client c{cfg()};
  auto f = c.fair_lock("st:fair");
  f.lock();
  std::thread waiter([&] {
    auto w = c.fair_lock("st:fair");
    if (w.try_lock(3000ms)) w.unlock();
  });
  ASSERT_TRUE(eventually([&] { return raw()({"LLEN", "redisson_lock_queue:{st:fair}"}).integer == 1; }));
  auto r = c.read_lock("st:rw");
  r.lock();
  auto out = run({"status", "st:fair", "st:rw", "--redis", url(), "--json"});
  EXPECT_EQ(out.status, 0) << out.err;
  EXPECT_NE(out.out.find("\"kind\":\"fair\""), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\"queue\":[\"" + c.id() + ":"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\"kind\":\"read-write\""), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\"mode\":\"read\""), std::string::npos) << out.out;
  // The fair lock's waiters are its queue (they listen on channels of their own); the read-write
  // lock's channel is its kind's.
  EXPECT_NE(out.out.find("\"waiters\":1,\"channels\":[]}"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\"channels\":[{\"channel\":\"redisson_rwlock:{st:rw}\",\"subscribers\":0}]}"),
            std::string::npos)
      << out.out;
  auto table = run({"status", "st:rw", "--redis", url()});
  EXPECT_NE(table.out.find("mode read: "), std::string::npos) << table.out;
  f.unlock();
  waiter.join();
  r.unlock();
}

// A fair lock's queue key holding a string: status still shows the lock, and says what is wrong with
// the queue (it failed with the server's WRONGTYPE, naming no key, and showed nothing).
TEST_F(cli_test, status_names_a_queue_key_of_the_wrong_type) {
  client c{cfg()};
  auto l = c.lock("st:badq");
  l.lock();
  raw()({"SET", "redisson_lock_queue:{st:badq}", "x"});
  auto out = run({"status", "st:badq", "--redis", url(), "--json"});
  EXPECT_EQ(out.status, 0) << out.err;
  EXPECT_NE(out.out.find("\"state\":\"held\""), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\"problem\":\"\\\"redisson_lock_queue:{st:badq}\\\" holds a string where the fair lock "
                         "keeps a list\""),
            std::string::npos)
      << out.out;
  auto table = run({"status", "st:badq", "--redis", url()});
  EXPECT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("holds a string where the fair lock keeps a list"), std::string::npos) << table.out;
  l.unlock();
}

// A fair queue of 200,000 crashed waiters and a read-write hash of 300,000 crashed readers: status
// lists the first 100 of each and counts them all (it copied and printed every one before).
TEST_F(cli_test, status_lists_the_first_hundred_waiters_and_holders_and_counts_them_all) {
  std::vector<std::string> push{"RPUSH", "redisson_lock_queue:{st:longq}"};
  for (int i = 0; i < 10000; ++i) push.push_back("crashed-" + std::to_string(i) + ":1");
  for (int k = 0; k < 20; ++k) raw().command(push);
  raw()({"HSET", "st:longq", "holder:1", "1"});
  raw()({"HSET", "st:many", "mode", "read"});
  for (int k = 0; k < 15; ++k) {
    std::vector<std::string> hset{"HSET", "st:many"};
    for (int i = 0; i < 20000; ++i) {
      hset.push_back("reader-" + std::to_string(k * 20000 + i) + ":1");
      hset.push_back("1");
    }
    raw().command(hset);
  }
  auto out = run({"status", "st:longq", "st:many", "--redis", url(), "--json"});
  EXPECT_EQ(out.status, 0) << out.err;
  EXPECT_LT(out.out.size(), 20000u) << "status printed every entry";
  EXPECT_NE(out.out.find("\"kind\":\"fair\""), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\"queue_length\":200000"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\"waiters\":200000"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("crashed-99:1"), std::string::npos) << out.out;
  EXPECT_EQ(out.out.find("crashed-100:1"), std::string::npos) << "more than 100 of the queue";
  EXPECT_NE(out.out.find("\"holder_count\":300000"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\"mode\":\"read\""), std::string::npos) << out.out;
  std::size_t readers = 0;
  for (auto p = out.out.find("\"owner\":\"reader-"); p != std::string::npos; p = out.out.find("\"owner\":\"reader-", p + 1))
    ++readers;
  EXPECT_GE(readers, 1u);
  EXPECT_LE(readers, 100u);
  auto table = run({"status", "st:longq", "st:many", "--redis", url()});
  EXPECT_NE(table.out.find(", ... (200000 in all)"), std::string::npos) << table.out.substr(0, 2000);
  EXPECT_NE(table.out.find(", ... (300000 in all)"), std::string::npos) << table.out.substr(0, 2000);
  EXPECT_NE(table.out.find("mode read: "), std::string::npos);
  raw()({"DEL", "redisson_lock_queue:{st:longq}", "st:longq", "st:many"});
}

TEST_F(cli_test, status_reports_free_reentrant_and_mutex_locks) {
  client c{cfg()};
  auto r1 = c.lock("r");
  r1.lock();
  r1.lock();  // held twice
  auto m = c.mutex("m");
  m.lock();
  std::string odd = std::string("bin\x01\"q") + "\xff";
  auto b = c.lock(odd);
  b.lock();
  raw()({"RPUSH", "list", "x"});
  // A waiter on "r", so that the waiter count is 1.
  auto& waiter = start({"run", "r", "--redis", url(), "--wait", "20s", "--", "true"});
  ASSERT_TRUE(eventually([&] { return subscribers("redisson_lock__channel:{r}") == 1; }, 10000ms)) << waiter.err();

  auto res = run({"status", "r", "m", "free", odd, "list", "--json", "--redis", url()});
  ASSERT_EQ(res.status, 65) << "every row, then 65: \"list\" is not a lock; " << res.err;
  std::vector<std::string> lines;
  std::istringstream in(res.out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 5u) << res.out;

  const std::string owner = c.id() + ":" + std::to_string(this_thread_owner());
  auto& r = lines[0];
  EXPECT_EQ(r.rfind("{\"lock\":\"r\",\"state\":\"held\",\"kind\":\"reentrant\",", 0), 0u) << r;
  EXPECT_NE(r.find("\"holders\":[{\"owner\":\"" + owner + "\",\"count\":2,\"client\":{\"host\":"), std::string::npos)
      << r;
  EXPECT_GT(json_number(r, "ttl_ms"), 0);
  EXPECT_LE(json_number(r, "ttl_ms"), 30000);
  EXPECT_EQ(json_number(r, "waiters"), 1) << r;
  EXPECT_NE(r.find("{\"channel\":\"redisson_lock__channel:{r}\",\"subscribers\":1}"), std::string::npos) << r;

  auto& mu = lines[1];
  EXPECT_EQ(mu.rfind("{\"lock\":\"m\",\"state\":\"held\",\"kind\":\"mutex\",", 0), 0u) << mu;
  EXPECT_NE(mu.find("\"token\":\"" + raw()({"GET", "m"}).str + "\""), std::string::npos) << mu;
  EXPECT_GT(json_number(mu, "ttl_ms"), 0);
  EXPECT_EQ(json_number(mu, "waiters"), 0);
  EXPECT_NE(mu.find("redlease_mutex__channel:{m}"), std::string::npos) << mu;

  auto& f = lines[2];
  EXPECT_EQ(f.rfind("{\"lock\":\"free\",\"state\":\"free\",\"kind\":\"none\",\"ttl_ms\":-2,", 0), 0u) << f;
  EXPECT_NE(f.find("redisson_lock__channel:{free}"), std::string::npos) << f;
  EXPECT_NE(f.find("redlease_mutex__channel:{free}"), std::string::npos) << f;
  // A free key: the three kinds' channels (cli.md, WAITERS); a key of another type: two.
  auto count = [](const std::string& line, const std::string& what) {
    std::size_t n = 0;
    for (auto p = line.find(what); p != std::string::npos; p = line.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_NE(f.find("{\"channel\":\"redisson_rwlock:{free}\",\"subscribers\":0}"), std::string::npos) << f;
  EXPECT_EQ(count(f, "\"channel\":"), 3u) << f;
  EXPECT_EQ(count(lines[4], "\"channel\":"), 2u) << lines[4];
  EXPECT_NE(lines[4].find("redisson_lock__channel:{list}"), std::string::npos) << lines[4];
  EXPECT_NE(lines[4].find("redlease_mutex__channel:{list}"), std::string::npos) << lines[4];

  // Control characters, quotes and invalid UTF-8 are escaped: the line stays valid JSON.
  EXPECT_EQ(lines[3].rfind("{\"lock\":\"bin\\u0001\\\"q\\u00ff\",\"state\":\"held\",\"kind\":\"reentrant\"", 0), 0u)
      << lines[3];
  EXPECT_EQ(lines[4].rfind("{\"lock\":\"list\",\"state\":\"other\",\"kind\":\"list\",\"ttl_ms\":-1", 0), 0u)
      << lines[4];

  // The table.
  res = run({"status", "r", "m", "free", "--redis", url()});
  ASSERT_EQ(res.status, 0) << res.err;
  auto row = line_with(res.out, "reentrant");
  EXPECT_EQ(row.rfind("r ", 0), 0u) << res.out;
  EXPECT_NE(row.find("held"), std::string::npos) << res.out;
  EXPECT_NE(row.find(owner + " x2"), std::string::npos) << res.out;
  EXPECT_NE(line_with(res.out, "mutex").find("token " + raw()({"GET", "m"}).str), std::string::npos) << res.out;
  EXPECT_NE(line_with(res.out, "free ").find("none"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("WAITERS"), std::string::npos) << res.out;

  r1.unlock();
  r1.unlock();
  EXPECT_EQ(waiter.wait(), 0) << waiter.err();
  m.unlock();
  b.unlock();
}

// ---- unlock ------------------------------------------------------------------------------------

TEST_F(cli_test, force_unlock_wakes_a_waiting_run) {
  std::string body_a = "trap 'kill $p; exit 0' TERM; echo > " + path("a") + "; sleep 30 & p=$!; wait $p";
  auto& a = start({"run", "job", "--redis", url(), "--watchdog-timeout", "900ms", "--", "sh", "-c", body_a});
  ASSERT_TRUE(eventually([&] { return file_exists("a"); }, 10000ms)) << a.err();
  auto& b = start({"run", "job", "--redis", url(), "--wait", "10s", "--", "touch", path("b")});
  ASSERT_TRUE(eventually([&] { return subscribers("redisson_lock__channel:{job}") == 1; }, 10000ms)) << b.err();
  EXPECT_FALSE(file_exists("b"));

  auto t0 = steady::now();
  auto r = run({"unlock", "--force", "job", "--redis", url()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("unlocked"), std::string::npos) << r.out;
  EXPECT_EQ(b.wait(), 0) << b.err();
  EXPECT_LT(ms_since(t0), 5000);  // woken by the unlock message, well before A's lease ends
  EXPECT_TRUE(file_exists("b"));
  EXPECT_EQ(a.wait(), 76) << a.err();  // A finds its lock gone
}

// A read-write lock's waiters listen on its own channel, and a fair lock's head on a channel of its
// own: a forced unlock wakes them there (it published on the reentrant lock's channel, and they slept
// until their wait or poll ended).
TEST_F(cli_test, force_unlock_wakes_the_waiters_of_a_read_write_and_a_fair_lock) {
  for (const std::string kind : {"read-write", "fair"}) {
    SCOPED_TRACE(kind);
    const std::string name = kind == "fair" ? "fu:fair" : "fu:rw";
    config slow = cfg();
    slow.mutex_poll_cap = 8000ms;  // the fair head's own re-check comes too late to pass
    client holder{cfg()}, waiting{slow};
    auto take = [&](client& c) {
      return kind == "fair" ? detail::lock_handle(c.fair_lock(name)) : detail::lock_handle(c.write_lock(name));
    };
    auto h = take(holder);
    h.lock();  // watchdog: a 30 s lease
    std::atomic<long long> took{-1};
    steady::time_point t0;
    std::atomic<bool> forced{false};
    std::thread w([&] {
      auto l = take(waiting);
      if (l.try_lock(20000ms)) {
        if (forced) took = ms_since(t0);
        l.unlock();
      }
    });
    // Subscribed: the read-write lock's channel, or the queued head's own.
    ASSERT_TRUE(eventually([&] {
      if (kind != "fair") return subscribers("redisson_rwlock:{" + name + "}") == 1;
      auto q = raw()({"LRANGE", "redisson_lock_queue:{" + name + "}", "0", "-1"});
      return q.elements.size() == 1 && subscribers("redisson_lock__channel:{" + name + "}:" + q.elements[0].str) == 1;
    }, 10000ms));
    t0 = steady::now();
    forced = true;
    auto r = run({"unlock", "--force", name, "--redis", url()});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("(" + kind + ")"), std::string::npos) << r.out;
    w.join();
    EXPECT_GE(took.load(), 0) << "the waiter did not get the lock";
    EXPECT_LT(took.load(), 4000) << "woken by its poll or its wait's end, not by the unlock";
  }
}

TEST_F(cli_test, unlock_by_type_and_its_errors) {
  client c{cfg()};
  auto m = c.mutex("m");
  m.lock();
  auto r = run({"unlock", "--force", "m", "--redis", url()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("mutex"), std::string::npos) << r.out;
  EXPECT_FALSE(exists("m"));

  r = run({"unlock", "--force", "nothing", "--redis", url()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("not locked"), std::string::npos) << r.out;

  raw()({"RPUSH", "list", "x"});
  r = run({"unlock", "--force", "list", "--redis", url()});
  EXPECT_EQ(r.status, 65) << r.err;
  EXPECT_NE(r.err.find("not a lock"), std::string::npos) << r.err;
  EXPECT_TRUE(exists("list"));

  // An application's hash named by mistake is not a lock: left alone (was: deleted as "reentrant").
  raw()({"HSET", "user:42", "name", "bob", "visits", "7"});
  r = run({"unlock", "--force", "user:42", "--redis", url()});
  EXPECT_EQ(r.status, 65) << r.err;
  EXPECT_NE(r.err.find("not a lock"), std::string::npos) << r.err;
  EXPECT_TRUE(exists("user:42"));
  // A Redisson holder's hash is one.
  raw()({"HSET", "java", "8743c9c0-0795-4907-87fd-6c719a6b4586:1", "2"});
  r = run({"unlock", "--force", "java", "--redis", url()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(exists("java"));

  auto l = c.lock("r");
  l.lock();
  r = run({"unlock", "r", "--redis", url()});  // without --force
  EXPECT_EQ(r.status, 64);
  EXPECT_NE(r.err.find("--force"), std::string::npos) << r.err;
  EXPECT_TRUE(exists("r"));
  l.unlock();
}

// ---- authentication ---------------------------------------------------------------------------

class cli_auth_test : public cli_test {
 protected:
  server_options options() const override {
    server_options o;
    o.password = "s3cret";
    return o;
  }
};

TEST_F(cli_auth_test, password_from_the_environment) {
  std::string bare = "redis://127.0.0.1:" + std::to_string(server().port());
  auto r = run({"run", "p", "--redis", bare, "--", "true"}, {"REDLEASE_PASSWORD=s3cret"});
  EXPECT_EQ(r.status, 0) << r.err;
  r = run({"status", "p", "--redis", bare}, {"REDLEASE_PASSWORD=s3cret"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(run({"run", "p", "--redis", bare, "--", "true"}).status, 69);  // no password
  EXPECT_EQ(run({"run", "p", "--redis", bare, "--", "true"}, {"REDLEASE_PASSWORD=wrong"}).status, 69);
  EXPECT_EQ(run({"run", "p", "--redis", "redis://:wrong@127.0.0.1:" + std::to_string(server().port()), "--", "true"})
                .status,
            69);
  EXPECT_EQ(run({"run", "p", "--redis", url(), "--", "true"}).status, 0);  // the password in the URL
}

// `redis://app@host`: the ACL user app, whose password comes from $REDLEASE_PASSWORD (as redis-py and
// node-redis read a user part without a colon). Before, `app` was taken as the password and replaced
// by the variable's: AUTH as the default user, refused (69).
TEST_F(cli_auth_test, an_acl_user_named_in_the_url_takes_its_password_from_the_environment) {
  ASSERT_EQ(raw()({"ACL", "SETUSER", "app", "on", ">app-pw", "~*", "&*", "+@all"}).str, "OK");
  const std::string app_url = "redis://app@127.0.0.1:" + std::to_string(server().port());
  auto r = run({"run", "u", "--redis", app_url, "--", "true"}, {"REDLEASE_PASSWORD=app-pw"});
  EXPECT_EQ(r.status, 0) << r.err;
  r = run({"status", "u", "--redis", app_url}, {"REDLEASE_PASSWORD=app-pw"});
  EXPECT_EQ(r.status, 0) << r.err;
  // The default user's password is not app's.
  EXPECT_EQ(run({"status", "u", "--redis", app_url}, {"REDLEASE_PASSWORD=s3cret"}).status, 69);
  raw()({"ACL", "DELUSER", "app"});
}

// TLS: --cacert (or $REDLEASE_CACERT) to trust the server's CA; a certificate from an unknown CA is
// a connection that cannot be made: exit 69 with the reason; --insecure connects and warns.
TEST_F(cli_test, tls_flags) {
  REDLEASE_REQUIRE(test_certs::available(), "openssl not found");
  test_certs certs;
  server_options o;
  o.tls.cert_file = certs.server().cert;
  o.tls.key_file = certs.server().key;
  o.tls.ca_file = certs.ca();
  redis_server s(o);
  const std::string tls_url = s.tls_url();

  auto r = run({"run", "t", "--redis", tls_url, "--cacert", certs.ca(), "--", "true"});
  EXPECT_EQ(r.status, 0) << r.err;
  r = run({"status", "t", "--redis", tls_url}, {"REDLEASE_CACERT=" + certs.ca()});
  EXPECT_EQ(r.status, 0) << r.err;
  // --tls on a redis:// URL.
  r = run({"status", "t", "--redis", "redis://127.0.0.1:" + std::to_string(s.tls_port()), "--tls", "--cacert",
           certs.ca()});
  EXPECT_EQ(r.status, 0) << r.err;

  r = run({"run", "t", "--redis", tls_url, "--cacert", certs.other_ca(), "--", "true"});
  EXPECT_EQ(r.status, 69) << r.err;
  EXPECT_NE(r.err.find("unknown CA"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--cacert"), std::string::npos) << r.err;
  r = run({"status", "t", "--redis", tls_url});  // the system store does not know the test CA
  EXPECT_EQ(r.status, 69) << r.err;

  r = run({"status", "t", "--redis", tls_url, "--insecure"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: --insecure"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("NOT verified"), std::string::npos) << "warned twice: " << r.err;
}

}  // namespace
}  // namespace redlease::test
