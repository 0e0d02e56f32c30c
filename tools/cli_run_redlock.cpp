// SPDX-License-Identifier: MIT
// `redlease run --redlock --redis URL1 --redis URL2 --redis URL3 NAME -- COMMAND`: the command runs
// while a RedLock (redlease::redlock, docs/redlock.md) is held over the masters: a majority of them
// hold one random value under NAME, renewed every third of --watchdog-timeout. The command's
// supervision is run_session's, as for every kind.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redlease/redlease.hpp"
#include "redlease/redlock.hpp"
#include "redlock_nodes.hpp"
#include "run_session.hpp"

namespace redlease::cli::run_detail {
namespace {

// An attempt cannot be cancelled (redlock::async_try_lock): the wait is made of slices this long at
// most, so that a signal ends it within a slice and an attempt, the attempt's grant given back.
constexpr milliseconds wait_slice{250};
// Once a majority answered the first PING, how long the others may still take to be named as
// unreachable (they take part in the acquisition all the same).
constexpr milliseconds ping_grace{200};

class redlock_session final : public run_session {
 public:
  using run_session::run_session;

 private:
  step check_options() override {
    if (!o_.lease.empty())
      return fail(exit_code::usage,
                  "--lease is not available with --redlock: a RedLock is always renewed by its watchdog while "
                  "the command runs; --watchdog-timeout sets its TTL");
    std::string problem;
    urls_ = redlock_urls(o_.urls, problem);
    if (urls_.empty()) return fail(exit_code::usage, problem);
    return std::nullopt;
  }

  void connect() override {
    for (const auto& url : urls_) {
      config cfg = client_config(url);
      nodes_.labels.push_back(cfg.redacted_url());
      nodes_.clients.push_back(std::make_unique<client>(cfg));
    }
    const auto pings = ping_nodes(nodes_, ping_grace);
    require_quorum(nodes_, pings, "RedLock " + rep_.quoted());
    say_unreachable(pings);
    redlock_options ro;
    ro.ttl = watchdog_;
    rl_.emplace(nodes_.refs(), o_.name, ro);
    rl_->on_lost(tell_lost());
  }

  // The masters that did not answer, when a majority did: the lock is taken without them.
  void say_unreachable(const std::vector<node_ping>& pings) const {
    for (std::size_t i = 0; i < pings.size(); ++i) {
      if (!pings[i].ec) continue;
      rep_(reporter::notice, "node_unreachable")
          .str("node", nodes_.labels[i])
          .str("message", pings[i].message)
          .say("RedLock " + rep_.quoted() + ": master " + pings[i].message + "; going on with the others (" +
               std::to_string(nodes_.quorum()) + " of " + std::to_string(nodes_.size()) + " needed)");
    }
  }

  // One slice of the wait: attempts for at most wait_slice (one attempt with --wait 0).
  void start_slice() {
    milliseconds slice = wait_slice;
    if (wait_) {
      auto left = std::chrono::ceil<milliseconds>(t0_ + *wait_ - steady::now());
      slice = std::clamp(left, milliseconds(0), wait_slice);
    }
    state_->acquire.store(shared_state::pending, std::memory_order_release);
    rl_->async_try_lock(slice, [state = state_](std::error_code ec, bool got) {
      state->acquire_error = ec;
      state->acquire.store(ec ? shared_state::failed : got ? shared_state::acquired : shared_state::not_acquired,
                           std::memory_order_release);
      state->notify();
    });
  }

  bool wait_left() const { return !wait_ || steady::now() < t0_ + *wait_; }

  step acquire() override {
    t0_ = steady::now();
    start_slice();
    pollfd fds[2] = {{sigfd_.get(), POLLIN, 0}, {state_->wake.get(), POLLIN, 0}};
    int signal = 0;  // one that ends the wait once the slice under way ends
    for (;;) {
      if (::poll(fds, 2, -1) < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");
      drain(state_->wake.get());
      for (const auto& si : read_signals(sigfd_.get()))
        if (si.ssi_signo != SIGCHLD && signal == 0) signal = static_cast<int>(si.ssi_signo);
      const int now = state_->acquire.load(std::memory_order_acquire);
      if (now == shared_state::pending) continue;
      if (signal != 0) {
        if (now == shared_state::acquired) (void)unlock();  // granted as the signal came
        return interrupted(signal);
      }
      if (now != shared_state::not_acquired || !wait_left()) break;
      start_slice();
    }
    switch (state_->acquire.load(std::memory_order_acquire)) {
      case shared_state::not_acquired: {
        // Refused by a majority, or not answered by one: only the latter is Redis unavailable.
        require_quorum(nodes_, ping_nodes(nodes_, ping_grace),
                       "RedLock " + rep_.quoted() + " not acquired");
        rep_(reporter::notice, "not_acquired")
            .num("wait_ms", ms_between(t0_, steady::now()))
            .say("lock " + rep_.quoted() + (wait_->count() == 0 ? std::string(" is held by another owner")
                                                               : " not acquired within " + format_ms(*wait_)));
        return exit_code::not_acquired;
      }
      case shared_state::failed:
        throw error(state_->acquire_error, "RedLock " + rep_.quoted());
      default:
        break;
    }
    // The holder is the random value, as `status --redlock` shows it on each master.
    return acquired("redlock", rl_->value());
  }

  std::error_code unlock() override {
    std::error_code ec;
    rl_->unlock(ec);
    return ec;
  }

  // A majority had none of our value: another value on a master says taken.
  const char* lost_at_release() override {
    bool unknown = false;
    for (const auto& c : nodes_.clients) {
      std::error_code ec;
      auto r = c->command({"GET", o_.name}, ec);
      if (ec) unknown = true;
      else if (!r.is_nil()) return "taken";
    }
    return unknown ? "unknown" : "deleted";
  }

  std::vector<std::string> urls_;
  // Declared last, so destroyed first (the handle before its clients): their handlers use
  // run_session's members.
  redlock_nodes nodes_;
  std::optional<redlock> rl_;
};

}  // namespace

int run_redlock(const run_options& o, int& reraise) { return redlock_session(o).run(reraise); }

}  // namespace redlease::cli::run_detail
