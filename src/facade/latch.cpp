// SPDX-License-Identifier: MIT
// The count-down latch's calls: the count's scripts (try_set_count, count_down), sent again under
// one request id when a reply is lost; the count (GET); the await, through the wait engine (kind
// latch: a grant is no hold); delete, the kind's forced unlock.
#include "redlease/latch.hpp"

#include <charconv>
#include <string>

#include "facade/client_impl.hpp"
#include "facade/handle_access.hpp"
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

// A sending that may have run (the reply was lost or late), or that never left (the connection could
// not be made): sent again under the same request id, whose latch makes the server count it once.
bool send_again(std::error_code ec) {
  return ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::protocol_error ||
         ec == errc::connect_failed || ec == errc::connect_timeout;
}

// One call of a latched script (its KEYS[2] the request latch), and its sendings.
struct latched_call {
  std::shared_ptr<detail::client_impl> c;
  std::string name;
  const detail::lua_script* script = nullptr;
  detail::arg_list args;
  int sendings = 0;
  detail::unique_function<void(std::error_code, reply)> done;
};

void send(std::shared_ptr<latched_call> x) {
  ++x->sendings;
  detail::arg_list a = x->args;
  const auto& key = x->name;
  x->c->exec_script(key, *x->script, std::move(a), [x](std::error_code ec, reply r) mutable {
    if (ec && send_again(ec) && x->sendings < max_sendings && !x->c->closed()) return send(std::move(x));
    x->done(ec, std::move(r));
  });
}

// The request latch's lifetime: as the engine's releases keep theirs (lock_service::latch_ttl), it
// outlives every sending of the call, and a sending stuck in a reset connection.
long long request_latch_ttl(const detail::client_impl& c) {
  return std::max<ms>(ms(60000), 10 * c.cfg().request_timeout).count();
}

// Sends `script` with KEYS [name, request latch] and `argv` after them, blocking; its integer reply.
long long call_latched(const std::shared_ptr<detail::client_impl>& c, const std::string& name,
                       const detail::lua_script& script, detail::arg_list argv, std::error_code& ec) {
  const std::string request = detail::random_token();
  detail::arg_list a;
  a.add(2LL).add(name).add(detail::latch_key(name, request));
  a.buf += argv.buf;
  a.count += argv.count;
  reply r = detail::sync_call<reply>(*c, ec, [&](auto done) {
    c->run_or_fail([c, name, &script, a = std::move(a), done = std::move(done)](bool closed) mutable {
      if (closed) return done(errc::client_closed, reply{});
      send(std::make_shared<latched_call>(latched_call{c, name, &script, std::move(a), 0, std::move(done)}));
    });
  });
  if (ec) return 0;
  if (!r.is_integer()) {
    ec = errc::bad_reply;
    return 0;
  }
  return r.integer;
}

const detail::lock_protocol& proto() { return detail::protocol_of(lock_kind::latch); }

// The await through the wait engine: `wait` empty waits without limit.
bool await_engine(const std::shared_ptr<detail::client_impl>& c, const std::string& name, std::optional<ms> wait,
                  std::error_code& ec) {
  if (wait && (wait->count() < 0 || *wait > detail::max_duration)) {
    ec = errc::invalid_argument;
    return false;
  }
  const owner_id owner = detail::handle_access::new_owner();
  bool got = detail::sync_call<bool>(*c, ec, [&](detail::bool_handler done) {
    c->locks().acquire(name, lock_kind::latch, owner, wait, std::nullopt, nullptr, wait_strategy::pubsub(),
                       std::move(done));
  });
  // A wait without a bound ends in the count reaching 0 or an error.
  if (!wait && !got && !ec) ec = errc::attempts_exhausted;
  return got && !ec;
}

void raise(const std::error_code& ec, const std::string& name, const char* op) {
  if (ec) throw_if(ec, (std::string("count_down_latch::") + op + " \"" + name.substr(0, 200) + "\"").c_str());
}

}  // namespace

bool count_down_latch::set_count(long long count, std::optional<ms> ttl, std::error_code& ec) {
  ec.clear();
  if (count < 1 || (ttl && (ttl->count() <= 0 || *ttl > detail::max_duration))) {
    ec = errc::invalid_argument;
    return false;
  }
  detail::arg_list argv;
  argv.add(proto().channel(name_)).add(count).add(ttl ? ttl->count() : 0LL).add(request_latch_ttl(*client_));
  argv.add(client_->topo().publish_command());
  return call_latched(client_, name_, detail::lua::latch_try_set_count, std::move(argv), ec) == 1;
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
  detail::arg_list argv;
  argv.add(proto().channel(name_)).add(request_latch_ttl(*client_)).add(client_->topo().publish_command());
  call_latched(client_, name_, detail::lua::latch_count_down, std::move(argv), ec);
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
  if (ec) return 0;
  if (r.is_nil()) return 0;
  long long v = 0;
  auto [p, e] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), v);
  if (!r.is_string() || e != std::errc{} || p != r.str.data() + r.str.size()) {
    ec = errc::bad_reply;
    return 0;
  }
  return v;
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
  if (timeout.count() < 0 || timeout > detail::max_duration) {
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

}  // namespace redlease
