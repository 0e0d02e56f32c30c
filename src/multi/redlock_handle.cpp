// SPDX-License-Identifier: MIT
// redlease::redlock, the public handle: argument checks, the blocking calls (a wait on the calling
// thread for the driver's completion) and the async calls' hand-over to the driver
// (redlock.cpp).
#include <atomic>
#include <condition_variable>
#include <thread>
#include <mutex>
#include <utility>

#include "multi/redlock_impl.hpp"
#include "redlease/client.hpp"

namespace redlease {

namespace {

// Waits on the calling thread for one completion of the impl.
template <class T>
struct sync_wait {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::atomic<bool> ready{false};  // `done`, for the spin before the sleep
  std::error_code ec;
  std::string words;  // the server's, with an error (redlease::last_error_text on the caller's thread)
  T value{};
  void set(std::error_code e, T v) {
    std::lock_guard<std::mutex> g(m);
    ec = e;
    if (e) words = detail::error_text_slot();
    value = std::move(v);
    done = true;
    ready.store(true, std::memory_order_release);
    cv.notify_all();
  }
  // Until set, or the home client closed (nothing completes then).
  T get(const detail::redlock_impl& impl, std::error_code& out) {
    // config::sync_wait's latency_first: a sleep and its wake-up cost more than a short spin (the
    // round trips to a majority take tens of microseconds).
    if (impl.spin_budget().count() > 0) {
      const auto until = std::chrono::steady_clock::now() + impl.spin_budget();
      while (!ready.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    }
    std::unique_lock<std::mutex> g(m);
    while (!done) {
      if (cv.wait_for(g, std::chrono::milliseconds(50), [&] { return done; })) break;
      if (impl.home_closed()) {
        out = errc::client_closed;
        return T{};
      }
    }
    out = ec;
    if (ec) detail::error_text_slot() = words;
    return value;
  }
};

void check_options(const redlock_options& o) {
  if (o.ttl.count() < 0 || o.node_timeout.count() < 0 || o.retry_first.count() <= 0 || o.retry_cap < o.retry_first)
    throw error(errc::invalid_argument, "redlock: an option is out of range");
}

}  // namespace

redlock::redlock(const std::vector<std::reference_wrapper<client>>& nodes, std::string name, redlock_options opts) {
  if (nodes.empty()) throw error(errc::invalid_argument, "redlock: no node");
  if (name.empty()) throw error(errc::invalid_argument, "redlock: empty name");
  check_options(opts);
  impl_ = std::make_shared<detail::redlock_impl>(detail::node_set(nodes), std::move(name), opts);
}

redlock::~redlock() {
  if (impl_) impl_->shutdown();
}

redlock::redlock(redlock&&) noexcept = default;

redlock& redlock::operator=(redlock&& o) noexcept {
  if (this != &o) {
    if (impl_) impl_->shutdown();
    impl_ = std::move(o.impl_);
  }
  return *this;
}

bool redlock::try_lock() { return try_lock(std::chrono::milliseconds(0)); }

bool redlock::try_lock(std::error_code& ec) { return try_lock(std::chrono::milliseconds(0), ec); }

bool redlock::try_lock(std::chrono::milliseconds wait) {
  std::error_code ec;
  bool ok = try_lock(wait, ec);
  throw_if(ec, "redlock::try_lock");
  return ok;
}

namespace {
bool acquire_sync(detail::redlock_impl& impl, detail::redlock_clock::time_point until, std::error_code& ec) {
  ec.clear();
  if (impl.blocking_forbidden()) {
    ec = errc::would_deadlock;
    return false;
  }
  auto w = std::make_shared<sync_wait<bool>>();
  impl.acquire(until, [w](std::error_code e, bool ok) { w->set(e, ok); });
  return w->get(impl, ec);
}
}  // namespace

bool redlock::try_lock(std::chrono::milliseconds wait, std::error_code& ec) {
  if (wait.count() < 0) {
    ec = errc::invalid_argument;
    return false;
  }
  return acquire_sync(*impl_, detail::wait_end(wait), ec);
}

void redlock::async_try_lock_impl(std::chrono::milliseconds wait,
                                  detail::unique_function<void(std::error_code, bool)> h,
                                  std::shared_ptr<detail::redlock_cancel> cancel) {
  // The completion is posted by `h` itself (erase_handler): never inside this call.
  auto shared = std::make_shared<detail::unique_function<void(std::error_code, bool)>>(std::move(h));
  if (wait.count() < 0) return (*shared)(errc::invalid_argument, false);
  impl_->acquire(detail::wait_end(wait), [shared](std::error_code ec, bool ok) { (*shared)(ec, ok); }, std::move(cancel));
}

std::shared_ptr<detail::redlock_cancel> redlock::new_cancel() { return std::make_shared<detail::redlock_cancel>(); }

void redlock::request_cancel(const std::weak_ptr<detail::redlock_impl>& impl,
                             const std::shared_ptr<detail::redlock_cancel>& x) {
  if (auto i = impl.lock()) i->cancel(x);
}

void redlock::async_unlock_impl(detail::unique_function<void(std::error_code)> h) {
  auto shared = std::make_shared<detail::unique_function<void(std::error_code)>>(std::move(h));
  impl_->release([shared](std::error_code ec) { (*shared)(ec); });
}

asio::any_io_executor redlock::executor() const noexcept { return impl_->executor(); }

void redlock::lock() {
  std::error_code ec;
  lock(ec);
  throw_if(ec, "redlock::lock");
}

void redlock::lock(std::error_code& ec) {
  while (!acquire_sync(*impl_, detail::redlock_clock::time_point::max(), ec))
    if (ec) return;
}

void redlock::unlock() {
  std::error_code ec;
  unlock(ec);
  throw_if(ec, "redlock::unlock");
}

void redlock::unlock(std::error_code& ec) {
  ec.clear();
  if (impl_->blocking_forbidden()) {
    ec = errc::would_deadlock;
    return;
  }
  auto w = std::make_shared<sync_wait<bool>>();
  impl_->release([w](std::error_code e) { w->set(e, true); });
  w->get(*impl_, ec);
}

std::chrono::steady_clock::time_point redlock::valid_until() const { return impl_->valid_until(); }
bool redlock::valid() const { return impl_->valid(); }
void redlock::on_lost(lost_handler cb) { impl_->set_on_lost(std::move(cb)); }
const std::string& redlock::name() const noexcept { return impl_->name; }
std::size_t redlock::size() const noexcept { return impl_->size(); }
std::chrono::milliseconds redlock::ttl() const noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(impl_->ttl);
}
std::chrono::milliseconds redlock::node_timeout() const noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(impl_->node_timeout);
}
std::string redlock::value() const { return impl_->value(); }
std::stop_token redlock::lost_token() const { return impl_->lost_token(); }
std::vector<redlock_token> redlock::fencing_tokens() const { return impl_->fencing_tokens(); }

}  // namespace redlease
