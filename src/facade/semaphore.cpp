// SPDX-License-Identifier: MIT
// redlease::semaphore: acquisitions through the lock engine (lock_kind::semaphore, whose grants are
// no holds), the other calls as single script calls or commands on the semaphore's node.
#include "redlease/semaphore.hpp"

#include "facade/client_impl.hpp"
#include "facade/handle_access.hpp"
#include "facade/latched_call.hpp"
#include "lock/lock_service.hpp"
#include "lock/naming.hpp"
#include "lock/protocol.hpp"
#include "lock/protocols/common.hpp"
#include "random.hpp"
#include "redlease/client.hpp"
#include "redlease_lua.hpp"

namespace redlease {

semaphore client::semaphore(std::string name) {
  if (name.empty()) throw error(errc::invalid_argument, "client::semaphore: empty name");
  return redlease::semaphore(impl_, std::move(name));
}

semaphore::semaphore(std::shared_ptr<detail::client_impl> c, std::string name)
    : client_(std::move(c)), name_(std::move(name)) {}

namespace {

using detail::ms;

void raise_if(const std::error_code& ec, const std::string& name, const char* op) {
  if (ec) throw_if(ec, (std::string("semaphore::") + op + " \"" + name.substr(0, 200) + "\"").c_str());
}

// semaphore_release.lua under one request id, sent up to five times while its outcome is unknown
// (facade/latched_call.hpp). Executor only.
void send_add(const std::shared_ptr<detail::client_impl>& c, const std::string& name, long long n,
              detail::int_handler h) {
  const auto& proto = detail::protocol_of(lock_kind::semaphore);
  const std::string request = detail::random_token();
  detail::release_request r;
  r.name = name;
  r.request = request;
  r.amount = n;
  r.latch_ttl = detail::request_latch_ttl(c->cfg().request_timeout);
  r.publish = c->topo().publish_command();
  const auto sweep = c->locks().sweeper().take(name);
  r.sweep = sweep;
  detail::arg_list a;
  proto.encode_release(a, r);
  detail::send_latched(
      c, name, *proto.release_script(false), std::move(a), 5,
      [h = std::move(h)](std::error_code ec, reply rep) mutable {
        if (ec) return h(ec, 0);
        if (!rep.is_integer()) return h(errc::bad_reply, 0);
        h({}, rep.integer);
      },
      [c, name, request] { c->locks().sweeper().settled(name, detail::latch_key(name, request)); });
}

// send_add from any thread: on the executor, or `h` gets client_closed when the client is closed.
void start_add(const std::shared_ptr<detail::client_impl>& c, const std::string& name, long long n,
               detail::int_handler h) {
  c->run_or_fail([c, name, n, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, 0);
    send_add(c, name, n, std::move(h));
  });
}

// One script call with `a`, and last, with `publish`, the publish command (read on the executor,
// where the topology decides it); `h` gets its integer reply. Any thread.
void start_script_int(const std::shared_ptr<detail::client_impl>& c, const std::string& name,
                      const detail::lua_script& s, detail::arg_list a, bool publish, detail::int_handler h) {
  c->run_or_fail([c, name, &s, a = std::move(a), publish, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, 0);
    if (publish) a.add(c->topo().publish_command());
    c->exec_script(name, s, std::move(a), [h = std::move(h)](std::error_code ec, reply r) mutable {
      if (!ec && !r.is_integer()) ec = errc::bad_reply;
      h(ec, ec ? 0 : r.integer);
    });
  });
}

// try_set_permits's arguments (the publish command follows); nothing for a bad count or TTL.
std::optional<detail::arg_list> set_args(const std::string& name, long long n, std::optional<ms> ttl) {
  if (n < 0 || (ttl && (ttl->count() <= 0 || *ttl > detail::max_duration))) return std::nullopt;
  detail::arg_list a;
  a.add(1LL).add(name).add(detail::protocol_of(lock_kind::semaphore).channel(name)).add(n).add(ttl ? ttl->count() : 0LL);
  return a;
}

// The set's script from any thread; `h` gets whether it set the permits.
void start_set(const std::shared_ptr<detail::client_impl>& c, const std::string& name, detail::arg_list a,
               detail::bool_handler h) {
  start_script_int(c, name, detail::lua::semaphore_set, std::move(a), true,
                   [h = std::move(h)](std::error_code ec, long long set) mutable { h(ec, set == 1); });
}

// The drain's script from any thread; `h` gets how many permits there were.
void start_drain(const std::shared_ptr<detail::client_impl>& c, const std::string& name, detail::int_handler h) {
  detail::arg_list a;
  a.add(1LL).add(name);
  start_script_int(c, name, detail::lua::semaphore_drain, std::move(a), false, std::move(h));
}

// GET from any thread; `h` gets the permits it shows (a missing key: 0; anything but a count: bad_reply).
void start_get(const std::shared_ptr<detail::client_impl>& c, const std::string& name, detail::int_handler h) {
  c->run_or_fail([c, name, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, 0);
    std::string cmd;
    detail::encode_command(cmd, {"GET", name});
    c->exec(name, std::move(cmd), [h = std::move(h)](std::error_code ec, reply r) mutable {
      const auto n = ec ? std::nullopt : detail::protocols::decode_count_field(r);
      if (!ec && !n) ec = errc::bad_reply;
      h(ec, n.value_or(0));
    }, true);
  });
}

}  // namespace

void semaphore::acquire(long long n, std::error_code& ec) {
  if (!try_acquire_impl(n, std::nullopt, ec) && !ec) ec = errc::attempts_exhausted;
}
void semaphore::acquire(long long n) {
  std::error_code ec;
  acquire(n, ec);
  raise_if(ec, name_, "acquire");
}

bool semaphore::try_acquire(long long n, std::chrono::milliseconds wait, std::error_code& ec) {
  return try_acquire_impl(n, wait, ec);
}
bool semaphore::try_acquire(long long n, std::chrono::milliseconds wait) {
  std::error_code ec;
  bool r = try_acquire(n, wait, ec);
  raise_if(ec, name_, "try_acquire");
  return r;
}

bool semaphore::try_acquire_impl(long long n, std::optional<std::chrono::milliseconds> wait, std::error_code& ec) {
  if (n < 1) {
    ec = errc::invalid_argument;
    return false;
  }
  // The owner only keeps apart this client's waiters; permits belong to nobody.
  const auto owner = this_thread_owner();
  return detail::sync_call<bool>(*client_, ec, [&](detail::bool_handler done) {
    client_->locks().acquire(name_, lock_kind::semaphore, owner, wait, std::nullopt, nullptr, wait_strategy::pubsub(),
                             std::move(done), nullptr, false, n);
  });
}

asio::any_io_executor semaphore::executor() const { return client_->executor(); }

std::shared_ptr<detail::acquire_cancel> semaphore::hook_cancel(asio::cancellation_slot slot) {
  return detail::hook_acquire_cancel(client_, std::move(slot));
}

std::shared_ptr<detail::acquire_cancel> detail::hook_acquire_cancel(const std::shared_ptr<client_impl>& client,
                                                                    asio::cancellation_slot slot) {
  if (!slot.is_connected()) return nullptr;
  auto x = std::make_shared<detail::acquire_cancel>();
  slot.assign([c = client, x](asio::cancellation_type type) {
    if (type == asio::cancellation_type::none) return;
    // Posted, never run inline: the completion it may cause clears the slot that is emitting.
    c->post([c, x] { c->locks().cancel_acquire(*x); });
  });
  return x;
}

void semaphore::async_acquire_impl(long long n, std::optional<std::chrono::milliseconds> wait,
                                   detail::unique_function<void(std::error_code, bool)> h,
                                   std::shared_ptr<detail::acquire_cancel> cancel) {
  // Through run_or_fail like every completion: once the client is closed its executor runs nothing.
  if (n < 1) return client_->run_or_fail([h = std::move(h)](bool) mutable { h(errc::invalid_argument, false); });
  client_->run_or_fail([c = client_, name = name_, n, wait, h = std::move(h), cancel = std::move(cancel)](bool closed) mutable {
    if (closed) return h(errc::client_closed, false);
    // A fresh owner per call: it only keeps this call's waiter apart (permits belong to nobody).
    c->locks().acquire(std::move(name), lock_kind::semaphore, detail::handle_access::new_owner(), wait, std::nullopt,
                       nullptr, wait_strategy::pubsub(),
                       [wait, h = std::move(h)](std::error_code ec, bool got) mutable {
                         if (!wait && !got && !ec) ec = errc::attempts_exhausted;
                         h(ec, got);
                       },
                       std::move(cancel), false, n);
  });
}

void semaphore::async_release_impl(long long n, detail::unique_function<void(std::error_code)> h) {
  if (n < 1) return client_->run_or_fail([h = std::move(h)](bool) mutable { h(errc::invalid_argument); });
  start_add(client_, name_, n, [h = std::move(h)](std::error_code ec, long long) mutable { h(ec); });
}

void semaphore::async_add_impl(long long n, detail::int_handler h) { start_add(client_, name_, n, std::move(h)); }

void semaphore::async_set_impl(long long n, std::optional<ms> ttl, detail::bool_handler h) {
  auto a = set_args(name_, n, ttl);
  if (!a) return client_->run_or_fail([h = std::move(h)](bool) mutable { h(errc::invalid_argument, false); });
  start_set(client_, name_, std::move(*a), std::move(h));
}

void semaphore::async_available_impl(detail::int_handler h) { start_get(client_, name_, std::move(h)); }

void semaphore::async_drain_impl(detail::int_handler h) { start_drain(client_, name_, std::move(h)); }

void semaphore::release(long long n, std::error_code& ec) {
  if (n < 1) {
    ec = errc::invalid_argument;
    return;
  }
  add_permits(n, ec);
}
void semaphore::release(long long n) {
  std::error_code ec;
  release(n, ec);
  raise_if(ec, name_, "release");
}

long long semaphore::add_permits(long long n, std::error_code& ec) {
  return detail::sync_call<long long>(*client_, ec,
                                      [&](detail::int_handler done) { start_add(client_, name_, n, std::move(done)); });
}
long long semaphore::add_permits(long long n) {
  std::error_code ec;
  auto r = add_permits(n, ec);
  raise_if(ec, name_, "add_permits");
  return r;
}

bool semaphore::try_set_permits(long long n, std::optional<ms> ttl, std::error_code& ec) {
  auto a = set_args(name_, n, ttl);
  if (!a) {
    ec = errc::invalid_argument;
    return false;
  }
  return detail::sync_call<bool>(*client_, ec,
                                 [&](detail::bool_handler done) { start_set(client_, name_, std::move(*a), std::move(done)); });
}
bool semaphore::try_set_permits(long long n, std::optional<ms> ttl) {
  std::error_code ec;
  bool r = try_set_permits(n, ttl, ec);
  raise_if(ec, name_, "try_set_permits");
  return r;
}

long long semaphore::available_permits(std::error_code& ec) {
  return detail::sync_call<long long>(*client_, ec,
                                      [&](detail::int_handler done) { start_get(client_, name_, std::move(done)); });
}
long long semaphore::available_permits() {
  std::error_code ec;
  auto r = available_permits(ec);
  raise_if(ec, name_, "available_permits");
  return r;
}

long long semaphore::drain_permits(std::error_code& ec) {
  return detail::sync_call<long long>(*client_, ec,
                                      [&](detail::int_handler done) { start_drain(client_, name_, std::move(done)); });
}
long long semaphore::drain_permits() {
  std::error_code ec;
  auto r = drain_permits(ec);
  raise_if(ec, name_, "drain_permits");
  return r;
}

}  // namespace redlease
