// SPDX-License-Identifier: MIT
// `redlease run NAME [options] -- COMMAND [ARGS...]`: take the lock, run COMMAND while holding it,
// release it when COMMAND exits; stop COMMAND (SIGTERM, then SIGKILL) if the lock is lost. This
// file: the options, and the kinds on one server (reentrant, mutex, fair, read, write); the
// command's supervision is run_session's (run_session.cpp), RedLock's session cli_run_redlock.cpp.
//
// The lock is acquired asynchronously, with the main thread's owner id, so that a signal can
// interrupt the wait (run_session.hpp: threads and signals).
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/post.hpp>

#include "commands.hpp"
#include "redlease/redlease.hpp"
#include "run_session.hpp"

namespace redlease::cli {
namespace {

using namespace run_detail;

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

// The session of a lock on one server: the reentrant lock, the mutex, the fair lock, a side of the
// read-write lock.
class lock_session final : public run_session {
 public:
  using run_session::run_session;

 private:
  step check_options() override { return one_server_only(); }

  void connect() override {
    cfg_ = client_config(o_.urls.empty() ? default_url() : o_.urls.front());
    c_.emplace(cfg_);
    c_->ping();
    client& c = *c_;
    lock_.emplace(o_.mutex   ? detail::lock_handle(c.mutex(o_.name))
                  : o_.fair  ? detail::lock_handle(c.fair_lock(o_.name))
                  : o_.read  ? detail::lock_handle(c.read_lock(o_.name))
                  : o_.write ? detail::lock_handle(c.write_lock(o_.name))
                             : detail::lock_handle(c.lock(o_.name)));
    lock_->on_lost(tell_lost());
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

  step acquire() override {
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
      if (auto end = interrupt_acquisition(
              [this] { asio::post(c_->get_executor(), [this] { cancel_.emit(asio::cancellation_type::total); }); },
              2 * cfg_.request_timeout + std::chrono::seconds(1)))
        return end;
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
    return acquired(kind_name(o_), lock_->holder_id(owner_));
  }

  std::error_code unlock() override {
    std::error_code ec;
    lock_->unlock(ec);
    return ec;
  }

  // A fixed lease is not renewed, so nothing looked before: the key is someone else's now, or gone.
  const char* lost_at_release() override {
    std::error_code ec;
    auto r = c_->command({"EXISTS", o_.name}, ec);
    return ec ? "unknown" : r.integer == 1 ? "taken" : "deleted";
  }


  // acquire()
  owner_id owner_{};
  // connect(); declared last, so destroyed first: the acquisition's handler, which may run as late
  // as the client's close, uses the members above and run_session's. The cancellation signal
  // outlives the client.
  config cfg_;
  asio::cancellation_signal cancel_;
  std::optional<client> c_;
  std::optional<detail::lock_handle> lock_;
};

int run_command(const run_options& o, int& reraise) {
  if (o.redlock) return run_redlock(o, reraise);
  if (o.semaphore) return run_semaphore(o, reraise);
  return lock_session(o).run(reraise);
}

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
      "RedLock: redlease run --redlock --redis URL1 --redis URL2 --redis URL3 NAME -- COMMAND (at least 3\n"
      "masters; without --redis, the space-separated URLs of $REDLEASE_URL): held while a majority holds\n"
      "one random value under NAME; --watchdog-timeout is its TTL; no --lease. The command gets the masters'\n"
      "fencing tokens in REDLEASE_FENCING_TOKENS (\"0=T0 1=T1 ...\", by the masters' order), not REDLEASE_FENCING_TOKEN.\n"
      "Semaphore: redlease run --semaphore NAME [--permits N] -- COMMAND holds N permits of the permit-expirable\n"
      "semaphore NAME (Redisson's RPermitExpirableSemaphore; set its permits with `redlease semaphore NAME set`)\n"
      "while the command runs, kept by the watchdog (or for --lease) and given back when it exits; their ids in\n"
      "REDLEASE_PERMIT_IDS. A permit lost is a lock lost.\n"
      "Exit status: the command's (128+N if killed by signal N); 75 not acquired within --wait;\n"
      "76 lock lost; 64 usage; 65 the key (or another key of the kind: queue, deadlines, token) holds\n"
      "another type; 69 Redis unavailable (unreachable, authentication, TLS, no Sentinel, not Redis, or\n"
      "refusing for now: maxclients, OOM, NOREPLICAS, LOADING, BUSY; with --redlock, a majority of the\n"
      "masters); 70 an unexpected error (for example\n"
      "a fencing token key that holds no number); 78 an ACL permission the user lacks or a renamed command (also\n"
      "when the release is refused); 79 the command succeeded but the release was not confirmed (the lock\n"
      "may stay held until its lease ends); 126/127 command not executable/not found; 128+N signal N ended\n"
      "the wait for the lock (the command did not run).",
      run);
  cmd->add_option("name", o->name, "The lock's name (its Redis key)")->required()->check(lock_name_validator());
  cmd->add_option("command", o->command, "The command to run, after --")->required();
  // One URL per --redis (repeated for --redlock), so that NAME after it is not taken for a URL.
  cmd->add_option("--redis", o->urls,
                  "Redis URL (default: $REDLEASE_URL or redis://127.0.0.1:6379); with --redlock, once per master")
      ->allow_extra_args(false);
  add_tls_flags(cmd);
  cmd->add_option("--wait", o->wait, "How long to wait for the lock (default: forever; 0: try once)")
      ->check(duration_validator());
  auto* lease = cmd->add_option("--lease", o->lease,
                                "Hold the lock for this fixed lease, with no watchdog (at least 100ms)")
                    ->check(duration_validator());
  auto* wd = cmd->add_option("--watchdog-timeout", o->watchdog,
                             "Lease renewed every third of it while the command runs (default 30s, at least 100ms; --redlock: "
                             "the keys' TTL)")
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
  auto* write_flag = cmd->add_flag("--write", o->write, "Take the write side of Redisson's read-write lock NAME")
                         ->excludes(mutex_flag)
                         ->excludes(fair_flag)
                         ->excludes(read_flag);
  cmd->add_flag("--redlock", o->redlock,
                "RedLock: one lock over 3 or more independent masters (a --redis each), held by a majority")
      ->excludes(mutex_flag)
      ->excludes(fair_flag)
      ->excludes(read_flag)
      ->excludes(write_flag);
  auto* semaphore_flag = cmd->add_flag("--semaphore", o->semaphore,
                                       "Hold permits of the permit-expirable semaphore NAME (Redisson's "
                                       "RPermitExpirableSemaphore) instead of a lock")
                             ->excludes(mutex_flag)
                             ->excludes(fair_flag)
                             ->excludes(read_flag)
                             ->excludes(write_flag);
  semaphore_flag->excludes("--redlock");
  cmd->add_option("--permits", o->permits, "With --semaphore: how many permits (default 1)")->needs(semaphore_flag);
  auto* quiet = cmd->add_flag("-q,--quiet", o->quiet, "Print nothing but errors");
  auto* verbose = cmd->add_flag("-v,--verbose", o->verbose, "Also report acquisition, start, exit and release");
  quiet->excludes(verbose);
  cmd->add_flag("--json", o->json, "Report events on stderr as JSON objects, one per line");
}

}  // namespace redlease::cli
