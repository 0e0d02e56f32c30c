// SPDX-License-Identifier: MIT
// redlease::semaphore: acquisitions through the lock engine (lock_kind::semaphore, whose grants are
// no holds), the other calls as single script calls or commands on the semaphore's node.
#include "redlease/semaphore.hpp"

#include <charconv>

#include "facade/client_impl.hpp"
#include "facade/handle_access.hpp"
#include "facade/latched_call.hpp"
#include "lock/lock_service.hpp"
#include "lock/naming.hpp"
#include "lock/protocol.hpp"
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

long long add(const std::shared_ptr<detail::client_impl>& c, const std::string& name, long long n, std::error_code& ec) {
  return detail::sync_call<long long>(*c, ec,
                                      [&c, &name, n](detail::int_handler done) { send_add(c, name, n, std::move(done)); });
}

// One script call, its integer reply.
long long script_int(detail::client_impl& c, const std::string& name, const detail::lua_script& s, detail::arg_list a,
                     std::error_code& ec) {
  return detail::sync_call<long long>(c, ec, [&c, &name, &s, a = std::move(a)](detail::int_handler done) mutable {
    c.exec_script(name, s, std::move(a), [done = std::move(done)](std::error_code e, reply r) mutable {
      if (e) return done(e, 0);
      if (!r.is_integer()) return done(errc::bad_reply, 0);
      done({}, r.integer);
    });
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
  client_->run_or_fail([c = client_, name = name_, n, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed);
    send_add(c, name, n, [h = std::move(h)](std::error_code ec, long long) mutable { h(ec); });
  });
}

void semaphore::release(long long n, std::error_code& ec) {
  if (n < 1) {
    ec = errc::invalid_argument;
    return;
  }
  add(client_, name_, n, ec);
}
void semaphore::release(long long n) {
  std::error_code ec;
  release(n, ec);
  raise_if(ec, name_, "release");
}

long long semaphore::add_permits(long long n, std::error_code& ec) { return add(client_, name_, n, ec); }
long long semaphore::add_permits(long long n) {
  std::error_code ec;
  auto r = add_permits(n, ec);
  raise_if(ec, name_, "add_permits");
  return r;
}

bool semaphore::try_set_permits(long long n, std::optional<std::chrono::milliseconds> ttl, std::error_code& ec) {
  if (n < 0 || (ttl && (ttl->count() <= 0 || *ttl > detail::max_duration))) {
    ec = errc::invalid_argument;
    return false;
  }
  detail::arg_list a;
  a.add(1LL).add(name_).add(detail::protocol_of(lock_kind::semaphore).channel(name_)).add(n).add(ttl ? ttl->count() : 0LL)
      .add(client_->topo().publish_command());
  return script_int(*client_, name_, detail::lua::semaphore_set, std::move(a), ec) == 1;
}
bool semaphore::try_set_permits(long long n, std::optional<std::chrono::milliseconds> ttl) {
  std::error_code ec;
  bool r = try_set_permits(n, ttl, ec);
  raise_if(ec, name_, "try_set_permits");
  return r;
}

long long semaphore::available_permits(std::error_code& ec) {
  std::string cmd;
  detail::encode_command(cmd, {"GET", name_});
  auto r = detail::sync_command(*client_, name_, std::move(cmd), ec, true);
  if (ec || r.is_nil()) return 0;
  long long v = 0;
  auto [p, e] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), v);
  if (!r.is_string() || e != std::errc{} || p != r.str.data() + r.str.size()) {
    ec = errc::bad_reply;
    return 0;
  }
  return v;
}
long long semaphore::available_permits() {
  std::error_code ec;
  auto r = available_permits(ec);
  raise_if(ec, name_, "available_permits");
  return r;
}

long long semaphore::drain_permits(std::error_code& ec) {
  detail::arg_list a;
  a.add(1LL).add(name_);
  return script_int(*client_, name_, detail::lua::semaphore_drain, std::move(a), ec);
}
long long semaphore::drain_permits() {
  std::error_code ec;
  auto r = drain_permits(ec);
  raise_if(ec, name_, "drain_permits");
  return r;
}

}  // namespace redlease
