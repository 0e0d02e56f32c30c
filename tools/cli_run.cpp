// SPDX-License-Identifier: MIT
// `redlease run NAME [options] -- COMMAND [ARGS...]`: take the lock, run COMMAND while holding it,
// release it when COMMAND exits; stop COMMAND (SIGTERM, then SIGKILL) if the lock is lost.
//
// Threads and signals: the forwarded signals and SIGCHLD are blocked before the client (and its I/O
// thread) exists, so they are only ever read from a signalfd by the main thread. The client's
// callbacks (acquisition done, lock lost) run on its I/O thread and only store a value and write to
// an eventfd; the main thread poll()s both. The lock is acquired (asynchronously, with the main
// thread's owner id, so a signal can interrupt the wait) and released by the main thread.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/post.hpp>

#include "commands.hpp"
#include "redlease/redlease.hpp"

extern char** environ;

namespace redlease::cli {
namespace {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The signals redlease forwards to the child (and that end a wait for the lock).
constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

struct run_options {
  std::string url = default_url();
  std::string name;
  std::vector<std::string> command;
  std::string wait, lease, watchdog = "30s", kill_after = "10s";
  bool mutex = false, fair = false, read = false, write = false, quiet = false, verbose = false, json = false;
};

// After a `wrong_type` failure: which of the keys `kind` keeps under `name` (describe()) holds
// another type, as `; "KEY" holds a list where the fair lock keeps a zset` per key not already named
// in `said` (empty if none, or if TYPE fails).
std::string wrong_types(client& c, lock_kind kind, std::string_view name, std::string_view said) {
  const std::string who = kind == lock_kind::mutex                               ? "a mutex"
                          : kind == lock_kind::fair                              ? "the fair lock"
                          : kind == lock_kind::read || kind == lock_kind::write ? "the read-write lock"
                                                                                 : "the reentrant lock";
  std::string out;
  for (const auto& k : describe(kind, name).keys) {
    if (said.find(k.key) != std::string_view::npos) continue;
    std::error_code ec;
    auto t = c.command({"TYPE", k.key}, ec);
    if (ec) return out;
    if (t.str != "none" && t.str != k.type)
      out += "; \"" + printable(k.key) + "\" holds a " + t.str + " where " + who + " keeps a " + std::string(k.type);
  }
  return out;
}

// A lock refused because its own key is outside the ACL user's key patterns (the server's NOPERM
// names no key): the patterns that lock needs, from the kind's layout. Empty for another refusal
// (a command the user may not run), whose words say it.
std::string outside_key_patterns(lock_kind kind, const std::string& name, const std::string& user,
                                 std::string_view said) {
  if (said.find("key") == std::string_view::npos) return {};
  const auto layout = describe(kind, name);
  std::string needs;
  for (const auto& k : layout.acl_keys) needs += (needs.empty() ? "~" : " ~") + k;
  for (const auto& ch : layout.acl_channels) needs += " &" + ch;
  return "the name is outside the key patterns of ACL user " + user + " (" + std::string(said) +
         "); this lock needs " + needs;
}

lock_kind kind_of(const run_options& o) {
  return o.mutex ? lock_kind::mutex
         : o.fair ? lock_kind::fair
         : o.read ? lock_kind::read
         : o.write ? lock_kind::write
                   : lock_kind::reentrant;
}

const char* kind_name(const run_options& o) {
  return o.mutex ? "mutex" : o.fair ? "fair" : o.read ? "read" : o.write ? "write" : "reentrant";
}

// ---- output ----------------------------------------------------------------------------------

std::string signal_name(int sig) {
  if (const char* abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "SIG" + std::to_string(sig);
}

const char* reason_name(lost_reason r) {
  switch (r) {
    case lost_reason::expired: return "expired";
    case lost_reason::deleted: return "deleted";
    case lost_reason::taken: return "taken";
    case lost_reason::quorum: return "quorum";
  }
  return "unknown";
}

// One event: a JSON line with --json, else (depending on its level) a human line.
class reporter {
 public:
  enum level { verbose_only, notice, error };

  reporter(const run_options& o, std::string lock) : o_(o), lock_(std::move(lock)) {}

  class event {
   public:
    event(const reporter& r, level lv, const char* name) : r_(r), lv_(lv) {
      line_ = "{\"event\":\"";
      line_ += name;
      line_ += "\",\"lock\":\"";
      json_escape_to(line_, r.lock_);
      line_ += '"';
    }
    event& str(const char* key, std::string_view v) {
      key_(key);
      line_ += '"';
      json_escape_to(line_, v);
      line_ += '"';
      return *this;
    }
    event& num(const char* key, long long v) {
      key_(key);
      line_ += std::to_string(v);
      return *this;
    }
    /// Emits the event; `text` is the human message (without the "redlease: " prefix).
    void say(const std::string& text) {
      if (r_.o_.json) {
        line_ += "}\n";
        write_all(line_);
      } else if (lv_ == error || (!r_.o_.quiet && (lv_ == notice || r_.o_.verbose))) {
        write_all("redlease: " + text + "\n");
      }
    }

   private:
    void key_(const char* key) {
      line_ += ",\"";
      line_ += key;
      line_ += "\":";
    }
    static void write_all(const std::string& s) {
      // One write per line, so lines from concurrent writers do not interleave.
      const char* p = s.data();
      std::size_t left = s.size();
      while (left > 0) {
        ssize_t n = ::write(STDERR_FILENO, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        p += n;
        left -= static_cast<std::size_t>(n);
      }
    }
    const reporter& r_;
    level lv_;
    std::string line_;
  };

  event operator()(level lv, const char* name) const { return event(*this, lv, name); }
  /// The lock name as shown in human messages.
  std::string quoted() const { return "\"" + printable(lock_) + "\""; }

 private:
  const run_options& o_;
  std::string lock_;
};

// ---- plumbing --------------------------------------------------------------------------------

class unique_fd {
 public:
  explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  int get() const noexcept { return fd_; }
  /// Closes the descriptor held, if any, and holds `fd`.
  void reset(int fd) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// What the client's I/O thread tells the main thread. Shared so that it outlives any late callback.
struct shared_state {
  enum { pending, acquired, not_acquired, failed };
  unique_fd wake{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  std::atomic<int> acquire{pending};
  std::error_code acquire_error;  // written before `acquire` is released
  std::string acquire_error_text;  // the server's words for it (redlease::last_error_text)
  std::uint64_t fencing_token = 0;  // the grant's fencing token (written before `acquire`)
  std::atomic<int> lost{-1};      // a lost_reason once the lock is lost

  void notify() noexcept {
    std::uint64_t one = 1;
    ssize_t n = ::write(wake.get(), &one, sizeof one);
    (void)n;  // EAGAIN only if the counter is saturated: the main thread is awake anyway
  }
};

void drain(int fd) {
  std::uint64_t v;
  while (::read(fd, &v, sizeof v) > 0) {
  }
}

// The signals read from the signalfd since the last call.
std::vector<signalfd_siginfo> read_signals(int fd) {
  std::vector<signalfd_siginfo> out;
  signalfd_siginfo si;
  while (::read(fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) out.push_back(si);
  return out;
}

std::set<int> open_fds() {
  std::set<int> fds;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    int self = ::dirfd(d);
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      int fd = std::atoi(e->d_name);
      if (fd != self) fds.insert(fd);
    }
    ::closedir(d);
  }
  return fds;
}

// Status as a shell reports it.
int shell_status(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return exit_code::software;
}

long long ms_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration_cast<milliseconds>(b - a).count();
}

std::string format_ms(milliseconds d) {
  auto v = d.count();
  if (v % 3'600'000 == 0 && v > 0) return std::to_string(v / 3'600'000) + "h";
  if (v % 60'000 == 0 && v > 0) return std::to_string(v / 60'000) + "m";
  if (v % 1000 == 0 && v > 0) return std::to_string(v / 1000) + "s";
  return std::to_string(v) + "ms";
}

// ---- the run ---------------------------------------------------------------------------------

// Whether redlease has a controlling terminal (opening /dev/tty fails with ENXIO without one).
bool has_controlling_terminal() {
  int fd = ::open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Starts the command with the signal mask `mask` and the signals in `defaults` at their defaults,
// in a process group of its own when `own_group` (cleared when it could not get one: then kill()
// must name the pid, not a group that does not exist).
// The command must not run on without the lock: if redlease dies (SIGKILL, the OOM killer, a crash)
// the kernel kills it (PR_SET_PDEATHSIG, which posix_spawn cannot ask for). The signal follows the
// thread that forked, so this runs on the thread that waits for the command. Returns 0 and the pid,
// or the errno of the fork or the exec (ENOENT: not found).
int spawn_command(std::vector<char*>& argv, std::vector<char*>& envp, const sigset_t& mask, const sigset_t& defaults,
                  bool& own_group, pid_t& pid) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return errno;
  const pid_t parent = ::getpid();
  pid = ::fork();
  if (pid == 0) {
    // The child of a threaded process: async-signal-safe calls only, up to the exec.
    ::close(report[0]);
    if (own_group) ::setpgid(0, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig)
      if (::sigismember(&defaults, sig) == 1) ::sigaction(sig, &dfl, nullptr);
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    int e = 0;
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) e = errno;
    if (e == 0 && ::getppid() != parent) ::_exit(127);  // redlease died before the prctl
    if (e == 0) {
      ::execvpe(argv[0], argv.data(), envp.data());
      e = errno;
    }
    (void)!::write(report[1], &e, sizeof e);
    ::_exit(127);
  }
  const int fork_error = errno;
  // Both sides set the group, as a shell does: whichever runs first, the command is in it before the
  // parent goes on (EACCES once it has exec'd is fine: it did so itself). getpgid then says whether
  // it leads a group of its own (not if the command moved itself elsewhere first).
  if (pid > 0 && own_group) {
    ::setpgid(pid, pid);
    own_group = ::getpgid(pid) == pid;
  }
  ::close(report[1]);
  int rc = 0;
  if (pid < 0) {
    rc = fork_error;
  } else {
    int e = 0;
    ssize_t n;
    do n = ::read(report[0], &e, sizeof e);
    while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof e)) {  // the exec failed: the child exits at once
      rc = e;
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      pid = -1;
    }
  }
  ::close(report[0]);
  return rc;
}

// The shortest --watchdog-timeout: the lease is renewed every third of it (33 ms here), and the
// acquisition's own reply and each renewal's must arrive within it. Below that the lock is lost
// before (or just after) the command starts, on any server that is not on this machine.
constexpr milliseconds min_watchdog_timeout{100};
// The shortest --lease. A fixed lease starts when Redis grants it, and the grant's reply must come
// back and the command be started before it ends: a shorter one was lost before the command ran
// (exit 76). The watchdog's floor is used because its lease is the shortest hold `run` otherwise
// allows, and both must outlast the same round trip to Redis.
constexpr milliseconds min_lease{100};

// One `redlease run`, in the order it happens; run() strings the steps together. A step that ends
// the run returns its exit status; std::nullopt goes on to the next step.
//   prepare()      the options' durations; the forwarded signals blocked and read from a signalfd
//   connect()      the client and the lock handle
//   acquire()      the lock, asynchronously, or a signal that ends the wait
//   spawn()        the command, with REDLEASE_LOCK_NAME and REDLEASE_FENCING_TOKEN
//   supervise()    the command until it exits: signals forwarded, terminated when the lock is lost
//   exit_status()  the release, and the status redlease exits with
class run_session {
 public:
  explicit run_session(const run_options& o) : o_(o), rep_(o, o.name) {}
  run_session(const run_session&) = delete;
  run_session& operator=(const run_session&) = delete;

  // `reraise`: the signal the command died of, when redlease should end by it too (see run()).
  int run(int& reraise) {
    if (auto end = prepare()) return *end;
    try {
      connect();
      if (auto end = acquire()) return *end;
      if (auto end = spawn()) return *end;
      return exit_status(supervise(), reraise);
    } catch (const error& e) {
      return fail(exit_code_for(e.code()), e.what());
    } catch (const std::exception& e) {
      return fail(exit_code::software, e.what());
    }
  }

 private:
  using step = std::optional<int>;

  int fail(int status, const std::string& library_message) const {
    const std::string message = cli_words(library_message);
    rep_(reporter::error, "error").str("message", message).num("status", status).say(message);
    return status;
  }

  step prepare() {
    if (!o_.wait.empty()) wait_ = parse_duration(o_.wait);
    if (!o_.lease.empty()) {
      lease_ = parse_duration(o_.lease);
      if (!lease_ || *lease_ < min_lease)
        return fail(exit_code::usage, "--lease must be at least " + format_ms(min_lease) +
                                          ": the lease starts when Redis grants the lock, and the reply must come "
                                          "back and the command start before it ends");
    }
    auto watchdog = parse_duration(o_.watchdog);
    if (!watchdog || *watchdog < min_watchdog_timeout)
      return fail(exit_code::usage, "--watchdog-timeout must be at least " + format_ms(min_watchdog_timeout) +
                                        ": it is the lease, renewed every third of it, and each renewal is a "
                                        "round trip to Redis that must come back before the lease ends");
    watchdog_ = *watchdog;
    kill_after_ = parse_duration(o_.kill_after).value_or(milliseconds(10'000));
    if (o_.command.empty()) return fail(exit_code::usage, "no command given");

    // Signals: block the forwarded ones (unless ignored, e.g. SIGHUP under nohup) and SIGCHLD before
    // any thread exists; they are read from a signalfd. SIGCHLD must not be ignored (auto-reaping).
    std::signal(SIGCHLD, SIG_DFL);
    sigemptyset(&handled_);
    sigemptyset(&defaults_);
    sigaddset(&handled_, SIGCHLD);
    sigaddset(&defaults_, SIGCHLD);
    // A closed stderr (`... 2>&1 | head -1`, a log reader that restarts) must not kill redlease while
    // the command runs and the lock is held: SIGPIPE is ignored here (a write that fails is dropped).
    // The command gets it at its default, as it would without redlease.
    {
      struct sigaction old {};
      if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(&defaults_, SIGPIPE);
      std::signal(SIGPIPE, SIG_IGN);
    }
    for (int sig : forwarded_signals) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
      sigaddset(&handled_, sig);
      sigaddset(&defaults_, sig);
    }
    ::pthread_sigmask(SIG_BLOCK, &handled_, &previous_);
    sigfd_.reset(::signalfd(-1, &handled_, SFD_CLOEXEC | SFD_NONBLOCK));
    if (sigfd_.get() < 0 || state_->wake.get() < 0)
      return fail(exit_code::software, std::string("cannot set up signal handling: ") + std::strerror(errno));
    inherited_ = open_fds();
    return std::nullopt;
  }

  void connect() {
    std::function<void(const std::string&)> warn;
    if (o_.json)
      warn = [this](const std::string& text) { rep_(reporter::notice, "warning").str("message", text).say(text); };
    cfg_ = make_config(o_.url, warn);
    cfg_.watchdog_timeout = watchdog_;
    if (o_.json) {
      // One JSON object per line: what the client reports in the background (a stalled connection
      // dropped, a TLS warning) is an event too, not the library's plain line.
      cfg_.on_error = [this](const background_error& e) {
        if (e.source == "tls" && e.code == std::error_code{}) return;  // the --insecure warning, said above
        const std::string message = cli_words(e.message.empty() ? e.code.message() : e.message);
        rep_(reporter::notice, "background_error").str("source", e.source).str("message", message).say(message);
      };
    }
    c_.emplace(cfg_);
    c_->ping();
    client& c = *c_;
    lock_.emplace(o_.mutex   ? detail::lock_handle(c.mutex(o_.name))
                  : o_.fair  ? detail::lock_handle(c.fair_lock(o_.name))
                  : o_.read  ? detail::lock_handle(c.read_lock(o_.name))
                  : o_.write ? detail::lock_handle(c.write_lock(o_.name))
                             : detail::lock_handle(c.lock(o_.name)));
    lock_->on_lost([state = state_](const lost_info& info) {
      state->lost.store(static_cast<int>(info.reason), std::memory_order_release);
      state->notify();
    });
  }

  // The end of an acquisition, on the I/O thread: what the main thread reads once woken.
  static void finish(shared_state& state, std::error_code ec, bool got, std::uint64_t token) {
    state.fencing_token = token;
    state.acquire_error = ec;
    if (ec) state.acquire_error_text = last_error_text();
    state.acquire.store(ec ? shared_state::failed : got ? shared_state::acquired : shared_state::not_acquired,
                        std::memory_order_release);
    state.notify();
  }

  // Every grant takes a fencing token (no extra round trip): the command gets it to pass on to
  // what it writes (REDLEASE_FENCING_TOKEN). A signal cancels the acquisition: an attempt on the
  // wire is waited for, and a grant it brought is given back, so an interrupted `run` never leaves
  // the lock held until its lease ends.
  void start_acquisition() {
    auto done = [this](std::error_code ec, std::uint64_t token) {
      if (ec == errc::no_permission)
        return try_without_token(last_error_text().empty() ? ec.message() : last_error_text());
      finish(*state_, ec, !ec && token != 0, token);
    };
    auto slot = cancel_.slot();
    if (!wait_) {
      if (lease_) lock_->async_lock_and_get_token(owner_, *lease_, asio::bind_cancellation_slot(slot, done));
      else lock_->async_lock_and_get_token(owner_, asio::bind_cancellation_slot(slot, done));
    } else {
      if (lease_)
        lock_->async_try_lock_and_get_token(owner_, *wait_, *lease_, asio::bind_cancellation_slot(slot, done));
      else lock_->async_try_lock_and_get_token(owner_, *wait_, asio::bind_cancellation_slot(slot, done));
    }
  }

  // A fenced grant refused (NOPERM): by the token key or TIME, which an ACL that predates fencing
  // may not allow, or by the lock's own key. One attempt without a token tells them apart: refused
  // too, the lock itself is out of bounds and that is the one message (the failure's); else the
  // lock is taken without a token (said once, as a `no_fencing_token` notice: a JSON event with
  // --json, nothing with -q), as before, rather than not at all.
  void try_without_token(std::string why) {
    auto first = [this, why = std::move(why)](std::error_code ec, bool got) {
      if (ec == errc::no_permission || ec == std::errc::operation_canceled) return finish(*state_, ec, got, 0);
      rep_(reporter::notice, "no_fencing_token")
          .str("message", why)
          .say("no fencing token for lock " + rep_.quoted() + ": " + why +
               " (allow the token key in the ACL: docs/deployment.md); taking the lock without one");
      if (got || (wait_ && wait_->count() == 0)) return finish(*state_, ec, got, 0);
      start_plain_acquisition();
    };
    auto slot = cancel_.slot();
    const std::chrono::milliseconds no_wait{0};
    if (lease_) lock_->async_try_lock(owner_, no_wait, *lease_, asio::bind_cancellation_slot(slot, first));
    else lock_->async_try_lock(owner_, no_wait, asio::bind_cancellation_slot(slot, first));
  }

  void start_plain_acquisition() {
    auto plain = [state = state_](std::error_code ec, bool got) { finish(*state, ec, got, 0); };
    auto slot = cancel_.slot();
    if (!wait_) {
      auto v = [plain](std::error_code ec) { plain(ec, !ec); };
      if (lease_) lock_->async_lock(owner_, *lease_, asio::bind_cancellation_slot(slot, v));
      else lock_->async_lock(owner_, asio::bind_cancellation_slot(slot, v));
    } else {
      if (lease_) lock_->async_try_lock(owner_, *wait_, *lease_, asio::bind_cancellation_slot(slot, plain));
      else lock_->async_try_lock(owner_, *wait_, asio::bind_cancellation_slot(slot, plain));
    }
  }

  // Waits (bounded) for the acquisition to end after a cancellation.
  void await_cancelled() {
    asio::post(c_->get_executor(), [this] { cancel_.emit(asio::cancellation_type::total); });
    const auto limit = steady::now() + 2 * cfg_.request_timeout + std::chrono::seconds(1);
    pollfd wake{state_->wake.get(), POLLIN, 0};
    while (state_->acquire.load(std::memory_order_acquire) == shared_state::pending && steady::now() < limit) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(limit - steady::now()).count();
      ::poll(&wake, 1, static_cast<int>(std::max<long long>(left, 1)));
      drain(state_->wake.get());
    }
  }

  int interrupted(int sig) const {
    rep_(reporter::notice, "interrupted")
        .str("signal", signal_name(sig))
        .num("wait_ms", ms_between(t0_, steady::now()))
        .say(signal_name(sig) + " while waiting for lock " + rep_.quoted() + "; not running the command");
    return 128 + sig;
  }

  // A lock always has a TTL (every grant sets one), so a holder without never lets go by itself: a
  // string no redlease wrote (it cannot be told from another library's mutex token), or a lock
  // whose TTL someone removed. Empty when the lock has a TTL or is free.
  std::string no_expiry_note() {
    std::error_code ec;
    if (lock_->remaining_ttl(ec).count() != -1 || ec) return {};
    return o_.mutex ? "lock " + rep_.quoted() + " is held with no expiry by a value redlease did not write; it will never expire"
                    : "lock " + rep_.quoted() + " is held with no expiry (someone removed its TTL); only an unlock frees it";
  }

  // Said once, a second into the wait: nothing else would tell why it never ends.
  void say_no_expiry() {
    if (auto note = no_expiry_note(); !note.empty()) rep_(reporter::notice, "no_expiry").str("message", note).say(note);
  }

  step acquire() {
    owner_ = this_thread_owner();
    t0_ = steady::now();
    start_acquisition();
    pollfd fds[2] = {{sigfd_.get(), POLLIN, 0}, {state_->wake.get(), POLLIN, 0}};
    bool looked = false;
    while (state_->acquire.load(std::memory_order_acquire) == shared_state::pending) {
      const int rc = ::poll(fds, 2, looked ? -1 : 1000);
      if (rc < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");
      if (rc == 0) {
        looked = true;
        say_no_expiry();
        continue;
      }
      drain(state_->wake.get());
      for (const auto& si : read_signals(sigfd_.get())) {
        int sig = static_cast<int>(si.ssi_signo);
        if (sig == SIGCHLD) continue;
        await_cancelled();
        if (state_->acquire.load(std::memory_order_acquire) == shared_state::acquired) {
          std::error_code ec;
          lock_->unlock(ec);  // it was granted just before the cancellation
        }
        return interrupted(sig);
      }
    }
    const auto waited = ms_between(t0_, steady::now());
    switch (state_->acquire.load(std::memory_order_acquire)) {
      case shared_state::not_acquired:
        rep_(reporter::notice, "not_acquired")
            .num("wait_ms", waited)
            .say("lock " + rep_.quoted() + (wait_->count() == 0 ? std::string(" is held by another owner")
                                                               : " not acquired within " + format_ms(*wait_)));
        if (!looked) say_no_expiry();
        return exit_code::not_acquired;
      case shared_state::failed: {
        // The server's WRONGTYPE does not say which key: the kind's keys are looked at to say it.
        std::string which;
        if (state_->acquire_error == errc::wrong_type)
          which = wrong_types(*c_, kind_of(o_), o_.name, state_->acquire_error_text);
        if (state_->acquire_error == errc::no_permission) {
          auto outside = outside_key_patterns(kind_of(o_), o_.name,
                                              cfg_.username.empty() ? "default" : cfg_.username,
                                              state_->acquire_error_text);
          if (!outside.empty()) throw error(errc::no_permission, "lock " + rep_.quoted() + ": " + outside);
        }
        throw error(state_->acquire_error,
                    "lock " + rep_.quoted() +
                        (state_->acquire_error_text.empty() ? "" : ": " + state_->acquire_error_text) + which);
      }
      default:
        break;
    }
    // The holder as `status` lists it, so that a line of `status` can be tied to this run.
    const std::string holder = lock_->holder_id(owner_);
    rep_(reporter::verbose_only, "acquired")
        .str("kind", kind_name(o_))
        .str("holder", holder)
        .num("pid", ::getpid())
        .num("wait_ms", waited)
        .say("acquired lock " + rep_.quoted() + " after " + std::to_string(waited) + " ms, holder " +
             printable(holder, true) + " (pid " + std::to_string(::getpid()) + ")");

    if (int why = state_->lost.load(std::memory_order_acquire); why >= 0) {
      // Lost before the command even started (a very short --lease): do not run it.
      report_lost(reason_name(static_cast<lost_reason>(why)));
      release();
      return exit_code::lock_lost;
    }
    // A signal that came with the grant (the wait above ended on the grant before reading it): the
    // command is not started, as for a signal during the wait.
    for (const auto& si : read_signals(sigfd_.get())) {
      int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) continue;
      release();
      return interrupted(sig);
    }
    return std::nullopt;
  }

  step spawn() {
    // The client's sockets are already close-on-exec (open_cloexec in src/net/connection.cpp), as
    // are Asio's and our own descriptors; as a safety net for anything else opened since we
    // started, mark every such descriptor close-on-exec too (keeping those we inherited, which the
    // user may mean for the child).
    for (int fd : open_fds())
      if (!inherited_.count(fd)) ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
    std::vector<std::string> env_strings;
    for (char** e = environ; e && *e; ++e)
      if (std::strncmp(*e, "REDLEASE_LOCK_NAME=", 19) != 0 && std::strncmp(*e, "REDLEASE_FENCING_TOKEN=", 23) != 0)
        env_strings.emplace_back(*e);
    env_strings.push_back("REDLEASE_LOCK_NAME=" + o_.name);
    if (state_->fencing_token != 0)
      env_strings.push_back("REDLEASE_FENCING_TOKEN=" + std::to_string(state_->fencing_token));
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = o_.command;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);

    // At a terminal the command shares redlease's process group, so that job control (Ctrl-C, Ctrl-Z,
    // fg, reading the terminal) treats both as one job, as a shell would; the signals the terminal
    // sends reach it directly and are not forwarded. Without a controlling terminal (systemd, cron,
    // CI, ssh or docker without a tty) there is no job control to keep: the command gets a group of
    // its own, and what redlease sends goes to that group, as timeout(1) does. A signal sent to
    // redlease's group (`timeout` in a script, `kill -- -PGID`) then reaches each of the command's
    // processes once, not twice, and a lost lock stops the processes the command started too (a
    // `sh -c 'a; b'` whose shell alone was killed left `a` running without the lock).
    own_group_ = !has_controlling_terminal();
    int rc = spawn_command(argv, envp, previous_, defaults_, own_group_, pid_);
    if (rc != 0) {
      int status = rc == ENOENT ? exit_code::not_found : exit_code::cannot_exec;
      std::string msg = printable(o_.command.front()) + ": " +
                        (rc == ENOENT ? std::string("command not found") : std::string(std::strerror(rc)));
      rep_(reporter::error, "exec_failed").str("message", msg).num("status", status).say(msg);
      release();
      return status;
    }
    rep_(reporter::verbose_only, "started")
        .num("pid", pid_)
        .str("command", o_.command.front())
        .say("started " + printable(o_.command.front()) + " (pid " + std::to_string(pid_) + ")");
    return std::nullopt;
  }

  // Returns the command's wait status.
  int supervise() {
    const pid_t target = own_group_ ? -pid_ : pid_;  // whom kill() reaches: the command, or its group
    pollfd fds[2] = {{sigfd_.get(), POLLIN, 0}, {state_->wake.get(), POLLIN, 0}};
    int wstatus = 0;
    bool killed = false;
    std::optional<steady::time_point> kill_at;
    for (;;) {
      pid_t r = ::waitpid(pid_, &wstatus, WNOHANG);
      if (r == pid_) break;
      if (r < 0 && errno != EINTR) {
        wstatus = 0;
        break;  // cannot happen (ECHILD only if someone else reaped it)
      }
      if (!lost_) {
        if (int why = state_->lost.load(std::memory_order_acquire); why >= 0) {
          lost_ = true;
          report_lost(reason_name(static_cast<lost_reason>(why)));
          ::kill(target, SIGTERM);
          rep_(reporter::notice, "terminating")
              .num("pid", pid_)
              .str("signal", "SIGTERM")
              .say("sending SIGTERM to pid " + std::to_string(pid_) + "; SIGKILL in " + format_ms(kill_after_));
          kill_at = steady::now() + kill_after_;
        }
      }
      if (kill_at && !killed && steady::now() >= *kill_at) {
        killed = true;
        ::kill(target, SIGKILL);
        rep_(reporter::notice, "killing")
            .num("pid", pid_)
            .str("signal", "SIGKILL")
            .say("pid " + std::to_string(pid_) + " still running after " + format_ms(kill_after_) +
                 "; sending SIGKILL");
      }
      int timeout = -1;
      if (kill_at && !killed) {
        auto left = std::chrono::ceil<milliseconds>(*kill_at - steady::now()).count();
        timeout = static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
      }
      if (::poll(fds, 2, timeout) < 0 && errno != EINTR)
        throw std::system_error(errno, std::generic_category(), "poll");
      drain(state_->wake.get());
      for (const auto& si : read_signals(sigfd_.get())) {
        int sig = static_cast<int>(si.ssi_signo);
        if (sig == SIGCHLD) continue;
        // A signal the terminal sent (Ctrl-C, Ctrl-\) went to the child too when it shares our
        // process group (at a terminal). Forward only those sent to redlease itself then.
        if (si.ssi_code == SI_KERNEL && !own_group_) continue;
        ::kill(target, sig);
        rep_(reporter::verbose_only, "signal")
            .num("pid", pid_)
            .str("signal", signal_name(sig))
            .say("forwarded " + signal_name(sig) + " to pid " + std::to_string(pid_));
      }
    }
    return wstatus;
  }

  int exit_status(int wstatus, int& reraise) {
    int status = shell_status(wstatus);
    auto ev = rep_(reporter::verbose_only, "exited");
    ev.num("pid", pid_).num("status", status);
    if (WIFSIGNALED(wstatus)) ev.str("signal", signal_name(WTERMSIG(wstatus)));
    ev.say("pid " + std::to_string(pid_) + " exited with status " + std::to_string(status));

    bool still_ours = release();
    if (lost_ || !still_ours) return exit_code::lock_lost;
    // The command's own failure wins; a success whose lock stays held is not a success.
    if (release_error_ && status == 0)
      return exit_code_for(release_error_) == exit_code::config_problem ? exit_code::config_problem
                                                                        : exit_code::release_failed;
    // Only a signal redlease handles: one ignored when it started (SIGHUP under nohup) stays ignored.
    if (WIFSIGNALED(wstatus) && ::sigismember(&handled_, WTERMSIG(wstatus)) == 1) reraise = WTERMSIG(wstatus);
    return status;
  }

  void report_lost(const char* reason) {
    if (lost_reported_) return;
    lost_reported_ = true;
    rep_(reporter::notice, "lost").str("reason", reason).say("lock " + rep_.quoted() + " lost (" + reason + ")");
  }

  // Releases the lock; true if it was still ours.
  bool release() {
    // Known lost already: nothing of ours to release (an unlock would only wait on a server that
    // may be the reason the lock was lost).
    if (int why = state_->lost.load(std::memory_order_acquire); why >= 0) {
      report_lost(reason_name(static_cast<lost_reason>(why)));
      return false;
    }
    std::error_code ec;
    lock_->unlock(ec);
    if (!ec) {
      rep_(reporter::verbose_only, "released").say("released lock " + rep_.quoted());
    } else if (ec == errc::lock_lost) {
      int why = state_->lost.load(std::memory_order_acquire);
      if (why >= 0) {
        report_lost(reason_name(static_cast<lost_reason>(why)));
      } else {
        // Found at the release (a fixed lease is not renewed, so nothing looked before): the key
        // is someone else's now, or gone.
        std::error_code xec;
        auto r = c_->command({"EXISTS", o_.name}, xec);
        report_lost(xec ? "unknown" : r.integer == 1 ? "taken" : "deleted");
      }
      return false;
    } else {
      // Printed even with -q: the next run may be refused until the lease ends.
      std::string why = ec.message() + (last_error_text().empty() ? "" : " (" + last_error_text() + ")");
      rep_(reporter::error, "release_failed")
          .str("message", why)
          .say("could not release lock " + rep_.quoted() + ": " + why +
               "; it may stay held until its lease ends (the release may also have run)");
      release_error_ = ec;
    }
    return true;
  }

  const run_options& o_;
  const reporter rep_;
  // prepare()
  std::optional<milliseconds> wait_, lease_;
  milliseconds watchdog_{0}, kill_after_{0};
  sigset_t handled_{}, previous_{}, defaults_{};
  unique_fd sigfd_;
  // What the client's I/O thread tells the main thread (shared: it outlives any late callback).
  std::shared_ptr<shared_state> state_ = std::make_shared<shared_state>();
  std::set<int> inherited_;
  // acquire() .. exit_status()
  owner_id owner_{};
  steady::time_point t0_;
  bool lost_reported_ = false, lost_ = false;
  std::error_code release_error_;
  pid_t pid_ = -1;
  bool own_group_ = false;
  // connect(); declared last, so destroyed first: the acquisition's handler, which may run as late
  // as the client's close, uses the members above. The cancellation signal outlives the client.
  config cfg_;
  asio::cancellation_signal cancel_;
  std::optional<client> c_;
  std::optional<detail::lock_handle> lock_;
};

int run_command(const run_options& o, int& reraise) { return run_session(o).run(reraise); }

// A command that died of SIGINT, SIGTERM or SIGHUP (Ctrl-C, a stop) ends redlease the same way,
// once the lock is released and the client closed: a shell then stops the loop or script that ran
// it, as it would have without redlease (it stops only when its child died of the signal, not on
// an exit status of 128+N). SIGQUIT is not raised again: its default would dump redlease's core.
int run(const run_options& o) {
  int reraise = 0;
  const int status = run_command(o, reraise);
  if (reraise == SIGINT || reraise == SIGTERM || reraise == SIGHUP) {
    std::signal(reraise, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, reraise);
    ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(reraise);
  }
  return status;
}

}  // namespace

void setup_run(CLI::App& app, action_t& action) {
  auto [cmd, o] = add_command<run_options>(
      app, action, "run", "Take a lock, run a command while holding it, release it when the command exits",
      "Form: redlease run NAME [OPTIONS] -- COMMAND [ARGS...]   (put -- before the command)\n"
      "The command gets REDLEASE_LOCK_NAME and REDLEASE_FENCING_TOKEN in its environment. SIGINT, SIGTERM, SIGHUP, SIGQUIT,\n"
      "SIGUSR1 and SIGUSR2 sent to redlease are forwarded to it. If the lock is lost while it runs,\n"
      "it gets SIGTERM, then SIGKILL after --kill-after, and redlease exits 76. Without a terminal the\n"
      "command has a process group of its own, and these go to the whole group.\n"
      "Exit status: the command's (128+N if killed by signal N); 75 not acquired within --wait;\n"
      "76 lock lost; 64 usage; 65 the key (or another key of the kind: queue, deadlines, token) holds\n"
      "another type; 69 Redis unavailable (unreachable, authentication, TLS, no Sentinel, not Redis, or\n"
      "refusing for now: maxclients, OOM, NOREPLICAS, LOADING, BUSY); 70 an unexpected error (for example\n"
      "a fencing token key that holds no number); 78 an ACL permission the user lacks or a renamed command (also\n"
      "when the release is refused); 79 the command succeeded but the release was not confirmed (the lock\n"
      "may stay held until its lease ends); 126/127 command not executable/not found; 128+N signal N ended\n"
      "the wait for the lock (the command did not run).",
      run);
  cmd->add_option("name", o->name, "The lock's name (its Redis key)")->required()->check(lock_name_validator());
  cmd->add_option("command", o->command, "The command to run, after --")->required();
  add_connection_flags(cmd, o->url);
  cmd->add_option("--wait", o->wait, "How long to wait for the lock (default: forever; 0: try once)")
      ->check(duration_validator());
  auto* lease = cmd->add_option("--lease", o->lease,
                                "Hold the lock for this fixed lease, with no watchdog (at least 100ms)")
                    ->check(duration_validator());
  auto* wd = cmd->add_option("--watchdog-timeout", o->watchdog,
                             "Lease renewed every third of it while the command runs (default 30s, at least 100ms)")
                 ->check(duration_validator());
  lease->excludes(wd);
  cmd->add_option("--kill-after", o->kill_after,
                  "After a lost lock, time between SIGTERM and SIGKILL (default 10s)")
      ->check(duration_validator());
  auto* mutex_flag = cmd->add_flag("--mutex", o->mutex, "Use the non-reentrant SET NX mutex instead of Redisson's hash lock");
  auto* fair_flag = cmd->add_flag("--fair", o->fair,
                                  "Use Redisson's fair lock: waiters (redlease and Redisson alike) get it in the order "
                                  "they queued")
                        ->excludes(mutex_flag);
  auto* read_flag = cmd->add_flag("--read", o->read,
                                  "Take the read side of Redisson's read-write lock NAME: shared with other readers")
                        ->excludes(mutex_flag)
                        ->excludes(fair_flag);
  cmd->add_flag("--write", o->write, "Take the write side of Redisson's read-write lock NAME")
      ->excludes(mutex_flag)
      ->excludes(fair_flag)
      ->excludes(read_flag);
  auto* quiet = cmd->add_flag("-q,--quiet", o->quiet, "Print nothing but errors");
  auto* verbose = cmd->add_flag("-v,--verbose", o->verbose, "Also report acquisition, start, exit and release");
  quiet->excludes(verbose);
  cmd->add_flag("--json", o->json, "Report events on stderr as JSON objects, one per line");
}

}  // namespace redlease::cli
