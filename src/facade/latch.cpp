// SPDX-License-Identifier: MIT
// The count-down latch's calls: the count's scripts (try_set_count, count_down), sent again under
// one request id when a reply is lost; the count (GET); the await, through the wait engine (kind
// latch: a grant is no hold); delete, the kind's forced unlock.
#include "redlease/latch.hpp"

#include <charconv>
#include <string>

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

count_down_latch client::count_down_latch(std::string name) {
  if (name.empty()) throw error(errc::invalid_argument, "client::count_down_latch: empty latch name");
  return redlease::count_down_latch(impl_, std::move(name));
}

count_down_latch::count_down_latch(std::shared_ptr<detail::client_impl> c, std::string name)
    : client_(std::move(c)), name_(std::move(name)) {}

namespace {

using detail::ms;

// How many times a call of the count is sent when its reply does not come.
constexpr int max_sendings = 3;

// The request latch's lifetime, as the engine's releases keep theirs.
long long request_latch_ttl(const detail::client_impl& c) {
  return detail::request_latch_ttl(c.cfg().request_timeout).count();
}

// Sends `script` with KEYS [name, request latch of a fresh request id, settled keys of the name to
// delete in passing (latch_sweeper)], `argv` after them and last the publish command (read on the
// executor, where the topology decides it, as the sweeper is); `done` gets its reply, on the
// executor (or at once when the client is closed). A call whose one sending was answered hands its
// request latch to the sweeper.
void start_latched(const std::shared_ptr<detail::client_impl>& c, const std::string& name,
                   const detail::lua_script& script, const detail::arg_list& argv,
                   detail::unique_function<void(std::error_code, reply)> done) {
  c->run_or_fail([c, name, &script, argv, done = std::move(done)](bool closed) mutable {
    if (closed) return done(errc::client_closed, reply{});
    std::string latch = detail::latch_key(name, detail::random_token());
    const auto sweep = c->locks().sweeper().take(name);
    detail::arg_list a;
    a.add(static_cast<long long>(2 + sweep.size())).add(name).add(latch);
    for (const auto& k : sweep) a.add(k);
    a.buf += argv.buf;
    a.count += argv.count;
    a.add(c->topo().publish_command());
    detail::send_latched(c, name, script, std::move(a), max_sendings, std::move(done),
                         [c, name, latch = std::move(latch)]() mutable { c->locks().sweeper().settled(name, std::move(latch)); });
  });
}

// The integer a latched script answers; `bad_reply` for anything else.
long long integer_of(const reply& r, std::error_code& ec) {
  if (ec) return 0;
  if (!r.is_integer()) {
    ec = errc::bad_reply;
    return 0;
  }
  return r.integer;
}

// start_latched, blocking; its integer reply.
long long call_latched(const std::shared_ptr<detail::client_impl>& c, const std::string& name,
                       const detail::lua_script& script, const detail::arg_list& argv, std::error_code& ec) {
  reply r = detail::sync_call<reply>(*c, ec, [&](auto done) { start_latched(c, name, script, argv, std::move(done)); });
  return integer_of(r, ec);
}

const detail::lock_protocol& proto() { return detail::protocol_of(lock_kind::latch); }

// count_down's arguments after its keys.
detail::arg_list count_down_args(detail::client_impl& c, const std::string& name) {
  detail::arg_list argv;
  argv.add(proto().channel(name)).add(request_latch_ttl(c));
  return argv;
}

bool valid_wait(ms wait) { return wait.count() >= 0 && wait <= detail::max_duration; }

// The await through the wait engine (on the executor): `wait` empty waits without limit. A wait
// without a bound ends in the count reaching 0 or an error.
void start_await(const std::shared_ptr<detail::client_impl>& c, const std::string& name, std::optional<ms> wait,
                 detail::bool_handler done) {
  c->locks().acquire(name, lock_kind::latch, detail::handle_access::new_owner(), wait, std::nullopt, nullptr,
                     wait_strategy::pubsub(), [wait, done = std::move(done)](std::error_code ec, bool got) mutable {
                       if (!wait && !got && !ec) ec = errc::attempts_exhausted;
                       done(ec, got && !ec);
                     });
}

// The await through the wait engine: `wait` empty waits without limit.
bool await_engine(const std::shared_ptr<detail::client_impl>& c, const std::string& name, std::optional<ms> wait,
                  std::error_code& ec) {
  if (wait && !valid_wait(*wait)) {
    ec = errc::invalid_argument;
    return false;
  }
  return detail::sync_call<bool>(*c, ec, [&](detail::bool_handler done) { start_await(c, name, wait, std::move(done)); });
}

void raise(const std::error_code& ec, const std::string& name, const char* op) {
  if (ec) throw_if(ec, (std::string("count_down_latch::") + op + " \"" + name.substr(0, 200) + "\"").c_str());
}

}  // namespace

namespace {

// try_set_count's arguments after its keys (the publish command follows); nothing for a bad count or TTL.
std::optional<detail::arg_list> set_count_args(detail::client_impl& c, const std::string& name, long long count,
                                               std::optional<ms> ttl) {
  if (count < 1 || (ttl && (ttl->count() <= 0 || *ttl > detail::max_duration))) return std::nullopt;
  detail::arg_list argv;
  argv.add(proto().channel(name)).add(count).add(ttl ? ttl->count() : 0LL).add(request_latch_ttl(c));
  return argv;
}

// GET's reply as a count: nil is 0; anything but an integer is a bad reply.
long long count_of(const reply& r, std::error_code& ec) {
  if (ec || r.is_nil()) return 0;
  long long v = 0;
  auto [p, e] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), v);
  if (!r.is_string() || e != std::errc{} || p != r.str.data() + r.str.size()) {
    ec = errc::bad_reply;
    return 0;
  }
  return v;
}

}  // namespace

bool count_down_latch::set_count(long long count, std::optional<ms> ttl, std::error_code& ec) {
  ec.clear();
  auto argv = set_count_args(*client_, name_, count, ttl);
  if (!argv) {
    ec = errc::invalid_argument;
    return false;
  }
  return call_latched(client_, name_, detail::lua::latch_try_set_count, *argv, ec) == 1;
}

bool count_down_latch::try_set_count(long long count, std::error_code& ec) { return set_count(count, std::nullopt, ec); }
bool count_down_latch::try_set_count(long long count) {
  std::error_code ec;
  bool r = set_count(count, std::nullopt, ec);
  raise(ec, name_, "try_set_count");
  return r;
}
bool count_down_latch::try_set_count(long long count, ms ttl, std::error_code& ec) { return set_count(count, ttl, ec); }
bool count_down_latch::try_set_count(long long count, ms ttl) {
  std::error_code ec;
  bool r = set_count(count, ttl, ec);
  raise(ec, name_, "try_set_count");
  return r;
}

void count_down_latch::count_down(std::error_code& ec) {
  ec.clear();
  call_latched(client_, name_, detail::lua::latch_count_down, count_down_args(*client_, name_), ec);
}
void count_down_latch::count_down() {
  std::error_code ec;
  count_down(ec);
  raise(ec, name_, "count_down");
}

long long count_down_latch::count(std::error_code& ec) {
  ec.clear();
  std::string cmd;
  detail::encode_command(cmd, {"GET", name_});
  reply r = detail::sync_command(*client_, name_, std::move(cmd), ec, true);
  return count_of(r, ec);
}
long long count_down_latch::count() {
  std::error_code ec;
  long long r = count(ec);
  raise(ec, name_, "count");
  return r;
}

void count_down_latch::await(std::error_code& ec) {
  ec.clear();
  await_engine(client_, name_, std::nullopt, ec);
}
void count_down_latch::await() {
  std::error_code ec;
  await(ec);
  raise(ec, name_, "await");
}

bool count_down_latch::await_for(ms timeout, std::error_code& ec) {
  ec.clear();
  return await_engine(client_, name_, timeout, ec);
}
bool count_down_latch::await_for(ms timeout) {
  std::error_code ec;
  bool r = await_for(timeout, ec);
  raise(ec, name_, "await_for");
  return r;
}

bool count_down_latch::count_down_and_await(ms timeout, std::error_code& ec) {
  if (!valid_wait(timeout)) {
    ec = errc::invalid_argument;
    return false;
  }
  count_down(ec);
  if (ec) return false;
  return await_for(timeout, ec);
}
bool count_down_latch::count_down_and_await(ms timeout) {
  std::error_code ec;
  bool r = count_down_and_await(timeout, ec);
  raise(ec, name_, "count_down_and_await");
  return r;
}

bool count_down_latch::delete_latch(std::error_code& ec) {
  ec.clear();
  return detail::sync_call<bool>(*client_, ec, [&](detail::bool_handler done) {
    client_->locks().force_unlock(name_, lock_kind::latch, std::move(done));
  });
}
bool count_down_latch::delete_latch() {
  std::error_code ec;
  bool r = delete_latch(ec);
  raise(ec, name_, "delete_latch");
  return r;
}

// ---- async -------------------------------------------------------------------------------------

asio::any_io_executor count_down_latch::executor() const { return client_->executor(); }

void count_down_latch::async_count_down_impl(detail::unique_function<void(std::error_code)> h) {
  start_latched(client_, name_, detail::lua::latch_count_down, count_down_args(*client_, name_),
                [h = std::move(h)](std::error_code ec, reply r) mutable {
                  integer_of(r, ec);
                  h(ec);
                });
}

void count_down_latch::async_await_impl(ms timeout, detail::unique_function<void(std::error_code, bool)> h) {
  // Through run_or_fail like every completion: once the client is closed its executor runs nothing.
  const bool valid = valid_wait(timeout);
  client_->run_or_fail([c = client_, name = name_, timeout, valid, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, false);
    if (!valid) return h(errc::invalid_argument, false);
    start_await(c, name, timeout, std::move(h));
  });
}

void count_down_latch::async_set_count_impl(long long count, std::optional<ms> ttl,
                                            detail::unique_function<void(std::error_code, bool)> h) {
  auto argv = set_count_args(*client_, name_, count, ttl);
  if (!argv) return client_->run_or_fail([h = std::move(h)](bool) mutable { h(errc::invalid_argument, false); });
  start_latched(client_, name_, detail::lua::latch_try_set_count, *argv,
                [h = std::move(h)](std::error_code ec, reply r) mutable {
                  const bool set = integer_of(r, ec) == 1;
                  h(ec, set);
                });
}

void count_down_latch::async_count_impl(detail::unique_function<void(std::error_code, long long)> h) {
  client_->run_or_fail([c = client_, name = name_, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, 0);
    std::string cmd;
    detail::encode_command(cmd, {"GET", name});
    c->exec(name, std::move(cmd), [h = std::move(h)](std::error_code ec, reply r) mutable {
      const long long n = count_of(r, ec);
      h(ec, n);
    }, true);
  });
}

void count_down_latch::async_delete_impl(detail::unique_function<void(std::error_code, bool)> h) {
  client_->run_or_fail([c = client_, name = name_, h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, false);
    c->locks().force_unlock(std::move(name), lock_kind::latch, std::move(h));
  });
}

}  // namespace redlease
