// SPDX-License-Identifier: MIT
#include "runtime/io_runtime.hpp"

#include <asio/strand.hpp>
#include <asio/thread_pool.hpp>

#include <algorithm>

#include "background.hpp"

namespace redlease::detail {

io_runtime::io_runtime(config cfg, std::optional<asio::any_io_executor> user_ex) : cfg_(std::move(cfg)) {
  if (auto bad = cfg_.invalid_setting(); !bad.empty()) throw error(errc::invalid_argument, "config: " + bad);
  if (user_ex) {
    // A user executor may run on several threads: a strand keeps all of the client's state on one.
    ex_ = asio::make_strand(*user_ex);
  } else {
    own_ctx_ = std::make_shared<asio::io_context>(1);
    work_.emplace(own_ctx_->get_executor());
    guard_ = std::make_shared<io_guard>();
    ex_ = guarded_executor<asio::io_context::executor_type>(own_ctx_->get_executor(), guard_.get());
  }
  board_ = std::make_shared<sync_board>(ex_);
}

io_runtime::~io_runtime() {
  if (thread_.joinable()) thread_.detach();  // destroyed on its own I/O thread: it ends by itself
}

void io_runtime::start_io_thread(std::weak_ptr<io_runtime> self) {
  self_ = std::move(self);
  if (own_ctx_) {
    // The thread shares the io_context: if the client's last reference goes on this very thread
    // (the thread then detaches), the context outlives the client until run() returns.
    // The guard too: handlers still queued when the client goes run under it.
    thread_ = std::thread([ctx = own_ctx_, guard = guard_, cfg = cfg_, board = board_] {
      board->adopt_this_thread();
      for (;;) {
        try {
          ctx->run();
          return;
        } catch (...) {
          // A completion handler posted here threw. Asio leaves the context usable: report it and
          // keep serving everyone else's locks rather than terminating the process.
          report_exception(cfg, "completion handler");
        }
      }
    });
    thread_id_ = thread_.get_id();
  }
}

bool io_runtime::on_io_thread() const noexcept {
  if (own_ctx_) return std::this_thread::get_id() == thread_id_ || io_guard::held() == guard_.get();
  if (auto* s = ex_.target<asio::strand<asio::any_io_executor>>()) return s->running_in_this_thread();
  return false;
}

namespace {

// Whether the calling thread runs the execution context behind `ex` (an io_context's or a
// thread_pool's executor, or a strand of one), as far as Asio lets it be told.
bool runs_context_of(const asio::any_io_executor& ex) noexcept {
  if (auto* e = ex.target<asio::io_context::executor_type>()) return e->running_in_this_thread();
  if (auto* e = ex.target<asio::thread_pool::executor_type>()) return e->running_in_this_thread();
  if (auto* s = ex.target<asio::strand<asio::io_context::executor_type>>())
    return s->get_inner_executor().running_in_this_thread();
  if (auto* s = ex.target<asio::strand<asio::thread_pool::executor_type>>())
    return s->get_inner_executor().running_in_this_thread();
  if (auto* s = ex.target<asio::strand<asio::any_io_executor>>()) return runs_context_of(s->get_inner_executor());
  return false;
}

}  // namespace

bool io_runtime::on_user_context() const noexcept {
  if (own_ctx_) return false;
  if (auto* s = ex_.target<asio::strand<asio::any_io_executor>>()) return runs_context_of(s->get_inner_executor());
  return false;
}


// Spinning on the lane costs one core while it lasts, and nothing else: the I/O thread sleeps. On a
// loaded 2-vCPU machine a sleep in poll() and its wake-up cost the caller more CPU than spinning
// through a short round trip (measured: 83 us of client CPU per B1 pair sleeping at once, 64 us
// spinning up to the round trip, at three times the pairs/s), so even cpu_first spins while the
// reply is plausibly close. cpu_first stops spinning when the round trip is long (replies keep
// coming after the spin), trying again on one wait in eight; latency_first spins up to 200 us
// whatever the round trip.
std::chrono::nanoseconds io_runtime::lane_spin() noexcept {
  auto rtt = lane_rtt_ns.load(std::memory_order_relaxed);
  auto n = lane_waits.fetch_add(1, std::memory_order_relaxed);
  if (cfg_.sync_wait == sync_wait_policy::latency_first) {
    return std::chrono::nanoseconds(std::clamp<std::int64_t>(rtt * 3 / 2, 20'000, 200'000));
  }
  if (lane_misses.load(std::memory_order_relaxed) >= 4 && n % 8 != 0) return {};
  return std::chrono::nanoseconds(std::clamp<std::int64_t>(rtt * 5 / 4, 10'000, 100'000));
}

void io_runtime::lane_waited(bool caught, std::chrono::nanoseconds spin, clock::duration rtt) noexcept {
  if (spin.count() == 0) return;
  // A reply caught in the spin gives the round trip; one that came later only says it was longer
  // than the spin: counting it as twice the spin keeps the estimate from shrinking on misses.
  auto sample = caught ? std::chrono::duration_cast<std::chrono::nanoseconds>(rtt).count() : 2 * spin.count();
  auto prev = lane_rtt_ns.load(std::memory_order_relaxed);
  lane_rtt_ns.store(prev + (std::min<std::int64_t>(sample, 1'000'000) - prev) / 8, std::memory_order_relaxed);
  if (caught) lane_misses.store(0, std::memory_order_relaxed);
  else lane_misses.fetch_add(1, std::memory_order_relaxed);
}


bool io_runtime::join_io_thread() noexcept {
  // One join per thread: two threads closing at once both came here, and the second joined a
  // thread the first had already reaped (it hung in pthread_join).
  std::lock_guard<std::mutex> g(join_mu_);
  if (!thread_.joinable() || on_io_thread()) return false;
  try {
    thread_.join();
  } catch (...) {  // a join that cannot be made is no reason to terminate a destructor
    return false;
  }
  return true;
}

void io_runtime::push(inbox_job* job) {
  auto* head = inbox_.load(std::memory_order_relaxed);
  do {
    job->next = head;
  } while (!inbox_.compare_exchange_weak(head, job, std::memory_order_seq_cst, std::memory_order_relaxed));
  // A weak reference: a drain posted as the client closes may never run, and must not keep the
  // client (and its io_context, which holds the drain) alive in a cycle. The destructor fails the
  // inbox.
  if (head == nullptr) {
    asio::post(ex_, [w = self_] {
      if (auto self = w.lock()) self->drain_inbox();
    });
  }
  // Closed meanwhile: the executor may have run its last drain already, and nobody else would fail
  // this job. (A close after this check finds the job: shutdown fails the inbox after the join.)
  if (closed_.load(std::memory_order_seq_cst)) fail_inbox();
}

void io_runtime::run_inbox(bool closed) noexcept {
  // Take the whole stack and reverse it: oldest first.
  inbox_job* j = nullptr;
  for (inbox_job* top = inbox_.exchange(nullptr, std::memory_order_seq_cst); top != nullptr;) {
    inbox_job* next = top->next;
    top->next = j;
    j = top;
    top = next;
  }
  while (j != nullptr) {
    std::unique_ptr<inbox_job> job(j);
    j = j->next;
    try {
      job->run(closed);
    } catch (...) {
      report_exception(cfg_, "operation start");
    }
  }
}

}  // namespace redlease::detail
