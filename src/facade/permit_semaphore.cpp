// SPDX-License-Identifier: MIT
// redlease::permit_semaphore and redlease::permit: acquisitions and releases through the lock engine
// (lock_kind::permit_semaphore: a grant is a hold of its permits, which the watchdog renews), the
// other calls as single script calls on the semaphore's node.
#include "redlease/permit_semaphore.hpp"

#include "base/hex.hpp"
#include "facade/client_impl.hpp"
#include "facade/handle_access.hpp"
#include "lock/lock_service.hpp"
#include "lock/naming.hpp"
#include "redlease/semaphore.hpp"
#include "lock/protocol.hpp"
#include "lock/protocols/common.hpp"
#include "redlease/client.hpp"
#include "redlease_lua.hpp"

namespace redlease {

permit_semaphore client::permit_semaphore(std::string name) {
  if (name.empty()) throw error(errc::invalid_argument, "client::permit_semaphore: empty name");
  return redlease::permit_semaphore(impl_, std::move(name));
}

namespace {

using detail::ms;
constexpr lock_kind kind = lock_kind::permit_semaphore;

const detail::lock_protocol& proto() { return detail::protocol_of(kind); }

void raise_if(const std::error_code& ec, const std::string& name, const char* op) {
  if (ec) throw_if(ec, (std::string("permit_semaphore::") + op + " \"" + name.substr(0, 200) + "\"").c_str());
}

using detail::to_hex;

// Redisson's ids are 16 bytes shown as 32 hex digits; nothing for anything else.
std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  return detail::from_hex(hex);
}

bool valid_lease(const std::optional<std::chrono::milliseconds>& l) {
  return !l || (l->count() > 0 && *l <= detail::max_duration);
}

// The keys and the first two arguments every permits_*.lua script takes (the publish command: read
// on the executor, where the topology decides it).
detail::arg_list script_args(detail::client_impl& c, const std::string& name) {
  detail::arg_list a;
  a.add(2LL).add(name).add(detail::suffixed(name, "timeout")).add(proto().channel(name)).add(c.topo().publish_command());
  return a;
}

// A call's value read from its script's reply (`ec` set on entry: an empty value).
template <class T>
using decoder = T (*)(const reply&, std::error_code&);

// Sends `s` on the semaphore's node, its keys and first arguments then `tail`; `done` gets what `dec`
// reads from the reply, on the executor (client_closed when the client is closed). Any thread.
template <class T>
void start_script(const std::shared_ptr<detail::client_impl>& c, const std::string& name, const detail::lua_script& s,
                  detail::arg_list tail, decoder<T> dec, detail::unique_function<void(std::error_code, T)> done) {
  c->run_or_fail([c, name, &s, tail = std::move(tail), dec, done = std::move(done)](bool closed) mutable {
    if (closed) return done(errc::client_closed, T{});
    auto a = script_args(*c, name);
    a.buf += tail.buf;
    a.count += tail.count;
    c->exec_script(name, s, std::move(a), [dec, done = std::move(done)](std::error_code ec, reply r) mutable {
      T v = dec(r, ec);
      done(ec, std::move(v));
    });
  });
}

// start_script, blocking; `tail` empty is a bad argument (nothing sent).
template <class T>
T call(const std::shared_ptr<detail::client_impl>& c, const std::string& name, const detail::lua_script& s,
       std::optional<detail::arg_list> tail, decoder<T> dec, std::error_code& ec) {
  if (!tail) {
    ec = errc::invalid_argument;
    return T{};
  }
  return detail::sync_call<T>(*c, ec, [&](detail::unique_function<void(std::error_code, T)> done) {
    start_script(c, name, s, std::move(*tail), dec, std::move(done));
  });
}

// start_script for an async form; `tail` empty: `h` gets invalid_argument, through the executor as
// every completion (nothing sent).
template <class T>
void call_async(const std::shared_ptr<detail::client_impl>& c, const std::string& name, const detail::lua_script& s,
                std::optional<detail::arg_list> tail, decoder<T> dec, detail::unique_function<void(std::error_code, T)> h) {
  if (!tail) return c->run_or_fail([h = std::move(h)](bool) mutable { h(errc::invalid_argument, T{}); });
  start_script(c, name, s, std::move(*tail), dec, std::move(h));
}

long long as_int(const reply& r, std::error_code& ec) {
  if (ec) return 0;
  if (!r.is_integer()) {
    ec = errc::bad_reply;
    return 0;
  }
  return r.integer;
}

}  // namespace

// ---- permit -------------------------------------------------------------------------------------

permit::permit(std::shared_ptr<detail::client_impl> c, std::string name, owner_id owner, std::string token,
               std::shared_ptr<detail::lost_slot> slot)
    : client_(std::move(c)), name_(std::move(name)), owner_(owner), token_(std::move(token)),
      count_(detail::protocols::permit_count(token_)), slot_(std::move(slot)) {
  slot_->handles.store(1, std::memory_order_relaxed);
}

permit::permit(permit&& o) noexcept
    : client_(std::move(o.client_)), name_(std::move(o.name_)), owner_(o.owner_), token_(std::move(o.token_)),
      count_(o.count_), slot_(std::move(o.slot_)) {
  o.client_.reset();
  o.count_ = 0;
}

permit& permit::operator=(permit&& o) noexcept {
  if (this != &o) {
    permit gone(std::move(*this));  // gives back what this held
    client_ = std::move(o.client_);
    name_ = std::move(o.name_);
    owner_ = o.owner_;
    token_ = std::move(o.token_);
    count_ = o.count_;
    slot_ = std::move(o.slot_);
    o.client_.reset();
    o.count_ = 0;
  }
  return *this;
}

permit::~permit() {
  if (slot_) slot_->cb.set(nullptr);
  if (!client_) return;
  // Posted, never waited for: a destructor must not block (it may run on the I/O thread itself).
  client_->post([c = client_, name = std::move(name_), owner = owner_] {
    c->locks().release(name, kind, owner, [](std::error_code) {});
  });
}

std::vector<std::string> permit::ids() const {
  std::vector<std::string> out;
  if (!client_) return out;
  for (const auto& id : detail::protocols::permit_ids(token_)) out.push_back(to_hex(id));
  return out;
}

bool permit::valid() const {
  return client_ && !client_->closed() && client_->locks().view(name_, owner_, kind, false).valid;
}

std::chrono::steady_clock::time_point permit::valid_until() const {
  if (!client_ || client_->closed()) return std::chrono::steady_clock::time_point::min();
  return client_->locks().view(name_, owner_, kind, false).valid_until;
}

std::stop_token permit::lost_token() const {
  if (!client_ || client_->closed()) return {};
  return client_->locks().view(name_, owner_, kind, true).token;
}

void permit::on_lost(lost_handler cb) {
  if (slot_) slot_->cb.set(std::move(cb));
}

void permit::release(std::error_code& ec) {
  if (!client_) {
    ec = errc::not_owner;
    return;
  }
  auto c = std::move(client_);
  client_.reset();
  detail::sync_call<bool>(*c, ec, [&](detail::bool_handler done) {
    c->locks().release(name_, kind, owner_, [done = std::move(done)](std::error_code e) mutable { done(e, !e); });
  });
}

void permit::release() {
  std::error_code ec;
  release(ec);
  raise_if(ec, name_, "release");
}

// ---- permit_semaphore ---------------------------------------------------------------------------

permit_semaphore::permit_semaphore(std::shared_ptr<detail::client_impl> c, std::string name)
    : client_(std::move(c)), name_(std::move(name)) {}

permit permit_semaphore::take(long long n, std::optional<std::chrono::milliseconds> wait,
                              std::optional<std::chrono::milliseconds> lease, std::error_code& ec) {
  if (n < 1 || !valid_lease(lease) || (wait && (wait->count() < 0 || *wait > detail::max_duration))) {
    ec = errc::invalid_argument;
    return {};
  }
  // Each acquisition is a hold of an owner of its own: permits are not re-entered, and two
  // acquisitions by one thread are two holds the watchdog keeps apart.
  const owner_id owner = detail::handle_access::new_owner();
  auto slot = std::make_shared<detail::lost_slot>();
  const bool got = detail::sync_call<bool>(*client_, ec, [&](detail::bool_handler done) {
    client_->locks().acquire(name_, kind, owner, wait, lease, slot, wait_strategy::pubsub(), std::move(done), nullptr,
                             false, n);
  });
  if (ec || !got) return {};
  return granted(client_, name_, owner, std::move(slot), ec);
}

permit permit_semaphore::granted(const std::shared_ptr<detail::client_impl>& c, const std::string& name, owner_id owner,
                                 std::shared_ptr<detail::lost_slot> slot, std::error_code& ec) {
  std::string token = c->locks().holder(name, owner, kind);
  if (token.empty()) {  // lost between the grant and this read: reported as a lost acquisition
    ec = errc::lock_lost;
    return {};
  }
  return permit(c, name, owner, std::move(token), std::move(slot));
}

asio::any_io_executor permit_semaphore::executor() const { return client_->executor(); }

void permit_semaphore::async_acquire_impl(long long n, std::optional<std::chrono::milliseconds> wait,
                                          std::optional<std::chrono::milliseconds> lease,
                                          detail::unique_function<void(std::error_code, permit)> h,
                                          std::shared_ptr<detail::acquire_cancel> cancel) {
  if (n < 1 || !valid_lease(lease) || (wait && (wait->count() < 0 || *wait > detail::max_duration)))
    return client_->run_or_fail([h = std::move(h)](bool) mutable { h(errc::invalid_argument, permit{}); });
  client_->run_or_fail([c = client_, name = name_, n, wait, lease, h = std::move(h),
                        cancel = std::move(cancel)](bool closed) mutable {
    if (closed) return h(errc::client_closed, permit{});
    const owner_id owner = detail::handle_access::new_owner();
    auto slot = std::make_shared<detail::lost_slot>();
    c->locks().acquire(name, kind, owner, wait, lease, slot, wait_strategy::pubsub(),
                       [c, name, owner, slot, wait, h = std::move(h)](std::error_code ec, bool got) mutable {
                         if (!wait && !got && !ec) ec = errc::attempts_exhausted;
                         if (ec || !got) return h(ec, permit{});
                         auto p = granted(c, name, owner, std::move(slot), ec);
                         h(ec, std::move(p));
                       },
                       std::move(cancel), false, n);
  });
}

void permit_semaphore::async_release_impl(permit p, detail::unique_function<void(std::error_code)> h) {
  if (!p) return client_->run_or_fail([h = std::move(h)](bool) mutable { h(errc::not_owner); });
  auto c = std::move(p.client_);
  p.client_.reset();  // spent: its destructor gives nothing back
  c->run_or_fail([c, name = p.name_, owner = p.owner_, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed);
    c->locks().release(name, kind, owner, std::move(h));
  });
}

permit permit_semaphore::acquire(long long n, std::optional<std::chrono::milliseconds> lease, std::error_code& ec) {
  auto p = take(n, std::nullopt, lease, ec);
  if (!p && !ec) ec = errc::attempts_exhausted;
  return p;
}
permit permit_semaphore::acquire(long long n, std::optional<std::chrono::milliseconds> lease) {
  std::error_code ec;
  auto p = acquire(n, lease, ec);
  raise_if(ec, name_, "acquire");
  return p;
}

permit permit_semaphore::try_acquire(long long n, std::chrono::milliseconds wait,
                                     std::optional<std::chrono::milliseconds> lease, std::error_code& ec) {
  return take(n, wait, lease, ec);
}
permit permit_semaphore::try_acquire(long long n, std::chrono::milliseconds wait,
                                     std::optional<std::chrono::milliseconds> lease) {
  std::error_code ec;
  auto p = try_acquire(n, wait, lease, ec);
  raise_if(ec, name_, "try_acquire");
  return p;
}

// Redisson's trySetPermits is the plain semaphore's, on the same key and channel.
bool permit_semaphore::try_set_permits(long long n, std::optional<std::chrono::milliseconds> ttl, std::error_code& ec) {
  return redlease::semaphore(client_, name_).try_set_permits(n, ttl, ec);
}
bool permit_semaphore::try_set_permits(long long n, std::optional<std::chrono::milliseconds> ttl) {
  std::error_code ec;
  bool r = try_set_permits(n, ttl, ec);
  raise_if(ec, name_, "try_set_permits");
  return r;
}

namespace {

// set_permits's argument; nothing for a count below 0.
std::optional<detail::arg_list> set_tail(long long n) {
  if (n < 0) return std::nullopt;
  detail::arg_list a;
  a.add(n);
  return a;
}

// permits_state.lua's argument: how many permits it lists.
std::optional<detail::arg_list> state_tail(std::size_t limit) {
  detail::arg_list a;
  a.add(static_cast<long long>(std::min<std::size_t>(limit, 100000)));
  return a;
}

// permits_update.lua's arguments; nothing for an id that is not 32 hex digits or a bad lease.
std::optional<detail::arg_list> update_tail(std::string_view id, std::optional<ms> lease) {
  auto raw = from_hex(id);
  if (!raw || !valid_lease(lease)) return std::nullopt;
  detail::arg_list a;
  a.add(lease ? lease->count() : -1LL).add(*raw);
  return a;
}

// permits_try_release.lua's arguments, the ids' raw bytes; nothing for no ids, too many, or one that
// is not 32 hex digits.
std::optional<detail::arg_list> release_tail(std::span<const std::string> ids) {
  if (ids.empty() || ids.size() > 1000) return std::nullopt;
  detail::arg_list a;
  for (const auto& id : ids) {
    auto raw = from_hex(id);
    if (!raw) return std::nullopt;
    a.add(*raw);
  }
  return a;
}

bool is_one(const reply& r, std::error_code& ec) { return as_int(r, ec) == 1; }
bool is_positive(const reply& r, std::error_code& ec) { return as_int(r, ec) > 0; }

// permits_state.lua's reply: {available, acquired, id, lease, ...}; `bad_reply` for anything else.
bool is_state(const reply& r, std::error_code& ec) {
  if (!ec && (!r.is_array() || r.elements.size() < 2 || !r.elements[0].is_integer() || !r.elements[1].is_integer()))
    ec = errc::bad_reply;
  return !ec;
}
long long available_of(const reply& r, std::error_code& ec) { return is_state(r, ec) ? r.elements[0].integer : 0; }
long long acquired_of(const reply& r, std::error_code& ec) { return is_state(r, ec) ? r.elements[1].integer : 0; }
std::vector<permit_entry> entries_of(const reply& r, std::error_code& ec) {
  std::vector<permit_entry> out;
  if (!is_state(r, ec)) return out;
  for (std::size_t i = 2; i + 1 < r.elements.size(); i += 2)
    out.push_back({to_hex(r.elements[i].str), r.elements[i + 1].is_integer() ? r.elements[i + 1].integer : -1});
  return out;
}

}  // namespace

long long permit_semaphore::set_permits(long long n, std::error_code& ec) {
  return call(client_, name_, detail::lua::permits_set, set_tail(n), as_int, ec);
}
long long permit_semaphore::set_permits(long long n) {
  std::error_code ec;
  auto r = set_permits(n, ec);
  raise_if(ec, name_, "set_permits");
  return r;
}

// The plain semaphore's latched INCRBY: the same key and message, exactly once.
long long permit_semaphore::add_permits(long long n, std::error_code& ec) {
  return redlease::semaphore(client_, name_).add_permits(n, ec);
}
long long permit_semaphore::add_permits(long long n) {
  std::error_code ec;
  auto r = add_permits(n, ec);
  raise_if(ec, name_, "add_permits");
  return r;
}

long long permit_semaphore::available_permits(std::error_code& ec) {
  return call(client_, name_, detail::lua::permits_state, state_tail(0), available_of, ec);
}
long long permit_semaphore::available_permits() {
  std::error_code ec;
  auto r = available_permits(ec);
  raise_if(ec, name_, "available_permits");
  return r;
}

long long permit_semaphore::acquired_permits(std::error_code& ec) {
  return call(client_, name_, detail::lua::permits_state, state_tail(0), acquired_of, ec);
}
long long permit_semaphore::acquired_permits() {
  std::error_code ec;
  auto r = acquired_permits(ec);
  raise_if(ec, name_, "acquired_permits");
  return r;
}

std::vector<permit_entry> permit_semaphore::permits(std::size_t limit, std::error_code& ec) {
  return call(client_, name_, detail::lua::permits_state, state_tail(limit), entries_of, ec);
}
std::vector<permit_entry> permit_semaphore::permits(std::size_t limit) {
  std::error_code ec;
  auto r = permits(limit, ec);
  raise_if(ec, name_, "permits");
  return r;
}

bool permit_semaphore::update_lease_time(std::string_view id, std::optional<ms> lease, std::error_code& ec) {
  return call(client_, name_, detail::lua::permits_update, update_tail(id, lease), is_one, ec);
}
bool permit_semaphore::update_lease_time(std::string_view id, std::optional<ms> lease) {
  std::error_code ec;
  bool r = update_lease_time(id, lease, ec);
  raise_if(ec, name_, "update_lease_time");
  return r;
}

// Not sent again after a lost reply: a second sending finds the ids gone and could not tell its
// first from someone else's release.
bool permit_semaphore::try_release(std::span<const std::string> ids, std::error_code& ec) {
  return call(client_, name_, detail::lua::permits_try_release, release_tail(ids), is_positive, ec);
}
bool permit_semaphore::try_release(std::span<const std::string> ids) {
  std::error_code ec;
  bool r = try_release(ids, ec);
  raise_if(ec, name_, "try_release");
  return r;
}

// ---- async forms of the calls above -------------------------------------------------------------

void permit_semaphore::async_set_impl(long long n, std::optional<ms> ttl, detail::bool_handler h) {
  redlease::semaphore(client_, name_).async_set_impl(n, ttl, std::move(h));
}

void permit_semaphore::async_set_permits_impl(long long n, detail::int_handler h) {
  call_async(client_, name_, detail::lua::permits_set, set_tail(n), as_int, std::move(h));
}

void permit_semaphore::async_add_impl(long long n, detail::int_handler h) {
  redlease::semaphore(client_, name_).async_add_impl(n, std::move(h));
}

void permit_semaphore::async_available_impl(detail::int_handler h) {
  call_async(client_, name_, detail::lua::permits_state, state_tail(0), available_of, std::move(h));
}

void permit_semaphore::async_acquired_impl(detail::int_handler h) {
  call_async(client_, name_, detail::lua::permits_state, state_tail(0), acquired_of, std::move(h));
}

void permit_semaphore::async_permits_impl(std::size_t limit,
                                          detail::unique_function<void(std::error_code, std::vector<permit_entry>)> h) {
  call_async(client_, name_, detail::lua::permits_state, state_tail(limit), entries_of, std::move(h));
}

void permit_semaphore::async_update_impl(std::string_view id, std::optional<ms> lease, detail::bool_handler h) {
  call_async(client_, name_, detail::lua::permits_update, update_tail(id, lease), is_one, std::move(h));
}

void permit_semaphore::async_release_ids_impl(std::span<const std::string> ids, detail::bool_handler h) {
  call_async(client_, name_, detail::lua::permits_try_release, release_tail(ids), is_positive, std::move(h));
}

}  // namespace redlease
