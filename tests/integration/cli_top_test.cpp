// SPDX-License-Identifier: MIT
// `redlease top` against a real redis-server: its one-pass outputs (--once, --json) for every kind,
// its pattern, --kind and --sort, and the live view in a real terminal (tmux): sorting, selecting,
// force-unlocking after a confirmation, quitting with the terminal restored.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli_process.hpp"
#include "lock_test_support.hpp"

namespace redlease::test {
namespace {

struct result {
  int status;
  std::string out, err;
};

/// The line of `text` containing `needle` ("" if none).
std::string line_with(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) return line;
  return {};
}

/// The output and exit status of `sh -c cmd`.
std::pair<int, std::string> shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, {}};
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

/// `s` quoted for sh.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class cli_top_test : public lock_fixture {
 protected:
  result run(const std::vector<std::string>& args) {
    cli_process p(REDLEASE_CLI_PATH, args, {}, dir_.path("out"), dir_.path("err"));
    int st = p.wait(20s);
    return {st, p.out(), p.err()};
  }
  std::string url() { return server().url(); }
  bool exists(const std::string& key) { return raw()({"EXISTS", key}).integer == 1; }
  // A shell command for tmux: top with `args`, then top's exit status and the terminal's modes,
  // saved for expect_quit_and_restored().
  std::string top_then_stty(const std::string& args) {
    return std::string(REDLEASE_CLI_PATH) + " top " + args + " --redis " + url() + "; echo $? > " + dir_.path("rc") +
           "; stty -a > " + dir_.path("stty");
  }
  // top exited 0 and left the terminal as it found it: canonical mode and echo back on.
  template <class Session>
  void expect_quit_and_restored(Session& t) {
    ASSERT_TRUE(eventually([&] { return !t.alive(); }, 10000ms)) << t.capture();
    EXPECT_EQ(read_whole_file(dir_.path("rc")), "0\n");
    const std::string modes = read_whole_file(dir_.path("stty"));
    EXPECT_NE(modes.find(" icanon"), std::string::npos) << modes;
    EXPECT_NE(modes.find(" echo "), std::string::npos) << modes;
    EXPECT_EQ(modes.find("-icanon"), std::string::npos) << modes;
  }

  scratch_dir dir_{"redlease-cli-top"};
};

// One of each kind, held or set as a user would, with waiters where the kind shows them.
TEST_F(cli_top_test, once_and_json_show_every_kind_in_one_row_each) {
  client c{cfg()};
  auto re = c.lock("t:reentrant");
  re.lock();
  re.lock();
  auto mx = c.mutex("t:mutex");
  mx.lock();
  client fair_holder{cfg()}, w1{cfg()}, w2{cfg()};
  auto fh = fair_holder.fair_lock("t:fair");
  fh.lock();
  auto waiter = [](client& w) {
    auto l = w.fair_lock("t:fair");
    bool got = l.try_lock(20000ms);
    if (got) l.unlock();
    return got;
  };
  auto f1 = std::async(std::launch::async, waiter, std::ref(w1));
  auto f2 = std::async(std::launch::async, waiter, std::ref(w2));
  const std::string queue = describe(lock_kind::fair, "t:fair").queue_key;
  ASSERT_TRUE(eventually([&] { return raw()({"LLEN", queue}).integer == 2; }));
  client r1{cfg()}, r2{cfg()};
  auto rl1 = r1.read_lock("t:rw");
  auto rl2 = r2.read_lock("t:rw");
  rl1.lock();
  rl2.lock();
  ASSERT_TRUE(c.semaphore("t:sem").try_set_permits(3));
  ASSERT_TRUE(c.count_down_latch("t:latch").try_set_count(4));
  // A waiter on each tells a semaphore's whole number from a latch's.
  auto s_sub = c.subscribe(describe(lock_kind::semaphore, "t:sem").channel(), [](std::string_view, std::string_view) {});
  auto l_sub = c.subscribe(describe(lock_kind::latch, "t:latch").channel(), [](std::string_view, std::string_view) {});
  auto ps = c.permit_semaphore("t:psem");
  ASSERT_TRUE(ps.try_set_permits(2));
  auto permit = ps.acquire(1);

  auto json = run({"top", "--json", "--redis", url()});
  ASSERT_EQ(json.status, 0) << json.err;
  auto row = [&](const std::string& name) { return line_with(json.out, "{\"lock\":\"" + name + "\","); };
  EXPECT_NE(row("t:reentrant").find("\"kind\":\"reentrant\""), std::string::npos) << json.out;
  EXPECT_NE(row("t:reentrant").find("\"hold_count\":2"), std::string::npos) << json.out;
  EXPECT_NE(row("t:reentrant").find(c.id()), std::string::npos) << json.out;
  EXPECT_NE(row("t:fair").find("\"kind\":\"fair\""), std::string::npos) << json.out;
  EXPECT_NE(row("t:fair").find("\"queue_length\":2"), std::string::npos) << json.out;
  EXPECT_NE(row("t:rw").find("\"kind\":\"read-write\""), std::string::npos) << json.out;
  EXPECT_NE(row("t:rw").find("\"mode\":\"read\""), std::string::npos) << json.out;
  EXPECT_NE(row("t:rw").find("\"holder_count\":2"), std::string::npos) << json.out;
  EXPECT_NE(row("t:mutex").find("\"kind\":\"mutex\""), std::string::npos) << json.out;
  EXPECT_NE(row("t:sem").find("\"kind\":\"semaphore\""), std::string::npos) << json.out;
  EXPECT_NE(row("t:sem").find("\"permits\":3"), std::string::npos) << json.out;
  EXPECT_NE(row("t:latch").find("\"kind\":\"latch\""), std::string::npos) << json.out;
  EXPECT_NE(row("t:latch").find("\"permits\":4"), std::string::npos) << json.out;
  EXPECT_NE(row("t:psem").find("\"kind\":\"permit-semaphore\""), std::string::npos) << json.out;
  EXPECT_NE(row("t:psem").find("\"permits_out\":1"), std::string::npos) << json.out;
  // The auxiliary keys fold into their lock's row: one line per lock, nothing else.
  EXPECT_EQ(json.out.find(queue), std::string::npos) << json.out;
  EXPECT_EQ(json.out.find("{\"lock\":\"redisson"), std::string::npos) << json.out;
  std::size_t lines = 0;
  for (char ch : json.out) lines += ch == '\n';
  EXPECT_EQ(lines, 7u) << json.out;

  auto once = run({"top", "--once", "--redis", url()});
  ASSERT_EQ(once.status, 0) << once.err;
  EXPECT_EQ(once.out.rfind("LOCK", 0), 0u) << once.out;
  EXPECT_NE(line_with(once.out, "t:fair ").find("queue 2"), std::string::npos) << once.out;
  EXPECT_NE(line_with(once.out, "t:rw ").find("read 2"), std::string::npos) << once.out;
  EXPECT_NE(line_with(once.out, "t:sem ").find("permits 3"), std::string::npos) << once.out;
  EXPECT_NE(line_with(once.out, "t:latch ").find("count 4"), std::string::npos) << once.out;
  EXPECT_NE(line_with(once.out, "t:reentrant ").find("reentrant"), std::string::npos) << once.out;
  EXPECT_EQ(once.out.find(queue), std::string::npos) << once.out;

  fh.unlock();
  EXPECT_TRUE(f1.get());
  EXPECT_TRUE(f2.get());
  rl1.unlock();
  rl2.unlock();
  re.unlock();
  re.unlock();
  mx.unlock();
}

TEST_F(cli_top_test, pattern_kind_and_sort_ttl) {
  client c{cfg()};
  auto a_long = c.lock("a:long");
  a_long.lock(60000ms);
  auto a_short = c.lock("a:short");
  a_short.lock(20000ms);
  auto a_mutex = c.mutex("a:mutex");
  a_mutex.lock(40000ms);
  auto b = c.lock("b:other");
  b.lock();

  auto json = run({"top", "a:*", "--json", "--redis", url()});
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_NE(json.out.find("\"lock\":\"a:long\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"lock\":\"a:mutex\""), std::string::npos) << json.out;
  EXPECT_EQ(json.out.find("b:other"), std::string::npos) << json.out;

  auto kind = run({"top", "--kind", "mutex", "--json", "--redis", url()});
  ASSERT_EQ(kind.status, 0) << kind.err;
  EXPECT_NE(kind.out.find("\"lock\":\"a:mutex\""), std::string::npos) << kind.out;
  EXPECT_EQ(kind.out.find("a:long"), std::string::npos) << kind.out;
  EXPECT_EQ(kind.out.find("b:other"), std::string::npos) << kind.out;

  // Soonest expiry first: 20 s, 40 s, 60 s.
  auto by_ttl = run({"top", "a:*", "--sort", "ttl", "--once", "--redis", url()});
  ASSERT_EQ(by_ttl.status, 0) << by_ttl.err;
  const auto s = by_ttl.out.find("a:short"), m = by_ttl.out.find("a:mutex"), l = by_ttl.out.find("a:long");
  ASSERT_NE(s, std::string::npos) << by_ttl.out;
  EXPECT_LT(s, m) << by_ttl.out;
  EXPECT_LT(m, l) << by_ttl.out;
  auto reversed = run({"top", "a:*", "--sort", "ttl", "--reverse", "--json", "--redis", url()});
  EXPECT_LT(reversed.out.find("a:long"), reversed.out.find("a:short")) << reversed.out;

  auto limited = run({"top", "--sort", "name", "--limit", "1", "--json", "--redis", url()});
  EXPECT_EQ(limited.out.find("\n"), limited.out.size() - 1) << limited.out;
  EXPECT_NE(limited.out.find("a:long"), std::string::npos) << limited.out;

  // stdout not a terminal: one plain pass, as --once.
  auto plain = run({"top", "a:*", "--redis", url()});
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.out.rfind("LOCK", 0), 0u) << plain.out;
}

TEST_F(cli_top_test, usage_and_unavailable) {
  EXPECT_EQ(run({"top", "--sort", "bogus", "--once"}).status, 64);
  EXPECT_EQ(run({"top", "--kind", "bogus", "--once"}).status, 64);
  EXPECT_EQ(run({"top", "--max-load", "0", "--once"}).status, 64);
  EXPECT_EQ(run({"top", "--interval", "5x", "--once"}).status, 64);
  auto fast = run({"top", "--interval", "10ms", "--once"});
  EXPECT_EQ(fast.status, 64);
  EXPECT_NE(fast.err.find("at least 100ms"), std::string::npos) << fast.err;
  auto down = run({"top", "--once", "--redis", "redis://127.0.0.1:1"});
  EXPECT_EQ(down.status, 69) << down.err;
  auto help = run({"top", "--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Exit status"), std::string::npos) << help.out;
}

// The live view in tmux: a terminal of its own (private server socket), driven by keys.
class tmux_session {
 public:
  explicit tmux_session(const std::string& command)
      : socket_("redlease-top-" + std::to_string(::getpid())) {
    auto [st, out] = shell("tmux -L " + socket_ + " new-session -d -s top -x 160 -y 40 " + quoted(command));
    started_ = st == 0;
    start_error_ = out;
  }
  ~tmux_session() { shell("tmux -L " + socket_ + " kill-server"); }
  bool started() const { return started_; }
  const std::string& start_error() const { return start_error_; }
  std::string capture() { return shell("tmux -L " + socket_ + " capture-pane -p -t top").second; }
  void keys(const std::string& k) { shell("tmux -L " + socket_ + " send-keys -t top " + k); }
  bool alive() { return shell("tmux -L " + socket_ + " has-session -t top").first == 0; }
  void resize(int columns, int rows) {
    shell("tmux -L " + socket_ + " resize-window -t top -x " + std::to_string(columns) + " -y " + std::to_string(rows));
  }
  /// Polls the pane until `cond(screen)` holds (true) or 10 s pass (false).
  bool wait_for(const std::function<bool(const std::string&)>& cond) {
    return eventually([&] { return cond(capture()); }, 10000ms);
  }

 private:
  std::string socket_;
  bool started_ = false;
  std::string start_error_;
};

bool has(const std::string& screen, const std::string& text) { return screen.find(text) != std::string::npos; }

// A shell command for tmux: top with `args`, then its exit status and the terminal's modes, saved.
TEST_F(cli_top_test, live_view_sorts_selects_and_force_unlocks_in_a_terminal) {
  ASSERT_EQ(shell("command -v tmux").first, 0) << "tmux is required (scripts/install-deps.sh installs it)";
  client c{cfg()};
  auto alpha = c.lock("t:alpha");
  alpha.lock();
  auto beta = c.mutex("t:beta");
  beta.lock();
  // A terminal escape in a name is shown escaped, never sent to the terminal.
  auto evil = c.lock("t:\x1b]0;pwned\x07zz");
  evil.lock();
  tmux_session t(top_then_stty("'t:*' --interval 100ms"));
  ASSERT_TRUE(t.started()) << t.start_error();
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "t:alpha") && has(s, "t:beta"); })) << t.capture();
  EXPECT_TRUE(has(t.capture(), "t:\\x1b]0;pwned\\x07zz")) << t.capture();
  EXPECT_TRUE(has(t.capture(), "sort age")) << t.capture();
  // The header says what a pass cost and the pause it sets (at least --interval).
  EXPECT_TRUE(has(t.capture(), " keys ") && has(t.capture(), " ms on 1 master, every ")) << t.capture();
  t.keys("s");
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "sort name"); })) << t.capture();
  // By name: t:\x1b..., t:alpha, t:beta; the first row is selected, two downs reach t:beta.
  t.keys("Down");
  t.keys("Down");
  t.keys("u");
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "force-unlock \"t:beta\"? [y/N]"); }))
      << t.capture();
  t.keys("n");
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "left \"t:beta\" alone"); })) << t.capture();
  EXPECT_TRUE(exists("t:beta"));
  t.keys("u");
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "force-unlock \"t:beta\"? [y/N]"); }))
      << t.capture();
  t.keys("y");
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "force-unlocked \"t:beta\""); })) << t.capture();
  EXPECT_FALSE(exists("t:beta"));
  EXPECT_TRUE(exists("t:alpha"));
  // The filter: only t:alpha stays on screen.
  t.keys("/");
  t.keys("alp");
  t.keys("Enter");
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "filter \"alp\"") && !has(s, "pwned"); }))
      << t.capture();
  t.keys("q");
  expect_quit_and_restored(t);
  alpha.unlock();
  evil.unlock();
}

TEST_F(cli_top_test, ctrl_c_quits_and_restores_the_terminal) {
  ASSERT_EQ(shell("command -v tmux").first, 0) << "tmux is required (scripts/install-deps.sh installs it)";
  client c{cfg()};
  auto l = c.lock("t:held");
  l.lock();
  tmux_session t(top_then_stty("--interval 100ms"));
  ASSERT_TRUE(t.started()) << t.start_error();
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "t:held"); })) << t.capture();
  t.keys("C-c");
  expect_quit_and_restored(t);
  l.unlock();
}

// As many rows as the terminal has, following its resizes (SIGWINCH); the selection stays on screen.
TEST_F(cli_top_test, the_view_fits_the_terminal_and_follows_its_resizes) {
  ASSERT_EQ(shell("command -v tmux").first, 0) << "tmux is required (scripts/install-deps.sh installs it)";
  for (int i = 0; i < 30; ++i) {
    const std::string name = std::string("r:") + (i < 10 ? "0" : "") + std::to_string(i);
    raw()({"SET", name, "token", "PX", "60000"});
  }
  tmux_session t(top_then_stty("'r:*' --sort name --interval 100ms"));
  ASSERT_TRUE(t.started()) << t.start_error();
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "r:00") && has(s, "r:29"); })) << t.capture();
  // 12 lines: the title, the header, 7 rows, the selection, the status and the help.
  t.resize(160, 12);
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "r:06") && !has(s, "r:07"); })) << t.capture();
  t.keys("Down Down Down Down Down Down Down Down Down Down");
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "r:10") && !has(s, "r:02"); })) << t.capture();
  t.keys("q");
  expect_quit_and_restored(t);
}

// The server gone: the view stays, says the pass failed, and comes back with the server.
TEST_F(cli_top_test, a_failed_pass_shows_in_the_status_line_and_the_view_recovers) {
  ASSERT_EQ(shell("command -v tmux").first, 0) << "tmux is required (scripts/install-deps.sh installs it)";
  raw()({"SET", "t:before", "token", "PX", "60000"});
  // --max-load 100: a failed pass's pause is no longer than the pass (the default would wait 20 x).
  tmux_session t(top_then_stty("'t:*' --interval 100ms --max-load 100"));
  ASSERT_TRUE(t.started()) << t.start_error();
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "t:before"); })) << t.capture();
  raw_.reset();
  server().kill();
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "scan failed: ") && has(s, "(retrying)"); }))
      << t.capture();
  server().start();
  raw()({"SET", "t:after", "token", "PX", "60000"});
  ASSERT_TRUE(t.wait_for([](const std::string& s) { return has(s, "t:after") && !has(s, "scan failed"); }))
      << t.capture();
  t.keys("q");
  expect_quit_and_restored(t);
}

}  // namespace
}  // namespace redlease::test
