// SPDX-License-Identifier: MIT
// `redlease top [PATTERN]`: a live view of the locks whose names match, from SCAN passes
// (lock_scan.hpp) spaced so that top's share of the server stays under --max-load; keys to sort,
// filter, select and force-unlock. Plain output (--once, --json, or no terminal): one pass.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "lock_scan.hpp"
#include "status_format.hpp"
#include "top_view.hpp"

namespace redlease::cli {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct top_options {
  std::string url, pattern = "*", interval = "1s", sort = "age", kind;
  bool once = false, json = false, reverse = false;
  std::size_t limit = 0;
  double max_load = 5;
};

// The signals top ends on (and SIGWINCH, SIGTSTP) reach the loop through a pipe: a handler may do
// no more.
int signal_pipe[2] = {-1, -1};
extern "C" void on_signal(int sig) {
  const int saved = errno;
  const char b = static_cast<char>(sig);
  [[maybe_unused]] auto n = ::write(signal_pipe[1], &b, 1);
  errno = saved;
}

// The terminal in top's mode for as long as it lives: no echo, keys as they come, the alternate
// screen, no cursor; restored however top ends (quit, signal, exception), and while it is stopped.
class raw_terminal {
 public:
  raw_terminal() {
    if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < signals_.size(); ++i) ::sigaction(signals_[i], &sa, &old_[i]);
    ::tcgetattr(STDIN_FILENO, &saved_);
    enter();
  }
  ~raw_terminal() {
    leave();
    for (std::size_t i = 0; i < signals_.size(); ++i) ::sigaction(signals_[i], &old_[i], nullptr);
    ::close(signal_pipe[0]);
    ::close(signal_pipe[1]);
    signal_pipe[0] = signal_pipe[1] = -1;
  }
  // Ctrl-Z: the shell gets its terminal back as it was, and top its mode when continued (the shell
  // does not put it back).
  void suspend() {
    leave();
    struct sigaction dfl {}, mine {};
    dfl.sa_handler = SIG_DFL;
    ::sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGTSTP, &dfl, &mine);
    ::raise(SIGTSTP);  // returns once continued
    ::sigaction(SIGTSTP, &mine, nullptr);
    enter();
  }
  raw_terminal(const raw_terminal&) = delete;
  raw_terminal& operator=(const raw_terminal&) = delete;

  static void put(const std::string& s) {
    for (std::size_t at = 0; at < s.size();) {
      auto n = ::write(STDOUT_FILENO, s.data() + at, s.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      at += static_cast<std::size_t>(n);
    }
  }
  // Rows and columns (80x24 when the terminal does not say).
  static std::pair<std::size_t, std::size_t> size() {
    winsize ws{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) return {24, 80};
    return {ws.ws_row, ws.ws_col};
  }

 private:
  void enter() {
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // ISIG stays: Ctrl-C is SIGINT, handled above
    raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw);
    put("\x1b[?1049h\x1b[?25l");
  }
  void leave() {
    put("\x1b[0m\x1b[?25h\x1b[?1049l");
    ::tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
  }

  static constexpr std::array<int, 5> signals_{SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP};
  std::array<struct sigaction, 5> old_{};
  termios saved_{};
};

const char* const help_line =
    "q quit  s sort  r reverse  / filter  k kind  c clear  up/down select  u force-unlock";

// The live view: its state between passes and keys.
class live_view {
 public:
  live_view(lock_scanner& s, const top_options& o, milliseconds interval, view_filter f)
      : scanner_(s), interval_(interval), max_load_(o.max_load), limit_(o.limit), filter_(std::move(f)) {
    scan_.match = o.pattern;
  }

  int run() {
    raw_terminal term;
    draw();  // "scanning...": a first pass over a large keyspace takes a while
    auto next_pass = clock::now();
    for (;;) {
      if (clock::now() >= next_pass) next_pass = pass();
      draw();
      const auto wait = std::chrono::duration_cast<milliseconds>(next_pass - clock::now()).count();
      pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {signal_pipe[0], POLLIN, 0}};
      int n = ::poll(fds, 2, static_cast<int>(std::clamp<long long>(wait + 1, 0, 60'000)));
      if (n < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");
      if (n <= 0) continue;
      if (fds[1].revents & POLLIN) {
        char sig[16];
        auto got = ::read(signal_pipe[0], sig, sizeof sig);
        for (ssize_t i = 0; i < got; ++i) {
          if (sig[i] == SIGTSTP) term.suspend();
          else if (sig[i] != SIGWINCH) return exit_code::ok;  // SIGWINCH: the next draw reads the new size
        }
      }
      if (fds[0].revents & (POLLHUP | POLLERR)) return exit_code::ok;
      if (fds[0].revents & POLLIN) {
        char buf[64];
        auto got = ::read(STDIN_FILENO, buf, sizeof buf);
        if (got == 0) return exit_code::ok;
        for (const auto& k : decode_keys(std::string(buf, got > 0 ? static_cast<std::size_t>(got) : 0)))
          if (!on_key(k)) return exit_code::ok;
      }
    }
  }

 private:
  enum class mode { browse, filter, confirm };

  // One pass; returns when the next may start (pass_pause: the pass's own duration spaces them).
  clock::time_point pass() {
    const auto t0 = clock::now();
    cost_ = {};  // a failed pass costs what it did, not what the last one did
    try {
      auto found = scanner_.scan(scan_, &cost_);
      pass_ = std::move(found);
      ages_.observe(pass_, clock::now());
      scan_error_.clear();
      ++passes_;
    } catch (const error& e) {
      scan_error_ = cli_words(e.what());
    }
    const auto end = clock::now();
    took_ = end - t0;
    pause_ = pass_pause(interval_, took_, max_load_);
    return end + pause_;
  }

  const found_lock* selected(const std::vector<const found_lock*>& rows) {
    for (const auto* l : rows)
      if (l->name == selected_name_ && l->node == selected_node_) return l;
    if (rows.empty()) return nullptr;
    const auto* l = rows[std::min(selected_index_, rows.size() - 1)];
    selected_name_ = l->name;
    selected_node_ = l->node;
    return l;
  }

  std::vector<const found_lock*> rows() {
    auto r = select_rows(pass_, filter_, &ages_, clock::now());
    if (limit_ > 0 && r.size() > limit_) r.resize(limit_);
    return r;
  }

  void draw() {
    const auto [height, width] = raw_terminal::size();
    const auto now = clock::now();
    auto shown = rows();
    const found_lock* sel = selected(shown);
    const bool cluster = scanner_.cluster();
    std::vector<std::vector<std::string>> cells{table_header(cluster)};
    std::size_t sel_index = 0;
    for (std::size_t i = 0; i < shown.size(); ++i) {
      if (shown[i] == sel) sel_index = i;
      // One holder a row: a screen has no room for a list of 38-character owner fields.
      cells.push_back(table_cells(*shown[i], cluster, format_age(ages_.age(*shown[i], now)), 1));
    }
    selected_index_ = sel_index;
    auto lines = layout_rows(cells, 48);
    const std::size_t room = height > 5 ? height - 5 : 1;  // title, header, selection, status, help
    // The selected row stays on screen: the table scrolls under it.
    if (sel_index < top_) top_ = sel_index;
    if (sel_index >= top_ + room) top_ = sel_index + 1 - room;
    if (top_ + room > shown.size()) top_ = shown.size() > room ? shown.size() - room : 0;

    std::string title = "redlease top  " + std::to_string(shown.size()) + "/" + std::to_string(pass_.size()) +
                        " locks  pass " + std::to_string(cost_.keys) + " keys " +
                        std::to_string(std::chrono::duration_cast<milliseconds>(took_).count()) + " ms on " +
                        std::to_string(cost_.masters) + (cost_.masters == 1 ? " master" : " masters") + ", every " +
                        format_ttl(std::chrono::duration_cast<milliseconds>(pause_).count()) + "  sort " +
                        std::string(sort_key_name(filter_.sort)) + (filter_.reverse ? " (reversed)" : "") +
                        "  kind " + (filter_.kind.empty() ? "any" : filter_.kind) + "  filter \"" +
                        printable(filter_.text) + "\"";
    std::string frame = "\x1b[H\x1b[2J" + clip(title, width) + "\r\n\x1b[1m" + clip(lines.front(), width) + "\x1b[0m";
    for (std::size_t i = top_; i < shown.size() && i < top_ + room; ++i) {
      std::string line = clip(lines[i + 1], width);
      if (i == sel_index) line = "\x1b[7m" + line + std::string(width - display_width(line), ' ') + "\x1b[0m";
      frame += "\r\n" + line;
    }
    std::string status = message_;
    if (mode_ == mode::filter) status = "filter: " + printable(input_) + "_  (Enter apply, Esc cancel)";
    else if (mode_ == mode::confirm) status = "force-unlock \"" + printable(confirm_name_) + "\"? [y/N]";
    else if (!scan_error_.empty()) status = "scan failed: " + scan_error_ + " (retrying)";
    else if (passes_ == 0) status = "scanning...";
    frame += "\x1b[" + std::to_string(height - 2) + ";1H" + (sel == nullptr ? "" : clip(selection_line(*sel), width)) +
             "\r\n" + clip(status, width) + "\r\n\x1b[2m" +
             clip(help_line, width) + "\x1b[0m";
    raw_terminal::put(frame);
  }

  // Returns false to quit.
  bool on_key(const key_press& k) {
    if (mode_ == mode::filter) {
      if (k.k == key::enter) {
        filter_.text = input_;
        mode_ = mode::browse;
      } else if (k.k == key::escape) {
        mode_ = mode::browse;
      } else if (k.k == key::backspace) {
        if (!input_.empty()) input_.pop_back();
      } else if (k.k == key::ch) {
        input_ += k.c;
      }
      return true;
    }
    if (mode_ == mode::confirm) {
      mode_ = mode::browse;
      if (k.k == key::ch && k.c == 'y') force_unlock();
      else message_ = "left \"" + printable(confirm_name_) + "\" alone";
      return true;
    }
    if (k.k == key::up && selected_index_ > 0) {
      --selected_index_;
      selected_name_.clear();
    } else if (k.k == key::down) {
      ++selected_index_;
      selected_name_.clear();
    } else if (k.k == key::ch) {
      switch (k.c) {
        case 'q': return false;
        case 's': filter_.sort = next_sort_key(filter_.sort); break;
        case 'r': filter_.reverse = !filter_.reverse; break;
        case '/':
          mode_ = mode::filter;
          input_ = filter_.text;
          break;
        case 'k': {
          const auto& kinds = top_kinds();
          auto it = std::find(kinds.begin(), kinds.end(), filter_.kind);
          filter_.kind = it == kinds.end() ? kinds.front() : it + 1 == kinds.end() ? std::string() : *(it + 1);
          break;
        }
        case 'c':
          filter_.text.clear();
          filter_.kind.clear();
          break;
        case 'u': {
          auto shown = rows();
          if (const found_lock* l = selected(shown)) {
            confirm_name_ = l->name;
            confirm_node_ = l->node;
            mode_ = mode::confirm;
          } else {
            message_ = "no lock selected";
          }
          break;
        }
        default: break;
      }
    }
    return true;
  }

  void force_unlock() {
    auto it = std::find_if(pass_.begin(), pass_.end(),
                           [&](const found_lock& l) { return l.name == confirm_name_ && l.node == confirm_node_; });
    if (it == pass_.end()) {
      message_ = "\"" + printable(confirm_name_) + "\" is no longer listed";
      return;
    }
    try {
      const bool existed = scanner_.force_unlock(*it);
      message_ = existed ? "force-unlocked \"" + printable(confirm_name_) + "\" (" + it->kind + ")"
                         : "\"" + printable(confirm_name_) + "\" was not locked any more";
      pass_.erase(it);  // gone until a pass finds it again
    } catch (const error& e) {
      message_ = "force-unlock \"" + printable(confirm_name_) + "\" failed: " + cli_words(e.what());
    }
  }

  lock_scanner& scanner_;
  scan_options scan_;
  const milliseconds interval_;
  const double max_load_;
  const std::size_t limit_;
  view_filter filter_;
  age_tracker ages_;
  std::vector<found_lock> pass_;
  scan_cost cost_;
  clock::duration took_{}, pause_{};
  std::size_t passes_ = 0;
  std::string scan_error_, message_;
  mode mode_ = mode::browse;
  std::string input_, confirm_name_, confirm_node_, selected_name_, selected_node_;
  std::size_t selected_index_ = 0, top_ = 0;
};

int top(const top_options& o) {
  view_filter f;
  f.kind = o.kind;
  f.sort = parse_sort_key(o.sort).value_or(sort_key::age);
  f.reverse = o.reverse;
  const auto interval = parse_duration(o.interval).value_or(milliseconds(1000));
  // Faster than a screen is read, top would only redraw and scan for nothing.
  if (interval < milliseconds(100))
    throw error(errc::invalid_argument, "--interval " + o.interval + ": at least 100ms", error::whole_message);
  lock_scanner scanner{make_config(o.url.empty() ? default_url() : o.url)};
  if (!o.once && !o.json && ::isatty(STDOUT_FILENO) && ::isatty(STDIN_FILENO))
    return live_view(scanner, o, interval, std::move(f)).run();
  scan_options so;
  so.match = o.pattern;
  auto pass = scanner.scan(so);
  auto rows = select_rows(pass, f, nullptr, clock::now());
  if (o.limit > 0 && rows.size() > o.limit) rows.resize(o.limit);
  if (o.json) {
    for (const auto* l : rows) std::cout << lock_json(*l) << "\n";
  } else {
    std::vector<std::vector<std::string>> table{table_header(scanner.cluster())};
    for (const auto* l : rows) table.push_back(table_cells(*l, scanner.cluster(), ""));
    print_rows(table);
  }
  std::cout << std::flush;
  return exit_code::ok;
}

}  // namespace

void setup_top(CLI::App& app, action_t& action) {
  auto [cmd, o] = add_command<top_options>(
      app, action, "top", "A live view of the locks matching a pattern: holders, TTL, age, waiters",
      "SCAN passes (never KEYS) over every master (standalone, the Sentinel's master, each master of a\n"
      "cluster): a lock's auxiliary keys (a fair lock's queue, ...) fold into its row. Columns: LOCK,\n"
      "KIND, HOLDERS (the first ones, +N more), HOLDS (hold count; a read-write lock: its mode and how\n"
      "many hold it), TTL, AGE (at least: since top first saw that holder hold it), WAITERS (a fair\n"
      "lock's queue included), NODE on a cluster, DETAIL (a fair lock's queue head, a semaphore's\n"
      "permits, a permit semaphore's permits out, a latch's count).\n"
      "A pass waits at least the larger of --interval and (100 / --max-load) times the last pass's\n"
      "duration, so that top keeps the server busy less than --max-load percent of the time.\n"
      "Keys: q quit (also Ctrl-C; Ctrl-Z suspends); s next sort key; r reverse; / filter by a substring of\n"
      "the name (Enter apply, Esc cancel); k next kind; c clear the filters; up/down select; u force-unlock\n"
      "the selected lock (asks; only y proceeds).\n"
      "Plain output (one pass, then exit) with --once, --json, or when stdout or stdin is not a terminal.\n"
      "Exit status: 0 done (quit); 64 usage; 69 Redis unavailable (unreachable, authentication, TLS, no\n"
      "Sentinel, not Redis); 78 the ACL user may not run a command top sends (SCAN, TYPE, ...) or it is\n"
      "renamed; 70 an unexpected error.",
      top);
  cmd->add_option("pattern", o->pattern, "Glob over the lock names (default: *)");
  add_connection_flags(cmd, o->url);
  cmd->add_option("--interval", o->interval, "Time between passes, at least 100ms (default: 1s; see --max-load)")
      ->check(duration_validator());
  cmd->add_option("--max-load", o->max_load,
                  "Percent of the server's time top may take at most: passes are spaced accordingly (default: 5)")
      ->check(CLI::Range(0.1, 100.0));
  cmd->add_option("--sort", o->sort,
                  "age (oldest first; one pass knows no age: by name) | name | ttl (soonest expiry first) | "
                  "waiters | holders (most first) | kind")
      ->check(CLI::IsMember({"age", "name", "ttl", "waiters", "holders", "kind"}).description(""))
      ->type_name("KEY");
  cmd->add_flag("--reverse", o->reverse, "Reverse the order");
  // The values in the description, not in the type name: one unbreakable word in the man page.
  std::string kinds;
  for (const auto& k : top_kinds()) kinds += (kinds.empty() ? "" : " | ") + k;
  cmd->add_option("--kind", o->kind, "Only locks of this kind: " + kinds)
      ->check(CLI::IsMember(top_kinds()).description(""))
      ->type_name("KIND");
  cmd->add_option("--limit", o->limit, "At most this many rows (default: all, or as many as the terminal holds)");
  cmd->add_flag("--once", o->once, "One pass as a plain table, then exit");
  cmd->add_flag("--json", o->json, "One pass, one JSON object per lock per line, then exit");
}

}  // namespace redlease::cli
