// SPDX-License-Identifier: MIT
#include "redlease/client.hpp"

#include <asio/io_context.hpp>
#include <asio/strand.hpp>
#include <asio/thread_pool.hpp>

#include <algorithm>
#include <cctype>

#include "background.hpp"
#include "callback_slot.hpp"
#include "facade/client_impl.hpp"
#include "lock/lock_service.hpp"
#include "random.hpp"
#include "redlease_lua.hpp"

namespace redlease {
namespace detail {

client_impl::client_impl(config cfg, std::optional<asio::any_io_executor> user_ex)
    : io_runtime(std::move(cfg), std::move(user_ex)), uuid_(random_uuid()) {
  if (cfg_.metrics) metrics.prefixes.configure(cfg_.metrics_prefix);
  topo_ = make_topology(ex_, cfg_, guard_.get());
  locks_ = std::make_unique<lock_service>(*this);
  topo_->set_events({[this] { locks_->on_command_connection_up(); },
                     [this](const std::string& what) { locks_->on_failover(what); }});
}

client_impl::~client_impl() {
  shutdown();
  // Destroyed on its own I/O thread while the close waits for answers: close now (the thread then
  // runs out of work and ends; the waiting timer's handler sees operation_aborted).
  if (on_io_thread()) close_topology();
  alive_.reset();
  fail_inbox();
  if (thread_.joinable()) thread_.detach();  // destroyed on its own I/O thread: it ends by itself
}

void client_impl::start() {
  start_io_thread(std::weak_ptr<io_runtime>(weak_from_this()));
  asio::post(ex_, [self = shared_from_this()] {
    if (self->cfg_.tls.enabled && self->cfg_.tls.insecure) {
      report_background(self->cfg_, "tls", {},
                        "config::tls.insecure is set: the server's certificate and host name are NOT verified "
                        "(the connection is encrypted but anyone on the path can impersonate the server)");
    }
    if (!self->cfg_.sentinel.nodes.empty() && self->cfg_.sentinel.tls.enabled && self->cfg_.sentinel.tls.insecure) {
      report_background(self->cfg_, "tls", {},
                        "config::sentinel.tls.insecure is set: the Sentinels' certificates and host names are NOT "
                        "verified (anyone on the path can impersonate a Sentinel and name any master)");
    }
    self->topo_->start();
  });
}

bool client_impl::quiet() const {
  bool quiet = true;
  topo_->for_each_connection([&quiet](const connection& conn, bool pubsub) {
    if (!pubsub && !conn.idle()) quiet = false;
  });
  return quiet;
}

bool client_impl::answers_pending() const {
  bool pending = false;
  topo_->for_each_connection([&pending](const connection& conn, bool pubsub) {
    if (!pubsub && conn.awaits_replies()) pending = true;
  });
  // A blocking caller's lane: its caller reads the replies on its own thread (or the node does,
  // once parked); the close must not interrupt it before they come.
  topo_->for_each_node([&pending](const node& n) {
    if (n.lane_busy()) pending = true;
  });
  return pending;
}

// Closed at once, the connections would fail what is on its way: a fair waiter's give-up (it then
// blocks the queue until its deadline), an unlock, the undo of a grant that comes after the close.
// Looked at every millisecond: this runs once per client, and a hook on every reply would cost the
// common path. A user executor's client may be destroyed before any later look: it closes at once.
void client_impl::close_when_answered(clock::time_point until) {
  if (!own_ctx_ || clock::now() >= until || !answers_pending()) return close_topology();
  if (!close_timer_) close_timer_.emplace(ex_);
  close_timer_->expires_after(std::chrono::milliseconds(1));
  // A destructor on the I/O thread cancels the timer, but a wait that has expired already has its
  // handler queued with success: `alive` says whether `this` still exists.
  close_timer_->async_wait([this, until, alive = std::weak_ptr<bool>(alive_)](std::error_code ec) {
    if (ec || alive.expired()) return;
    close_when_answered(until);
  });
}

void client_impl::close_topology() noexcept {
  if (topo_closed_) return;
  topo_closed_ = true;
  if (close_timer_) close_timer_->cancel();
  try {
    topo_->close();
  } catch (...) {
    report_exception(cfg_, "close");
  }
}

void client_impl::pump_lane(lane_session& s, const one_shot& answered) {
  std::vector<lane_completion> done;
  auto& l = *s.held();
  while (l.waiting() && !answered.ready()) {
    auto spin = lane_spin();
    clock::duration rtt{};
    bool caught = l.await(clock::now() + spin, done, rtt);
    lane_waited(caught, spin, rtt);
    // The handlers are the client's code: they run under the guard, as run_direct runs the call.
    io_guard::scope held(*guard_);
    io_guard::direct_scope direct;
    io_guard::lanes_scope on(*guard_, &s);
    run_completions(done, l.home().lock(), closing_ || closed(), topo_closed_, cfg_);
  }
  if (l.pending()) {
    // The call has its answer, but something it sent (a give-back after a timeout) is still on the
    // lane: the I/O thread reads the rest, in order, and then frees the lane.
    io_guard::scope held(*guard_);
    auto parked = s.release();
    parked->park(parked);
    return;
  }
  s.end();
}

void client_impl::shutdown() noexcept {
  {
    std::lock_guard<std::mutex> g(life_mu_);
    if (closed_.exchange(true)) {
      join_io_thread();  // returns once the first closer's join has (close() returns after the thread)
      return;
    }
  }
  auto close_all = [this] {
    closing_ = true;
    auto hooks = std::move(close_hooks_);
    close_hooks_.clear();
    for (auto& [alive, fn] : hooks)
      if (!alive.expired()) fn();
    locks_->close();
    close_when_answered(clock::now() + cfg_.close_timeout);
  };
  if (on_io_thread()) {
    close_all();
  } else if (auto self = weak_from_this().lock()) {
    // On an executor the caller runs, the close runs there later: the client must live until then
    // (its last handle may go right after this returns), and no longer.
    asio::post(ex_, [self = std::move(self), close_all]() mutable {
      close_all();
      self.reset();
    });
  } else if (own_ctx_) {
    // From the destructor of a client that was never closed: the join below runs it first.
    asio::post(ex_, close_all);
  }
  work_.reset();
  // Closed from the I/O thread itself (inside a callback): the thread stays joinable, and whoever
  // destroys the client joins it. Only a client whose last reference goes on its own thread detaches.
  if (join_io_thread()) fail_inbox();  // whatever came in after the executor's last drain
  // After the I/O thread: a subscription callback blocked in a call on this client has its answer
  // (client_closed) by now. On the I/O thread, the callbacks in progress are not waited for (one may
  // wait for this thread).
  std::shared_ptr<delivery_pool> pool;
  {
    std::lock_guard<std::mutex> g(delivery_mu_);
    delivery_stopped_ = true;
    pool = std::move(delivery_);
  }
  if (pool) pool->stop(!on_io_thread());
}

std::shared_ptr<delivery_pool> client_impl::delivery() {
  std::lock_guard<std::mutex> g(delivery_mu_);
  if (!delivery_ && !delivery_stopped_) delivery_ = delivery_pool::make();
  return delivery_;
}

}  // namespace detail

// ---- client ------------------------------------------------------------------------------------

client::client(config cfg) : impl_(std::make_shared<detail::client_impl>(std::move(cfg), std::nullopt)) {
  impl_->start();
}

client::client(asio::any_io_executor ex, config cfg)
    : impl_(std::make_shared<detail::client_impl>(std::move(cfg), std::move(ex))) {
  impl_->start();
}

client::~client() { close(); }
client::client(client&&) noexcept = default;
client& client::operator=(client&& o) noexcept {
  if (this != &o) {
    close();
    impl_ = std::move(o.impl_);
  }
  return *this;
}

void client::close() noexcept {
  if (impl_) impl_->shutdown();
}

reentrant_lock client::lock(std::string name) {
  if (name.empty()) throw error(errc::invalid_argument, "client::lock: empty lock name");
  return reentrant_lock(impl_, std::move(name));
}

redlease::fair_lock client::fair_lock(std::string name) {
  if (name.empty()) throw error(errc::invalid_argument, "client::fair_lock: empty lock name");
  return redlease::fair_lock(impl_, std::move(name));
}

redlease::read_lock client::read_lock(std::string name) {
  if (name.empty()) throw error(errc::invalid_argument, "client::read_lock: empty lock name");
  return redlease::read_lock(impl_, std::move(name));
}

redlease::write_lock client::write_lock(std::string name) {
  if (name.empty()) throw error(errc::invalid_argument, "client::write_lock: empty lock name");
  return redlease::write_lock(impl_, std::move(name));
}

redlease::mutex client::mutex(std::string name) {
  if (name.empty()) throw error(errc::invalid_argument, "client::mutex: empty lock name");
  return redlease::mutex(impl_, std::move(name));
}


const std::string& client::id() const noexcept { return impl_->uuid(); }
const config& client::get_config() const noexcept { return impl_->cfg(); }
asio::any_io_executor client::get_executor() const noexcept { return impl_->executor(); }

namespace {
std::string encode(std::initializer_list<std::string_view> args) {
  std::string p;
  detail::encode_command(p, args);
  return p;
}
std::string encode(const std::vector<std::string>& args) {
  std::string p;
  detail::encode_header(p, args.size());
  for (auto& a : args) detail::encode_arg(p, a);
  return p;
}
// The key a command is routed by: its first argument, or for a script call (EVAL, EVALSHA, FCALL
// and their _RO forms: name, script, numkeys, keys...) its first key (none: any node).
template <class Args>
std::string routing_key(const Args& args) {
  auto at = [&](std::size_t i) { return std::string_view(*(args.begin() + static_cast<std::ptrdiff_t>(i))); };
  if (args.size() < 2) return {};
  std::string name(at(0));
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "eval" || name == "evalsha" || name == "eval_ro" || name == "evalsha_ro" || name == "fcall" ||
      name == "fcall_ro") {
    if (args.size() < 4 || at(2) == "0") return {};
    return std::string(at(3));
  }
  return std::string(at(1));
}
std::string describe(const reply& r, const char* what) {
  return r.is_error() ? std::string(what) + ": " + r.str : std::string(what);
}
}  // namespace

reply client::command(std::initializer_list<std::string_view> args, std::error_code& ec) {
  if (args.size() == 0) {
    ec = errc::invalid_argument;
    return {};
  }
  return detail::sync_command(*impl_, routing_key(args), encode(args), ec);
}

reply client::command(const std::vector<std::string>& args, std::error_code& ec) {
  if (args.empty()) {
    ec = errc::invalid_argument;
    return {};
  }
  return detail::sync_command(*impl_, routing_key(args), encode(args), ec);
}

reply client::command(std::initializer_list<std::string_view> args) {
  std::error_code ec;
  auto r = command(args, ec);
  if (ec) throw error(ec, describe(r, "client::command"));
  return r;
}

reply client::command(const std::vector<std::string>& args) {
  std::error_code ec;
  auto r = command(args, ec);
  if (ec) throw error(ec, describe(r, "client::command"));
  return r;
}

void client::async_command_impl(std::vector<std::string> args,
                                detail::unique_function<void(std::error_code, reply)> h) {
  // Through run_or_fail like every completion: once the client is closed its executor runs nothing.
  if (args.empty()) return impl_->run_or_fail([h = std::move(h)](bool) mutable { h(errc::invalid_argument, reply{}); });
  auto p = encode(args);
  std::string key = routing_key(args);
  impl_->run_or_fail([impl = impl_, key = std::move(key), p = std::move(p), h = std::move(h)](bool closed) mutable {
    if (closed) return h(errc::client_closed, reply{});
    impl->exec(key, std::move(p), std::move(h));
  });
}

bool client::fenced_set(std::string_view key, std::uint64_t token, std::string_view value, std::error_code& ec) {
  if (key.empty() || token == 0) {
    ec = errc::invalid_argument;
    return false;
  }
  detail::arg_list a;
  a.add(1LL).add(key).add(std::to_string(token)).add(value);
  return detail::sync_call<bool>(*impl_, ec, [impl = impl_.get(), k = std::string(key), a = std::move(a)](auto done) mutable {
    impl->exec_script(k, detail::lua::fenced_set, std::move(a), [done = std::move(done)](std::error_code e, reply r) mutable {
      if (e) return done(e, false);
      if (!r.is_integer()) return done(errc::bad_reply, false);
      done({}, r.integer == 1);
    });
  });
}

bool client::fenced_set(std::string_view key, std::uint64_t token, std::string_view value) {
  std::error_code ec;
  bool ok = fenced_set(key, token, value, ec);
  throw_if(ec, "client::fenced_set");
  return ok;
}

void client::ping(std::error_code& ec) {
  auto r = command({"PING"}, ec);
  if (!ec && !(r.is_string() && r.str == "PONG")) ec = errc::bad_reply;
}

void client::ping() {
  std::error_code ec;
  ping(ec);
  if (ec) throw_if(ec, ("client::ping " + impl_->cfg().redacted_url()).c_str());  // with the server's words
}

// ---- subscriptions -----------------------------------------------------------------------------

struct subscription::state final : detail::subscriber::listener {
  std::shared_ptr<detail::client_impl> impl;
  std::string channel;
  detail::callback_slot<std::string_view, std::string_view> fn;
  // The messages on their way to `fn`, which runs on a delivery thread (runtime/delivery.hpp).
  std::shared_ptr<detail::delivery_queue> queue;
  std::shared_ptr<detail::delivery_pool> pool;
  detail::unique_function<void(std::error_code, bool)> confirmed;
  std::unique_ptr<asio::steady_timer> timer;  // bounds the wait for the confirmation
  detail::subscriber* added = nullptr;  // the subscriber it was added to, which it leaves (not looked up again)

  void complete(std::error_code ec) {
    if (timer) timer->cancel();  // a pending wait would keep the I/O thread (and close) waiting
    if (!confirmed) return;
    auto c = std::move(confirmed);
    confirmed = nullptr;
    c(ec, !ec);
  }

  void on_message(std::string_view, std::string_view payload) override {
    if (queue && pool) queue->push(payload, *pool);
  }
  void on_subscribed() override { complete({}); }
  void on_refused(std::error_code ec, const std::string& text) override {
    detail::scoped_error_text scope(text);
    complete(ec);
  }
};

void subscription::reset() noexcept {
  if (!state_) return;
  auto st = std::move(state_);
  auto impl = st->impl;
  // The promise: once this returns the callback is not running and never runs again (from inside
  // the callback itself, it runs no more once it returns). On the I/O thread a callback in progress
  // is not waited for (it may be waiting for this thread): none starts after it.
  if (st->queue) st->queue->close();
  if (!impl->on_io_thread()) st->fn.set(nullptr);
  // The listener must leave the subscriber on the executor; it stays alive until then.
  // Always posted: called from inside the callback, the state must outlive the call in progress.
  impl->post([st] {
    if (st->added) st->added->remove(st->channel, st.get());
    st->added = nullptr;
  });
}

subscription client::subscribe(std::string channel, std::function<void(std::string_view, std::string_view)> on_message,
                               std::error_code& ec) {
  if (channel.empty()) {
    ec = errc::invalid_argument;
    return {};
  }
  auto st = std::make_shared<subscription::state>();
  st->impl = impl_;
  st->channel = std::move(channel);
  st->fn.set(std::move(on_message));
  st->pool = impl_->delivery();
  if (!st->pool) {
    ec = errc::client_closed;
    return {};
  }
  std::weak_ptr<subscription::state> self = st;
  st->queue = std::make_shared<detail::delivery_queue>(
      [self](std::string_view payload) {
        if (auto s = self.lock()) s->fn.call(s->impl->cfg(), "subscribe callback", s->channel, payload);
      },
      [self](std::uint64_t n) {
        if (auto s = self.lock())
          detail::report_background(s->impl->cfg(), "subscribe", {},
                                    "dropped " + std::to_string(n) + " messages of channel \"" + s->channel +
                                        "\": its callback is slower than the channel (" +
                                        std::to_string(detail::delivery_queue::cap) + " queued at most)");
      });
  auto timeout = impl_->cfg().request_timeout;
  detail::sync_call<bool>(*impl_, ec, [st, timeout](detail::unique_function<void(std::error_code, bool)> done) mutable {
    st->confirmed = std::move(done);
    st->added = &st->impl->topo().sub_for(st->channel);
    st->added->start();
    st->added->add(st->channel, st.get());
    if (!st->confirmed) return;  // confirmed synchronously (channel already subscribed)
    st->timer = std::make_unique<asio::steady_timer>(st->impl->executor(), timeout);
    std::weak_ptr<subscription::state> weak = st;
    st->timer->async_wait([weak](std::error_code e) {
      if (auto s = weak.lock(); s && !e) s->complete(errc::request_timeout);
    });
    st->impl->on_close(weak, [weak] {
      if (auto s = weak.lock()) s->complete(errc::client_closed);
    });
  });
  subscription s(st);
  if (ec) s.reset();
  return s;
}

subscription client::subscribe(std::string channel, std::function<void(std::string_view, std::string_view)> on_message) {
  std::error_code ec;
  auto s = subscribe(std::move(channel), std::move(on_message), ec);
  throw_if(ec, "client::subscribe");
  return s;
}

namespace {
client_stats read_stats(detail::client_impl& impl) {
  client_stats s;
  // The topology's set of connections is fixed once it is made; their counters are atomics.
  impl.topo().for_each_connection([&s](const detail::connection& conn, bool pubsub) {
    auto& c = conn.stats();
    s.protocol_errors += c.protocol_errors;
    if (pubsub) {
      s.pubsub_commands += c.commands;
      s.pubsub_connects += c.connects;
      return;
    }
    s.commands += c.commands;
    s.writes += c.writes;
    s.direct_writes += c.direct_writes;
    s.replies += c.replies;
    s.connects += c.connects;
    s.connection_losses += c.connection_losses;
    s.stalled_drops += c.stalled_drops;
  });
  // A lane's requests are written by the caller, one per write.
  impl.topo().for_each_node([&s](const detail::node& n) {
    auto requests = n.lane_stats().requests.load(std::memory_order_relaxed);
    s.lane_requests += requests;
    s.commands += requests;
    s.writes += requests;
    s.direct_writes += requests;
    s.replies += n.lane_stats().replies.load(std::memory_order_relaxed);
  });
  s.renew_calls = impl.renew_calls;
  s.watchdog_ticks = impl.watchdog_ticks;
  s.renewed_locks = impl.renewed_locks;
  s.held_locks = impl.held_locks;
  s.watched_locks = impl.watched_locks;
  impl.metrics.fill(s.locks);
  impl.topo().for_each_node([&s](const detail::node& n) { s.locks.noscript_fallbacks += n.noscript_fallbacks(); });
  s.locks.redirects = impl.topo().redirects();
  return s;
}
}  // namespace

client_stats client::stats() const { return read_stats(*impl_); }

std::function<std::optional<client_stats>()> client::stats_reader() const {
  if (!impl_) return {};
  return [weak = std::weak_ptr<detail::client_impl>(impl_)]() -> std::optional<client_stats> {
    if (auto impl = weak.lock()) return read_stats(*impl);
    return std::nullopt;
  };
}

}  // namespace redlease
