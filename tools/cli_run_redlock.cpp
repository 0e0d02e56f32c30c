// SPDX-License-Identifier: MIT
// `redlease run --redlock --redis URL1 --redis URL2 --redis URL3 NAME -- COMMAND`: the command runs
// while a RedLock (redlease::redlock, docs/redlock.md) is held over the masters: a majority of them
// hold one random value under NAME, renewed every third of --watchdog-timeout. The command's
// supervision is run_session's, as for every kind.

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/post.hpp>

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
    make_handle(true);
  }

  // The RedLock, fenced (every granting master draws its token: REDLEASE_FENCING_TOKENS) unless an
  // ACL refused the token keys.
  void make_handle(bool fenced) {
    redlock_options ro;
    ro.ttl = watchdog_;
    ro.fencing_tokens = fenced;
    rl_.reset();
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

  // The acquisition, in one call for the whole wait (none: until acquired); a signal cancels it.
  void start_acquisition() {
    const milliseconds wait = wait_ ? *wait_ : std::chrono::duration_cast<milliseconds>(std::chrono::hours(24 * 365 * 200));
    state_->acquire.store(shared_state::pending, std::memory_order_release);
    rl_->async_try_lock(wait, asio::bind_cancellation_slot(cancel_.slot(), [state = state_](std::error_code ec, bool got) {
                          state->acquire_error = ec;
                          if (ec) state->acquire_error_text = last_error_text();
                          state->acquire.store(ec    ? shared_state::failed
                                               : got ? shared_state::acquired
                                                     : shared_state::not_acquired,
                                               std::memory_order_release);
                          state->notify();
                        }));
  }

  step acquire() override {
    t0_ = steady::now();
    start_acquisition();
    // A signal cancels the acquisition: an attempt's grants are given back.
    auto end = await_acquisition(
        [this] { asio::post(rl_->executor(), [this] { cancel_.emit(asio::cancellation_type::total); }); },
        rl_->node_timeout() * 2 + std::chrono::seconds(1), [this] {
          if (state_->acquire.load(std::memory_order_acquire) != shared_state::failed ||
              state_->acquire_error != errc::no_permission || !fenced_)
            return;
          // The ACL allows the lock's key but not the token keys (or the other way round: then the
          // plain attempt says so too). Taken without tokens, said once.
          rep_(reporter::notice, "no_fencing_token")
              .str("message", state_->acquire_error_text)
              .say("no fencing tokens for RedLock " + rep_.quoted() + ": " + state_->acquire_error_text +
                   " (allow the key redlease_redlock_token:{NAME} in the ACL: docs/deployment.md); taking the lock "
                   "without them");
          fenced_ = false;
          make_handle(false);
          start_acquisition();
        });
    if (end) return end;
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
        throw error(state_->acquire_error,
                    "RedLock " + rep_.quoted() +
                        (state_->acquire_error_text.empty() ? "" : ": " + state_->acquire_error_text));
      default:
        break;
    }
    // The per-node tokens, "node=token" with the node's place in the list of masters.
    std::string tokens;
    for (const auto& t : rl_->fencing_tokens())
      tokens += (tokens.empty() ? "" : " ") + std::to_string(t.node) + "=" + std::to_string(t.token);
    state_->fencing_tokens = tokens;
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
  bool fenced_ = true;
  asio::cancellation_signal cancel_;
  // Declared last, so destroyed first (the handle before its clients): their handlers use
  // run_session's members.
  redlock_nodes nodes_;
  std::optional<redlock> rl_;
};

}  // namespace

int run_redlock(const run_options& o, int& reraise) { return redlock_session(o).run(reraise); }

}  // namespace redlease::cli::run_detail
