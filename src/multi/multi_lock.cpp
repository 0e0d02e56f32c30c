// SPDX-License-Identifier: MIT
// redlease::multi_lock: several locks taken all or none, in parallel, above the lock engine.
// docs/redlock.md, "MultiLock".
#include "multi/multi_lock_impl.hpp"

#include <asio/bind_cancellation_slot.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <future>
#include <utility>

#include "facade/handle_access.hpp"
#include "random.hpp"

namespace redlease::detail {
namespace {

void run_all(multi_lock_impl::later& todo) {
  for (auto& f : todo) f();
}

std::chrono::milliseconds ceil_ms(multi_lock_impl::clock::duration d) {
  return std::chrono::ceil<std::chrono::milliseconds>(d);
}

node_set clients_of(const std::vector<lock_handle>& members) {
  std::vector<std::shared_ptr<client_impl>> v;
  v.reserve(members.size());
  for (const auto& h : members) v.push_back(handle_access::client(h));
  return node_set(std::move(v));
}

}  // namespace

multi_lock_impl::multi_lock_impl(std::vector<lock_handle> members, const multi_lock_options& o)
    : attempt_wait_(o.attempt_wait), backoff_{o.retry_first, o.retry_cap}, clients_(clients_of(members)) {
  m_.reserve(members.size());
  for (auto& h : members) {
    member_state s{handle_access::fresh(h), 0, outcome::pending, false, nullptr};
    m_.push_back(std::move(s));
  }
}

void multi_lock_impl::start() {
  std::weak_ptr<multi_lock_impl> w = weak_from_this();
  for (std::size_t i = 0; i < m_.size(); ++i)
    m_[i].handle.on_lost([w, i](const lost_info& info) {
      if (auto self = w.lock()) self->on_lost(i, info);
    });
  // A retry timer on a client that closes never fires: the close starts the next attempt at once,
  // which then fails with client_closed.
  clients_.post_home([w] {
    if (auto self = w.lock())
      self->clients_.on_home_close(w, [w] {
        if (auto s = w.lock()) s->on_home_closed();
      });
  });
}

bool multi_lock_impl::blocking_forbidden() const noexcept { return clients_.blocking_forbidden(); }

asio::any_io_executor multi_lock_impl::executor() const noexcept { return clients_.home_executor(); }

std::vector<std::pair<std::size_t, owner_id>> multi_lock_impl::owners() const {
  std::vector<std::pair<std::size_t, owner_id>> v;
  v.reserve(m_.size());
  for (std::size_t i = 0; i < m_.size(); ++i) v.emplace_back(i, m_[i].owner);
  return v;
}

// The members' local views take their clients' hold tables' locks: read out of mu_.
bool multi_lock_impl::valid() const {
  std::vector<std::pair<std::size_t, owner_id>> held;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (phase_ != phase::held || lost_) return false;
    held = owners();
  }
  return std::all_of(held.begin(), held.end(), [this](auto& p) { return m_[p.first].handle.valid(p.second); });
}

multi_lock_impl::clock::time_point multi_lock_impl::valid_until() const {
  std::vector<std::pair<std::size_t, owner_id>> held;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (phase_ != phase::held || lost_) return clock::time_point::min();
    held = owners();
  }
  auto until = clock::time_point::max();
  for (auto& [i, owner] : held) until = std::min(until, m_[i].handle.valid_until(owner));
  return until;
}

std::stop_token multi_lock_impl::lost_token() const {
  std::lock_guard<std::mutex> g(mu_);
  return phase_ == phase::held ? stop_.get_token() : std::stop_token{};
}

// --- acquisition -----------------------------------------------------------------------------

void multi_lock_impl::acquire(clock::time_point wait_until, acquire_done done, std::shared_ptr<multi_cancel> cancel) {
  std::uint64_t op = 0;
  std::error_code refused;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (phase_ == phase::closed) {
      refused = errc::client_closed;
    } else if (phase_ != phase::idle) {
      refused = errc::would_deadlock;
    } else {
      phase_ = phase::acquiring;
      op = ++op_;
      lost_ = false;
      user_cancel_ = false;
      waiting_retry_ = false;
      retries_ = 0;
      wait_until_ = wait_until;
      acquire_done_ = std::move(done);
      stop_ = std::stop_source{};
    }
  }
  // `done` posts its completion (erase_handler) or wakes a blocked caller: never inline.
  if (refused) return done(refused, false);
  bool cancelled = false;
  if (cancel) {
    std::lock_guard<std::mutex> g(cancel->mu);
    cancel->impl = weak_from_this();
    cancel->op = op;
    cancelled = cancel->requested;
  }
  start_attempt(op);
  if (cancelled) this->cancel(op);
}

void multi_lock_impl::start_attempt(std::uint64_t op) {
  struct send {
    std::size_t i;
    owner_id owner;
    std::shared_ptr<asio::cancellation_signal> signal;
  };
  std::vector<send> sends;
  std::uint64_t attempt;
  std::chrono::milliseconds budget;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (op != op_ || phase_ != phase::acquiring) return;
    attempt = ++attempt_;
    pending_ = m_.size();
    cancelling_ = false;
    error_.clear();
    auto now = clock::now();
    budget = wait_until_ <= now ? std::chrono::milliseconds(0) : std::min(attempt_wait_, ceil_ms(wait_until_ - now));
    for (std::size_t i = 0; i < m_.size(); ++i) {
      auto& s = m_[i];
      s.owner = handle_access::new_owner();
      s.out = outcome::pending;
      s.lost = false;
      s.signal = std::make_shared<asio::cancellation_signal>();
      sends.push_back({i, s.owner, s.signal});
    }
  }
  // Each on its member's executor, as the cancellations that may follow it: a signal is emitted and
  // its slot assigned and cleared on that one thread.
  for (auto& s : sends) {
    auto self = shared_from_this();
    clients_.run_or_fail(s.i, [self, op, attempt, budget, s](bool closed) {
      if (closed) return self->on_answer(op, attempt, s.i, s.owner, errc::client_closed, false);
      self->m_[s.i].handle.async_try_lock(
          s.owner, budget,
          asio::bind_cancellation_slot(s.signal->slot(), [self, op, attempt, s](std::error_code ec, bool ok) {
            self->on_answer(op, attempt, s.i, s.owner, ec, ok);
          }));
    });
  }
}

void multi_lock_impl::on_answer(std::uint64_t op, std::uint64_t attempt, std::size_t i, owner_id owner,
                                std::error_code ec, bool ok) {
  later todo;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (op != op_ || phase_ != phase::acquiring || attempt != attempt_) {
      // An answer of an acquisition that is over (the handle was destroyed): give a grant back.
      if (ok) release_member(todo, i, owner);
    } else {
      auto& s = m_[i];
      if (ok) {
        s.out = outcome::granted;
      } else if (!ec) {
        s.out = outcome::refused;
      } else if (ec == errc::operation_aborted && (cancelling_ || user_cancel_)) {
        s.out = outcome::aborted;
      } else {
        s.out = outcome::failed;
        if (!error_) error_ = ec;
      }
      // One refusal fails the attempt: the others need not wait out their budget.
      if (s.out == outcome::refused || s.out == outcome::failed) cancel_pending(todo);
      if (--pending_ == 0) decide(todo);
    }
  }
  run_all(todo);
}

void multi_lock_impl::cancel_pending(later& todo) {
  if (cancelling_) return;
  cancelling_ = true;
  for (std::size_t i = 0; i < m_.size(); ++i) {
    const auto& s = m_[i];
    if (s.out != outcome::pending) continue;
    todo.emplace_back([self = shared_from_this(), i, sig = s.signal] {
      self->clients_.run_or_fail(i, [sig](bool closed) {
        if (!closed) sig->emit(asio::cancellation_type::terminal);
      });
    });
  }
}

void multi_lock_impl::decide(later& todo) {
  bool all = std::all_of(m_.begin(), m_.end(), [](const member_state& s) { return s.out == outcome::granted && !s.lost; });
  if (all && !user_cancel_) {
    phase_ = phase::held;
    return finish_acquire(todo, {}, true);
  }
  for (std::size_t i = 0; i < m_.size(); ++i)
    if (m_[i].out == outcome::granted) release_member(todo, i, m_[i].owner);
  if (user_cancel_) return finish_acquire(todo, errc::operation_aborted, false);
  if (error_) return finish_acquire(todo, error_, false);
  auto now = clock::now();
  if (wait_until_ <= now) return finish_acquire(todo, {}, false);
  // The next attempt after a random delay, the last one as the wait ends.
  auto delay = std::min<clock::duration>(backoff_.delay(retries_++, random_unit()), wait_until_ - now);
  waiting_retry_ = true;
  auto t = std::make_shared<asio::steady_timer>(executor(), delay);
  todo.emplace_back([t, self = shared_from_this(), op = op_] {
    // A closed client's timer never fires (nor does its close hook run again): go at once, and
    // the attempt fails on that client with client_closed.
    if (self->clients_.home_closed()) return self->on_retry(op);
    t->async_wait([t, w = std::weak_ptr<multi_lock_impl>(self), op](std::error_code) {
      if (auto s = w.lock()) s->on_retry(op);
    });
  });
}

void multi_lock_impl::finish_acquire(later& todo, std::error_code ec, bool ok) {
  if (!ok && phase_ == phase::acquiring) phase_ = phase::idle;
  waiting_retry_ = false;
  if (auto done = std::move(acquire_done_)) {
    acquire_done_ = nullptr;
    todo.emplace_back([done = std::move(done), ec, ok]() mutable { done(ec, ok); });
  }
}

void multi_lock_impl::on_retry(std::uint64_t op) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (op != op_ || phase_ != phase::acquiring || !waiting_retry_) return;
    waiting_retry_ = false;
  }
  start_attempt(op);
}

void multi_lock_impl::on_home_closed() {
  std::uint64_t op;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (phase_ != phase::acquiring || !waiting_retry_) return;
    op = op_;
  }
  on_retry(op);
}

void multi_lock_impl::cancel(std::uint64_t op) {
  later todo;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (op != op_ || phase_ != phase::acquiring) return;
    user_cancel_ = true;
    if (waiting_retry_) finish_acquire(todo, errc::operation_aborted, false);
    else cancel_pending(todo);
  }
  run_all(todo);
}

void multi_lock_impl::release_member(later& todo, std::size_t i, owner_id owner) {
  todo.emplace_back([self = shared_from_this(), i, owner] {
    self->m_[i].handle.async_unlock(owner, [](std::error_code) {});
  });
}

// --- loss --------------------------------------------------------------------------------------

void multi_lock_impl::on_lost(std::size_t i, const lost_info& info) {
  later todo;
  std::stop_source stop{std::nostopstate};
  multi_lost_info told;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (info.owner != m_[i].owner) return;  // a hold of an earlier acquisition
    if (phase_ == phase::acquiring) {
      m_[i].lost = true;  // the decision counts it as refused
      return;
    }
    if (phase_ != phase::held || lost_) return;
    lost_ = true;
    stop = stop_;
    // Every member, the lost one too: its engine drops the local hold.
    for (auto& [j, owner] : owners()) release_member(todo, j, owner);
    told.member = i;
    told.name = m_[i].handle.name();
    told.kind = m_[i].handle.kind();
    told.reason = info.reason;
    told.cause = info.cause;
    told.detail = info.detail;
  }
  stop.request_stop();
  run_all(todo);
  lost_cb_.call(clients_.cfg(i), "multi_lock on_lost", told);
}

// --- release -----------------------------------------------------------------------------------

void multi_lock_impl::release(release_done done) {
  std::vector<std::pair<std::size_t, owner_id>> held;
  std::error_code refused;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (phase_ == phase::closed) {
      refused = errc::client_closed;
    } else if (phase_ != phase::held) {
      refused = errc::not_owner;
    } else if (lost_) {  // told to on_lost, released then
      phase_ = phase::idle;
      refused = errc::lock_lost;
    } else {
      phase_ = phase::releasing;
      pending_ = m_.size();
      release_errors_.assign(m_.size(), std::error_code{});
      release_done_ = std::move(done);
      held = owners();
    }
  }
  if (refused) return done(refused);
  for (auto& [i, owner] : held)
    m_[i].handle.async_unlock(owner, [self = shared_from_this(), i = i](std::error_code ec) {
      release_done d;
      std::error_code first;
      {
        std::lock_guard<std::mutex> g(self->mu_);
        self->release_errors_[i] = ec;
        if (--self->pending_ != 0) return;
        if (self->phase_ == phase::releasing) self->phase_ = phase::idle;
        for (auto& e : self->release_errors_)
          if (e && !first) first = e;
        d = std::move(self->release_done_);
        self->release_done_ = nullptr;
      }
      if (d) d(first);
    });
}

void multi_lock_impl::shutdown() noexcept {
  lost_cb_.set({});  // once this returns, on_lost is not running and never runs again
  later todo;
  try {
    std::lock_guard<std::mutex> g(mu_);
    if (phase_ == phase::held && !lost_)
      for (auto& [i, owner] : owners()) release_member(todo, i, owner);
    if (phase_ == phase::acquiring) {
      user_cancel_ = true;
      cancel_pending(todo);
      finish_acquire(todo, errc::operation_aborted, false);
    }
    phase_ = phase::closed;
    ++op_;  // answers still to come are stale: their grants are given back
  } catch (...) {
    // Out of memory: the holds expire with their leases once their clients stop renewing them.
  }
  try {
    run_all(todo);
  } catch (...) {
  }
}

}  // namespace redlease::detail

namespace redlease {

namespace {

// Waits on the calling thread for one completion of the impl. Every path completes: the members'
// calls complete even when their clients close, and the retry timer's client starts the next
// attempt when it closes.
template <class T>
T wait_for(std::error_code& ec, const std::function<void(std::function<void(std::error_code, T)>)>& start) {
  // The server's words travel with an error to the caller's thread (redlease::last_error_text).
  struct result {
    std::error_code ec;
    std::string words;
    T value;
  };
  auto p = std::make_shared<std::promise<result>>();
  auto f = p->get_future();
  start([p](std::error_code e, T v) {
    p->set_value({e, e ? detail::error_text_slot() : std::string(), std::move(v)});
  });
  auto r = f.get();
  ec = r.ec;
  if (r.ec) detail::error_text_slot() = std::move(r.words);
  return r.value;
}

bool acquire_sync(detail::multi_lock_impl& impl, std::chrono::steady_clock::time_point until, std::error_code& ec) {
  ec.clear();
  if (impl.blocking_forbidden()) {
    ec = errc::would_deadlock;
    return false;
  }
  return wait_for<bool>(ec, [&](std::function<void(std::error_code, bool)> done) {
    impl.acquire(until, [done](std::error_code e, bool ok) { done(e, ok); });
  });
}

}  // namespace

multi_lock::multi_lock(std::vector<detail::lock_handle> members, multi_lock_options opts) {
  if (members.empty()) throw error(errc::invalid_argument, "multi_lock: no member");
  if (opts.attempt_wait.count() < 0 || opts.retry_first.count() <= 0 || opts.retry_cap < opts.retry_first)
    throw error(errc::invalid_argument, "multi_lock: an option is out of range");
  for (std::size_t i = 0; i < members.size(); ++i) {
    auto& c = detail::handle_access::client(members[i]);
    if (!c) throw error(errc::invalid_argument, "multi_lock: a moved-from handle");
    for (std::size_t j = 0; j < i; ++j)
      if (detail::handle_access::client(members[j]) == c && members[j].name() == members[i].name())
        throw error(errc::invalid_argument, "multi_lock: two members are the lock \"" + members[i].name().substr(0, 200) +
                                                "\" on one client");
  }
  impl_ = std::make_shared<detail::multi_lock_impl>(std::move(members), opts);
  impl_->start();
}

multi_lock::~multi_lock() {
  if (impl_) impl_->shutdown();
}

multi_lock::multi_lock(multi_lock&&) noexcept = default;

multi_lock& multi_lock::operator=(multi_lock&& o) noexcept {
  if (this != &o) {
    if (impl_) impl_->shutdown();
    impl_ = std::move(o.impl_);
  }
  return *this;
}

bool multi_lock::try_lock() { return try_lock(std::chrono::milliseconds(0)); }

bool multi_lock::try_lock(std::error_code& ec) { return try_lock(std::chrono::milliseconds(0), ec); }

bool multi_lock::try_lock(std::chrono::milliseconds wait) {
  std::error_code ec;
  bool ok = try_lock(wait, ec);
  throw_if(ec, "multi_lock::try_lock");
  return ok;
}

bool multi_lock::try_lock(std::chrono::milliseconds wait, std::error_code& ec) {
  if (wait.count() < 0) {
    ec = errc::invalid_argument;
    return false;
  }
  return acquire_sync(*impl_, detail::wait_end(wait), ec);
}

void multi_lock::lock() {
  std::error_code ec;
  lock(ec);
  throw_if(ec, "multi_lock::lock");
}

void multi_lock::lock(std::error_code& ec) {
  while (!acquire_sync(*impl_, std::chrono::steady_clock::time_point::max(), ec))
    if (ec) return;
}

void multi_lock::unlock() {
  std::error_code ec;
  unlock(ec);
  throw_if(ec, "multi_lock::unlock");
}

void multi_lock::unlock(std::error_code& ec) {
  ec.clear();
  if (impl_->blocking_forbidden()) {
    ec = errc::would_deadlock;
    return;
  }
  wait_for<bool>(ec, [&](std::function<void(std::error_code, bool)> done) {
    impl_->release([done](std::error_code e) { done(e, true); });
  });
}

std::shared_ptr<detail::multi_cancel> multi_lock::new_cancel() { return std::make_shared<detail::multi_cancel>(); }

void multi_lock::request_cancel(const std::shared_ptr<detail::multi_cancel>& x) {
  std::shared_ptr<detail::multi_lock_impl> impl;
  std::uint64_t op;
  {
    std::lock_guard<std::mutex> g(x->mu);
    x->requested = true;
    impl = x->impl.lock();
    op = x->op;
  }
  if (impl) impl->cancel(op);
}

void multi_lock::async_try_lock_impl(std::chrono::milliseconds wait,
                                     detail::unique_function<void(std::error_code, bool)> h,
                                     std::shared_ptr<detail::multi_cancel> cancel) {
  // The completion is posted by `h` itself (erase_handler): never inside this call.
  if (wait.count() < 0) return h(errc::invalid_argument, false);
  impl_->acquire(detail::wait_end(wait), std::move(h), std::move(cancel));
}

void multi_lock::async_unlock_impl(detail::unique_function<void(std::error_code)> h) { impl_->release(std::move(h)); }

asio::any_io_executor multi_lock::executor() const noexcept { return impl_->executor(); }
bool multi_lock::valid() const { return impl_->valid(); }
std::chrono::steady_clock::time_point multi_lock::valid_until() const { return impl_->valid_until(); }
std::stop_token multi_lock::lost_token() const { return impl_->lost_token(); }
void multi_lock::on_lost(multi_lost_handler cb) { impl_->set_on_lost(std::move(cb)); }
std::size_t multi_lock::size() const noexcept { return impl_->size(); }
const std::string& multi_lock::name(std::size_t i) const { return impl_->member(i).name(); }
lock_kind multi_lock::kind(std::size_t i) const { return impl_->member(i).kind(); }

}  // namespace redlease
