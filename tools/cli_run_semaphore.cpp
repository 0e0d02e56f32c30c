// SPDX-License-Identifier: MIT
// `redlease run --semaphore NAME [--permits N] -- COMMAND`: the command runs holding N permits of the
// permit-expirable semaphore NAME (redlease::permit_semaphore, Redisson's RPermitExpirableSemaphore),
// kept by the watchdog (or for a fixed --lease) and given back when the command exits, as GNU
// parallel's `sem` does with a local semaphore. A permit found lost stops the command as a lost lock
// does. The command's supervision is run_session's, as for every kind.

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/post.hpp>

#include <memory>
#include <optional>
#include <string>

#include "redlease/redlease.hpp"
#include "run_session.hpp"

namespace redlease::cli::run_detail {
namespace {

class permit_session final : public run_session {
 public:
  using run_session::run_session;

 private:
  step check_options() override {
    if (auto usage = one_server_only()) return usage;
    if (o_.permits < 1) return fail(exit_code::usage, "--permits must be at least 1");
    return std::nullopt;
  }

  void connect() override {
    cfg_ = client_config(o_.urls.empty() ? default_url() : o_.urls.front());
    c_.emplace(cfg_);
    c_->ping();
    sem_.emplace(c_->permit_semaphore(o_.name));
  }

  std::string what() const {
    return std::to_string(o_.permits) + (o_.permits == 1 ? " permit" : " permits") + " of semaphore " + rep_.quoted();
  }

  // The acquisition, in one call for the whole wait (none: until acquired); a signal cancels it, and
  // a grant its attempt brought is given back.
  void start_acquisition() {
    sem_->async_try_acquire(o_.permits, wait_, lease_,
                            asio::bind_cancellation_slot(cancel_.slot(), [this](std::error_code ec, permit p) {
                              state_->acquire_error = ec;
                              if (ec) state_->acquire_error_text = last_error_text();
                              const bool got = !ec && static_cast<bool>(p);
                              if (got) permit_ = std::move(p);
                              state_->acquire.store(ec ? shared_state::failed
                                                    : got ? shared_state::acquired
                                                          : shared_state::not_acquired,
                                                    std::memory_order_release);
                              state_->notify();
                            }));
  }

  step acquire() override {
    t0_ = steady::now();
    start_acquisition();
    if (auto end = await_acquisition(
            [this] { asio::post(c_->get_executor(), [this] { cancel_.emit(asio::cancellation_type::total); }); },
            2 * cfg_.request_timeout + std::chrono::seconds(1)))
      return end;
    switch (state_->acquire.load(std::memory_order_acquire)) {
      case shared_state::not_acquired:
        rep_(reporter::notice, "not_acquired")
            .num("wait_ms", ms_between(t0_, steady::now()))
            .say(what() + (wait_->count() == 0 ? std::string(" not available") : " not acquired within " + format_ms(*wait_)));
        return exit_code::not_acquired;
      case shared_state::failed:
        throw error(state_->acquire_error, "semaphore " + rep_.quoted() +
                                               (state_->acquire_error_text.empty() ? "" : ": " + state_->acquire_error_text));
      default:
        break;
    }
    permit_.on_lost(tell_lost());
    // The permits' ids, as `redlease semaphore NAME status` lists them, and for the command.
    std::string ids;
    for (const auto& id : permit_.ids()) ids += (ids.empty() ? "" : " ") + id;
    state_->permit_ids = ids;
    return acquired("semaphore", ids);
  }

  std::error_code unlock() override {
    std::error_code ec;
    permit_.release(ec);
    return ec;
  }

  // The release found the permits gone: the semaphore deleted, or their ids (expired, or given back
  // by someone else).
  const char* lost_at_release() override {
    std::error_code ec;
    auto r = c_->command({"EXISTS", o_.name}, ec);
    return ec ? "unknown" : r.integer == 1 ? "expired" : "deleted";
  }

  // connect(); declared last, so destroyed first: the acquisition's handler, which may run as late
  // as the client's close, uses the members above and run_session's. The cancellation signal
  // outlives the client.
  config cfg_;
  asio::cancellation_signal cancel_;
  std::optional<client> c_;
  std::optional<permit_semaphore> sem_;
  permit permit_;
};

}  // namespace

int run_semaphore(const run_options& o, int& reraise) { return permit_session(o).run(reraise); }

}  // namespace redlease::cli::run_detail
