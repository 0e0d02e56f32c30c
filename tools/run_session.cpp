// SPDX-License-Identifier: MIT
// `redlease run`: what every kind shares (run_session.hpp): the events, the command's start and
// supervision, the signals, and the end of the run.
#include "run_session.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "redlease/redlease.hpp"

extern char** environ;

namespace redlease::cli::run_detail {
namespace {

// The signals redlease forwards to the child (and that end a wait for the lock).
constexpr int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

void write_all(const std::string& s) {
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


}  // namespace

// ---- output ----------------------------------------------------------------------------------

std::string signal_name(int sig) {
  if (const char* abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "SIG" + std::to_string(sig);
}

const char* reason_name(lost_reason r) { return lost_reason_name(r); }

reporter::event::event(const reporter& r, level lv, const char* name) : r_(r), lv_(lv) {
  line_ = "{\"event\":\"";
  line_ += name;
  line_ += "\",\"lock\":\"";
  json_escape_to(line_, r.lock_);
  line_ += '"';
}

reporter::event& reporter::event::str(const char* key, std::string_view v) {
  key_(key);
  line_ += '"';
  json_escape_to(line_, v);
  line_ += '"';
  return *this;
}

reporter::event& reporter::event::num(const char* key, long long v) {
  key_(key);
  line_ += std::to_string(v);
  return *this;
}

void reporter::event::say(const std::string& text) {
  if (r_.o_.json) {
    line_ += "}\n";
    write_all(line_);
  } else if (lv_ == error || (!r_.o_.quiet && (lv_ == notice || r_.o_.verbose))) {
    write_all("redlease: " + text + "\n");
  }
}

void reporter::event::key_(const char* key) {
  line_ += ",\"";
  line_ += key;
  line_ += "\":";
}

// ---- plumbing --------------------------------------------------------------------------------

unique_fd::~unique_fd() {
  if (fd_ >= 0) ::close(fd_);
}

void unique_fd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

shared_state::shared_state() : wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void shared_state::notify() noexcept {
  std::uint64_t one = 1;
  ssize_t n = ::write(wake.get(), &one, sizeof one);
  (void)n;  // EAGAIN only if the counter is saturated: the main thread is awake anyway
}

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

int run_session::run(int& reraise) {
  if (auto end = check_options()) return *end;
  if (auto end = prepare()) return *end;
  try {
    connect();
    if (auto end = acquire()) return *end;
    if (auto end = spawn()) return *end;
    return exit_status(supervise(), reraise);
  } catch (const redlease::error& e) {
    return fail(exit_code_for(e.code()), e.what());
  } catch (const std::exception& e) {
    return fail(exit_code::software, e.what());
  }
}

int run_session::fail(int status, const std::string& library_message) const {
  const std::string message = cli_words(library_message);
  rep_(reporter::error, "error").str("message", message).num("status", status).say(message);
  return status;
}

run_session::step run_session::prepare() {
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

config run_session::client_config(const std::string& url) const {
  std::function<void(const std::string&)> warn;
  if (o_.json)
    warn = [this](const std::string& text) { rep_(reporter::notice, "warning").str("message", text).say(text); };
  config cfg = make_config(url, warn);
  cfg.watchdog_timeout = watchdog_;
  if (o_.json) {
    // One JSON object per line: what the client reports in the background (a stalled connection
    // dropped, a TLS warning) is an event too, not the library's plain line.
    cfg.on_error = [this](const background_error& e) {
      if (e.source == "tls" && e.code == std::error_code{}) return;  // the --insecure warning, said above
      const std::string message = cli_words(e.message.empty() ? e.code.message() : e.message);
      rep_(reporter::notice, "background_error").str("source", e.source).str("message", message).say(message);
    };
  }
  return cfg;
}

lost_handler run_session::tell_lost() const {
  return [state = state_](const lost_info& info) {
    state->lost.store(static_cast<int>(info.reason), std::memory_order_release);
    state->notify();
  };
}

run_session::step run_session::interrupt_acquisition(const std::function<void()>& cancel, milliseconds bound) {
  for (const auto& si : read_signals(sigfd_.get())) {
    if (si.ssi_signo == SIGCHLD) continue;
    cancel();
    const auto limit = steady::now() + bound;
    pollfd wake{state_->wake.get(), POLLIN, 0};
    while (state_->acquire.load(std::memory_order_acquire) == shared_state::pending && steady::now() < limit) {
      auto left = std::chrono::duration_cast<milliseconds>(limit - steady::now()).count();
      ::poll(&wake, 1, static_cast<int>(std::max<long long>(left, 1)));
      drain(state_->wake.get());
    }
    if (state_->acquire.load(std::memory_order_acquire) == shared_state::acquired)
      (void)unlock();  // granted just before the cancellation
    return interrupted(static_cast<int>(si.ssi_signo));
  }
  return std::nullopt;
}

run_session::step run_session::await_acquisition(const std::function<void()>& cancel, milliseconds bound,
                                                  const std::function<void()>& each_wake) {
  pollfd fds[2] = {{sigfd_.get(), POLLIN, 0}, {state_->wake.get(), POLLIN, 0}};
  while (state_->acquire.load(std::memory_order_acquire) == shared_state::pending) {
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");
    drain(state_->wake.get());
    if (auto end = interrupt_acquisition(cancel, bound)) return end;
    if (each_wake) each_wake();
  }
  return std::nullopt;
}

run_session::step run_session::one_server_only() const {
  if (o_.urls.size() <= 1) return std::nullopt;
  return fail(exit_code::usage, "--redis is given " + std::to_string(o_.urls.size()) +
                                    " times: several servers are for --redlock (one lock over several masters); the "
                                    "other kinds take one --redis");
}

int run_session::interrupted(int sig) const {
  rep_(reporter::notice, "interrupted")
      .str("signal", signal_name(sig))
      .num("wait_ms", ms_between(t0_, steady::now()))
      .say(signal_name(sig) + " while waiting for lock " + rep_.quoted() + "; not running the command");
  return 128 + sig;
}

run_session::step run_session::acquired(const char* kind, const std::string& holder) {
  const auto waited = ms_between(t0_, steady::now());
  rep_(reporter::verbose_only, "acquired")
      .str("kind", kind)
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

run_session::step run_session::spawn() {
  // The client's sockets are already close-on-exec (open_cloexec in src/net/connection.cpp), as
  // are Asio's and our own descriptors; as a safety net for anything else opened since we
  // started, mark every such descriptor close-on-exec too (keeping those we inherited, which the
  // user may mean for the child).
  for (int fd : open_fds())
    if (!inherited_.count(fd)) ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "REDLEASE_LOCK_NAME=", 19) != 0 && std::strncmp(*e, "REDLEASE_FENCING_TOKEN=", 23) != 0 &&
        std::strncmp(*e, "REDLEASE_FENCING_TOKENS=", 24) != 0 && std::strncmp(*e, "REDLEASE_PERMIT_IDS=", 20) != 0)
      env_strings.emplace_back(*e);
  env_strings.push_back("REDLEASE_LOCK_NAME=" + o_.name);
  if (state_->fencing_token != 0)
    env_strings.push_back("REDLEASE_FENCING_TOKEN=" + std::to_string(state_->fencing_token));
  if (!state_->fencing_tokens.empty()) env_strings.push_back("REDLEASE_FENCING_TOKENS=" + state_->fencing_tokens);
  if (!state_->permit_ids.empty()) env_strings.push_back("REDLEASE_PERMIT_IDS=" + state_->permit_ids);
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
int run_session::supervise() {
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

int run_session::exit_status(int wstatus, int& reraise) {
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

void run_session::report_lost(const char* reason) {
  if (lost_reported_) return;
  lost_reported_ = true;
  rep_(reporter::notice, "lost").str("reason", reason).say("lock " + rep_.quoted() + " lost (" + reason + ")");
}

bool run_session::release() {
  // Known lost already: nothing of ours to release (an unlock would only wait on a server that
  // may be the reason the lock was lost).
  if (int why = state_->lost.load(std::memory_order_acquire); why >= 0) {
    report_lost(reason_name(static_cast<lost_reason>(why)));
    return false;
  }
  const std::error_code ec = unlock();
  if (!ec) {
    rep_(reporter::verbose_only, "released").say("released lock " + rep_.quoted());
  } else if (ec == errc::lock_lost) {
    int why = state_->lost.load(std::memory_order_acquire);
    report_lost(why >= 0 ? reason_name(static_cast<lost_reason>(why)) : lost_at_release());
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

}  // namespace redlease::cli::run_detail
