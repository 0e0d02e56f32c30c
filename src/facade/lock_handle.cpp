// SPDX-License-Identifier: MIT
#include "redlease/lock.hpp"

#include <atomic>

#include "facade/client_impl.hpp"
#include "facade/handle_access.hpp"
#include "lock/lock_service.hpp"
#include "lock/protocol.hpp"
#include "redlease/client.hpp"

namespace redlease {
namespace {

// Sync owners (threads) and async owners (client::new_owner) come from one counter, so they never
// collide. Starts at 1: Redisson's thread ids are positive.
std::atomic<owner_id> next_owner{1};

std::string context(const detail::lock_handle& l, const char* op) {
  return std::string(op) + " \"" + l.name().substr(0, 200) + "\"";
}

// The context string only on failure: a successful call allocates nothing for it.
void raise_if(const std::error_code& ec, const detail::lock_handle& l, const char* op) {
  if (ec) throw_if(ec, context(l, op).c_str());
}

// A wait without a bound only ends in the lock or an error (the engine sees to it: a backoff
// strategy's max_attempts ends it with attempts_exhausted); this keeps lock() and async_lock from
// ever completing "not acquired" without one.
void lock_or_error(bool got, std::error_code& ec) {
  if (!got && !ec) ec = errc::attempts_exhausted;
}

}  // namespace

owner_id this_thread_owner() noexcept {
  thread_local owner_id id = next_owner.fetch_add(1, std::memory_order_relaxed);
  return id;
}

owner_id client::new_owner() noexcept { return next_owner.fetch_add(1, std::memory_order_relaxed); }

owner_id detail::handle_access::new_owner() noexcept { return next_owner.fetch_add(1, std::memory_order_relaxed); }

namespace detail {

lock_handle::lock_handle(std::shared_ptr<client_impl> c, std::string name, lock_kind kind)
    : client_(std::move(c)), name_(std::move(name)), kind_(kind), state_(std::make_shared<lost_slot>()) {
  state_->handles.store(1, std::memory_order_relaxed);
}

// The holds share state_ too, so its use count cannot tell when the last handle goes: the slot
// counts the handles. A moved-from handle has no slot.
lock_handle::lock_handle(const lock_handle& o)
    : client_(o.client_), name_(o.name_), kind_(o.kind_), state_(o.state_), wait_(o.wait_) {
  if (state_) state_->handles.fetch_add(1, std::memory_order_relaxed);
}
lock_handle::lock_handle(lock_handle&& o) noexcept
    : client_(std::move(o.client_)), name_(std::move(o.name_)), kind_(o.kind_), state_(std::move(o.state_)),
      wait_(o.wait_) {}
lock_handle& lock_handle::operator=(const lock_handle& o) {
  if (this != &o) {
    lock_handle copy(o);
    *this = std::move(copy);
  }
  return *this;
}
lock_handle& lock_handle::operator=(lock_handle&& o) noexcept {
  if (this != &o) {
    release_slot();
    client_ = std::move(o.client_);
    name_ = std::move(o.name_);
    kind_ = o.kind_;
    state_ = std::move(o.state_);
    wait_ = o.wait_;
  }
  return *this;
}
lock_handle::~lock_handle() { release_slot(); }

void lock_handle::release_slot() noexcept {
  if (state_ && state_->handles.fetch_sub(1, std::memory_order_acq_rel) == 1) state_->cb.set(nullptr);
}

asio::any_io_executor lock_handle::executor() const { return client_->executor(); }

// ---- async -------------------------------------------------------------------------------------

void lock_handle::async_acquire_impl(owner_id owner, std::optional<ms> wait, std::optional<ms> lease, bool,
                                     void_handler h, std::shared_ptr<acquire_cancel> cancel) {
  client_->run_or_fail([c = client_, name = name_, kind = kind_, owner, wait, lease, slot = state_, ws = wait_,
                        h = std::move(h), cancel = std::move(cancel)](bool closed) mutable {
    if (closed) return h(errc::client_closed);
    c->locks().acquire(std::move(name), kind, owner, wait, lease, std::move(slot), ws,
                       [h = std::move(h)](std::error_code ec, bool got) mutable {
                         lock_or_error(got, ec);
                         h(ec);
                       },
                       std::move(cancel));
  });
}

void lock_handle::async_try_impl(owner_id owner, ms wait, std::optional<ms> lease, bool_handler h,
                                 std::shared_ptr<acquire_cancel> cancel) {
  client_->run_or_fail([c = client_, name = name_, kind = kind_, owner, wait, lease, slot = state_, ws = wait_,
                        h = std::move(h), cancel = std::move(cancel)](bool closed) mutable {
    if (closed) return h(errc::client_closed, false);
    c->locks().acquire(std::move(name), kind, owner, wait, lease, std::move(slot), ws, std::move(h), std::move(cancel));
  });
}

void lock_handle::async_fenced_impl(owner_id owner, std::optional<ms> wait, std::optional<ms> lease, token_handler h,
                                    std::shared_ptr<acquire_cancel> cancel) {
  client_->run_or_fail([c = client_, name = name_, kind = kind_, owner, wait, lease, slot = state_, ws = wait_,
                        h = std::move(h), cancel = std::move(cancel)](bool closed) mutable {
    if (closed) return h(errc::client_closed, 0);
    auto* locks = &c->locks();
    // The hold (with its token) is in the table before this completion runs.
    locks->acquire(name, kind, owner, wait, lease, std::move(slot), ws,
                   [locks, name, owner, kind, wait, h = std::move(h)](std::error_code ec, bool got) mutable {
                     if (!wait) lock_or_error(got, ec);
                     h(ec, !ec && got ? locks->view(name, owner, kind, false).fence : 0);
                   },
                   std::move(cancel), true);
  });
}

std::shared_ptr<acquire_cancel> lock_handle::new_acquire_cancel() { return std::make_shared<acquire_cancel>(); }

void lock_handle::request_cancel(const std::shared_ptr<client_impl>& c, const std::shared_ptr<acquire_cancel>& x) {
  // Always posted, never run inline: the cancellation handler runs inside the slot's emit, and the
  // completion it may cause clears that same slot.
  c->post([c, x] { c->locks().cancel_acquire(*x); });
}

void lock_handle::async_unlock_impl(owner_id owner, void_handler h) {
  client_->run_or_fail([c = client_, name = name_, kind = kind_, owner, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed);
    c->locks().release(std::move(name), kind, owner, std::move(h));
  });
}

void lock_handle::async_force_unlock_impl(bool_handler h) {
  client_->run_or_fail([c = client_, name = name_, kind = kind_, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, false);
    c->locks().force_unlock(std::move(name), kind, std::move(h));
  });
}

void lock_handle::async_is_locked_impl(bool_handler h) {
  const auto& proto = protocol_of(kind_);
  std::string p;
  proto.encode_is_locked(p, name_);
  client_->run_or_fail([c = client_, name = name_, &proto, p = std::move(p), h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, false);
    c->exec(name, std::move(p), [&proto, h = std::move(h)](std::error_code ec, reply r) mutable {
      if (ec) return h(ec, false);
      auto locked = proto.decode_is_locked(r);
      h({}, locked.value_or(false));
    }, true);
  });
}

void lock_handle::async_remaining_ttl_impl(int_handler h) {
  const auto& proto = protocol_of(kind_);
  std::string p;
  proto.encode_remaining_ttl(p, name_);
  client_->run_or_fail([c = client_, name = name_, &proto, p = std::move(p), h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, 0);
    c->exec(name, std::move(p), [&proto, h = std::move(h)](std::error_code ec, reply r) mutable {
      if (ec) return h(ec, -2);
      auto ttl = proto.decode_remaining_ttl(r);
      if (!ttl) return h(errc::bad_reply, -2);
      h({}, *ttl);
    }, true);
  });
}

void lock_handle::set_wait_strategy(const wait_strategy& w) {
  if (w.use_backoff && (w.initial.count() <= 0 || w.max < w.initial || !(w.multiplier >= 1.0) ||
                        !(w.jitter >= 0.0 && w.jitter <= 1.0)))
    throw error(errc::invalid_argument, context(*this, "set_wait_strategy"));
  wait_ = w;
}

void lock_handle::async_hold_count_impl(owner_id owner, int_handler h) {
  client_->run_or_fail([c = client_, name = name_, kind = kind_, owner, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, 0);
    c->locks().hold_count(std::move(name), kind, owner, std::move(h));
  });
}

// ---- sync --------------------------------------------------------------------------------------

namespace {
template <class T, class F>
T sync(client_impl& c, std::error_code& ec, F&& f) {
  return sync_call<T>(c, ec, std::forward<F>(f));
}
}  // namespace

void lock_handle::lock(std::error_code& ec) {
  auto owner = this_thread_owner();
  bool got = sync<bool>(*client_, ec, [&](bool_handler done) {
    client_->locks().acquire(name_, kind_, owner, std::nullopt, std::nullopt, state_, wait_, std::move(done));
  });
  lock_or_error(got, ec);
}
void lock_handle::lock() {
  std::error_code ec;
  lock(ec);
  raise_if(ec, *this, "lock");
}

void lock_handle::lock(std::chrono::milliseconds lease, std::error_code& ec) {
  auto owner = this_thread_owner();
  bool got = sync<bool>(*client_, ec, [&](bool_handler done) {
    client_->locks().acquire(name_, kind_, owner, std::nullopt, lease, state_, wait_, std::move(done));
  });
  lock_or_error(got, ec);
}
void lock_handle::lock(std::chrono::milliseconds lease) {
  std::error_code ec;
  lock(lease, ec);
  raise_if(ec, *this, "lock");
}

bool lock_handle::try_lock(std::error_code& ec) { return try_lock(std::chrono::milliseconds::zero(), ec); }
bool lock_handle::try_lock() { return try_lock(std::chrono::milliseconds::zero()); }

bool lock_handle::try_lock(std::chrono::milliseconds wait, std::error_code& ec) {
  auto owner = this_thread_owner();
  return sync<bool>(*client_, ec, [&](bool_handler done) {
    client_->locks().acquire(name_, kind_, owner, wait, std::nullopt, state_, wait_, std::move(done));
  });
}
bool lock_handle::try_lock(std::chrono::milliseconds wait) {
  std::error_code ec;
  bool r = try_lock(wait, ec);
  raise_if(ec, *this, "try_lock");
  return r;
}

bool lock_handle::try_lock(std::chrono::milliseconds wait, std::chrono::milliseconds lease, std::error_code& ec) {
  auto owner = this_thread_owner();
  return sync<bool>(*client_, ec, [&](bool_handler done) {
    client_->locks().acquire(name_, kind_, owner, wait, lease, state_, wait_, std::move(done));
  });
}
bool lock_handle::try_lock(std::chrono::milliseconds wait, std::chrono::milliseconds lease) {
  std::error_code ec;
  bool r = try_lock(wait, lease, ec);
  raise_if(ec, *this, "try_lock");
  return r;
}

std::uint64_t lock_handle::lock_and_get_token(std::error_code& ec) {
  auto owner = this_thread_owner();
  return sync<std::uint64_t>(*client_, ec, [&](token_handler done) { async_fenced_impl(owner, {}, {}, std::move(done)); });
}
std::uint64_t lock_handle::lock_and_get_token() {
  std::error_code ec;
  auto t = lock_and_get_token(ec);
  raise_if(ec, *this, "lock_and_get_token");
  return t;
}
std::uint64_t lock_handle::lock_and_get_token(std::chrono::milliseconds lease, std::error_code& ec) {
  auto owner = this_thread_owner();
  return sync<std::uint64_t>(*client_, ec,
                             [&](token_handler done) { async_fenced_impl(owner, {}, lease, std::move(done)); });
}
std::uint64_t lock_handle::lock_and_get_token(std::chrono::milliseconds lease) {
  std::error_code ec;
  auto t = lock_and_get_token(lease, ec);
  raise_if(ec, *this, "lock_and_get_token");
  return t;
}
std::optional<std::uint64_t> lock_handle::try_lock_and_get_token(std::chrono::milliseconds wait, std::error_code& ec) {
  auto owner = this_thread_owner();
  auto t = sync<std::uint64_t>(*client_, ec,
                               [&](token_handler done) { async_fenced_impl(owner, wait, {}, std::move(done)); });
  return t != 0 ? std::optional<std::uint64_t>(t) : std::nullopt;
}
std::optional<std::uint64_t> lock_handle::try_lock_and_get_token(std::chrono::milliseconds wait) {
  std::error_code ec;
  auto t = try_lock_and_get_token(wait, ec);
  raise_if(ec, *this, "try_lock_and_get_token");
  return t;
}
std::optional<std::uint64_t> lock_handle::try_lock_and_get_token(std::chrono::milliseconds wait,
                                                                 std::chrono::milliseconds lease, std::error_code& ec) {
  auto owner = this_thread_owner();
  auto t = sync<std::uint64_t>(*client_, ec,
                               [&](token_handler done) { async_fenced_impl(owner, wait, lease, std::move(done)); });
  return t != 0 ? std::optional<std::uint64_t>(t) : std::nullopt;
}
std::optional<std::uint64_t> lock_handle::try_lock_and_get_token(std::chrono::milliseconds wait,
                                                                 std::chrono::milliseconds lease) {
  std::error_code ec;
  auto t = try_lock_and_get_token(wait, lease, ec);
  raise_if(ec, *this, "try_lock_and_get_token");
  return t;
}

void lock_handle::unlock(std::error_code& ec) {
  auto owner = this_thread_owner();
  sync<bool>(*client_, ec, [&](bool_handler done) {
    client_->locks().release(name_, kind_, owner,
                             [done = std::move(done)](std::error_code e) mutable { done(e, !e); });
  });
}
void lock_handle::unlock() {
  std::error_code ec;
  unlock(ec);
  raise_if(ec, *this, "unlock");
}

bool lock_handle::force_unlock(std::error_code& ec) {
  return sync<bool>(*client_, ec, [&](bool_handler done) { client_->locks().force_unlock(name_, kind_, std::move(done)); });
}
bool lock_handle::force_unlock() {
  std::error_code ec;
  bool r = force_unlock(ec);
  raise_if(ec, *this, "force_unlock");
  return r;
}

bool lock_handle::is_locked(std::error_code& ec) {
  return sync<bool>(*client_, ec, [&](bool_handler done) { async_is_locked_impl(std::move(done)); });
}
bool lock_handle::is_locked() {
  std::error_code ec;
  bool r = is_locked(ec);
  raise_if(ec, *this, "is_locked");
  return r;
}

long long lock_handle::hold_count(std::error_code& ec) {
  auto owner = this_thread_owner();
  return sync<long long>(*client_, ec, [&](int_handler done) {
    client_->locks().hold_count(name_, kind_, owner, std::move(done));
  });
}
long long lock_handle::hold_count() {
  std::error_code ec;
  auto r = hold_count(ec);
  raise_if(ec, *this, "hold_count");
  return r;
}

bool lock_handle::is_held_by_current_thread(std::error_code& ec) { return hold_count(ec) > 0; }
bool lock_handle::is_held_by_current_thread() { return hold_count() > 0; }

std::chrono::milliseconds lock_handle::remaining_ttl(std::error_code& ec) {
  auto v = sync<long long>(*client_, ec, [&](int_handler done) { async_remaining_ttl_impl(std::move(done)); });
  return std::chrono::milliseconds(ec ? -2 : v);
}
std::chrono::milliseconds lock_handle::remaining_ttl() {
  std::error_code ec;
  auto r = remaining_ttl(ec);
  raise_if(ec, *this, "remaining_ttl");
  return r;
}

// ---- local view --------------------------------------------------------------------------------

namespace {
// Read directly, on any thread (the I/O thread included, e.g. inside a completion handler).
lock_service::local_view view_of(client_impl& c, const std::string& name, lock_kind kind, owner_id owner,
                                 bool want_token = false) {
  if (c.closed()) return {};
  return c.locks().view(name, owner, kind, want_token);
}
}  // namespace

bool lock_handle::valid(owner_id owner) const { return view_of(*client_, name_, kind_, owner).valid; }
std::uint64_t lock_handle::token(owner_id owner) const { return view_of(*client_, name_, kind_, owner).fence; }
std::uint64_t lock_handle::token() const { return token(this_thread_owner()); }
bool lock_handle::valid() const { return valid(this_thread_owner()); }
std::chrono::steady_clock::time_point lock_handle::valid_until(owner_id owner) const {
  return view_of(*client_, name_, kind_, owner).valid_until;
}
std::chrono::steady_clock::time_point lock_handle::valid_until() const { return valid_until(this_thread_owner()); }
std::stop_token lock_handle::lost_token(owner_id owner) const {
  return view_of(*client_, name_, kind_, owner, true).token;
}
std::stop_token lock_handle::lost_token() const { return lost_token(this_thread_owner()); }
std::string lock_handle::holder_id(owner_id owner) const {
  return client_->closed() ? std::string() : client_->locks().holder(name_, owner, kind_);
}
std::string lock_handle::holder_id() const { return holder_id(this_thread_owner()); }

void lock_handle::on_lost(lost_handler cb) { state_->cb.set(std::move(cb)); }

}  // namespace detail
}  // namespace redlease
