// SPDX-License-Identifier: MIT
// The RedLock driver (redlock_impl): the I/O of a RedLock mutex over N independent masters, a
// switch over the actions of the decision core (redlock_fsm.hpp); the public handle is in
// redlock_handle.cpp. docs/redlock.md, "The composition".
#include "multi/redlock_impl.hpp"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "lock/naming.hpp"
#include "random.hpp"
#include "redlease_lua.hpp"

namespace redlease::detail {
namespace {

using namespace std::chrono_literals;

redlock_clock::time_point now() { return redlock_clock::now(); }

// redlock_acquire.lua: 1 granted, 2 ours, 0 taken; redlock_fenced_acquire.lua: {1, token},
// {2, token}, 0.
node_answer acquire_answer(std::error_code ec, const reply& r) {
  if (ec) return node_answer::unknown;
  long long state = 0;
  if (r.is_integer())
    state = r.integer;
  else if (r.is_array() && r.elements.size() == 2 && r.elements[0].is_integer() && r.elements[0].integer != 0)
    state = r.elements[0].integer;
  else
    return node_answer::unknown;
  switch (state) {
    case 1: return node_answer::granted;
    case 2: return node_answer::ours;
    case 0: return node_answer::taken;
    default: return node_answer::unknown;
  }
}

// redlock_extend.lua and redlock_release.lua: 1 granted, 0 missing, -1 taken.
node_answer compare_answer(std::error_code ec, const reply& r) {
  if (ec || !r.is_integer()) return node_answer::unknown;
  switch (r.integer) {
    case 1: return node_answer::granted;
    case 0: return node_answer::missing;
    case -1: return node_answer::taken;
    default: return node_answer::unknown;
  }
}

// A node's refusal that another attempt would meet again: the key's type, the ACL, the script.
// Timeouts, lost connections and an out-of-memory server pass.
bool definitive(std::error_code ec) {
  return ec == errc::wrong_type || ec == errc::no_permission || ec == errc::unknown_command ||
         ec == errc::server_error;
}

lost_reason public_reason(redlock_loss l) {
  switch (l) {
    case redlock_loss::taken: return lost_reason::taken;
    case redlock_loss::deleted: return lost_reason::deleted;
    case redlock_loss::expired: return lost_reason::expired;
    case redlock_loss::quorum: return lost_reason::quorum;
  }
  return lost_reason::quorum;
}

redlock_clock::duration default_ttl(const node_set& nodes, const redlock_options& o) {
  if (o.ttl.count() > 0) return o.ttl;
  return nodes.home_cfg().watchdog_timeout;
}

redlock_clock::duration default_node_timeout(redlock_clock::duration ttl, const redlock_options& o) {
  if (o.node_timeout.count() > 0) return o.node_timeout;
  return std::max<redlock_clock::duration>(50ms, ttl / 100);
}

}  // namespace

redlock_impl::redlock_impl(node_set nodes, std::string n, const redlock_options& o)
    : name(std::move(n)),
      ttl(default_ttl(nodes, o)),
      node_timeout(default_node_timeout(ttl, o)),
      fenced(o.fencing_tokens),
      nodes_(std::move(nodes)),
      backoff_{o.retry_first, o.retry_cap},
      retake_(o.retake),
      interval_(ttl / 3),
      timer_(nodes_.home_executor()),
      expiry_(nodes_.home_executor()),
      tokens_(nodes_.size(), 0) {}

bool redlock_impl::blocking_forbidden() const noexcept { return nodes_.blocking_forbidden(); }

bool redlock_impl::current(std::uint64_t op) const {
  std::lock_guard<std::mutex> g(mu_);
  return op == op_;
}

void redlock_impl::closed_for_good() {
  std::lock_guard<std::mutex> g(mu_);
  phase_ = phase::closed;
  ++op_;
}

asio::any_io_executor redlock_impl::executor() const noexcept { return nodes_.home_executor(); }

bool redlock_impl::home_closed() const noexcept { return nodes_.home_closed(); }

std::chrono::microseconds redlock_impl::spin_budget() const noexcept {
  return nodes_.home_cfg().sync_wait == sync_wait_policy::latency_first ? std::chrono::microseconds(200)
                                                                        : std::chrono::microseconds(0);
}

redlock_clock::time_point redlock_impl::valid_until() const {
  std::lock_guard<std::mutex> g(mu_);
  return phase_ == phase::held && !lost_ ? valid_until_ : time_point{};
}

bool redlock_impl::valid() const {
  std::lock_guard<std::mutex> g(mu_);
  return phase_ == phase::held && !lost_ && now() < valid_until_;
}

std::string redlock_impl::value() const {
  std::lock_guard<std::mutex> g(mu_);
  return value_;
}

std::stop_token redlock_impl::lost_token() const {
  std::lock_guard<std::mutex> g(mu_);
  return phase_ == phase::held ? lost_src_.get_token() : std::stop_token{};
}

std::vector<redlock_token> redlock_impl::fencing_tokens() const {
  std::vector<redlock_token> out;
  std::lock_guard<std::mutex> g(mu_);
  if (phase_ != phase::held || lost_) return out;
  for (std::size_t i = 0; i < tokens_.size(); ++i)
    if (tokens_[i] != 0) out.push_back({i, tokens_[i]});
  return out;
}

const lua_script& redlock_impl::acquire_script() const {
  return fenced ? lua::redlock_fenced_acquire : lua::redlock_acquire;
}

arg_list redlock_impl::acquire_args() const {
  if (!fenced) return args_with_ttl();
  arg_list a;
  a.add(2).add(name).add(tagged("redlease_redlock_token", name)).add(value_).add(
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(ttl).count()));
  return a;
}

void redlock_impl::note_token(std::uint64_t op, std::size_t node, const reply& r) {
  if (!fenced || !r.is_array() || r.elements.size() != 2 || !r.elements[1].is_string()) return;
  std::uint64_t t = 0;
  for (char ch : r.elements[1].str) {
    if (ch < '0' || ch > '9' || t > (std::uint64_t{1} << 53)) return;  // the script's tokens are below 2^53
    t = t * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  std::lock_guard<std::mutex> g(mu_);
  if (op == op_) tokens_[node] = t;
}

void redlock_impl::forget_token(std::size_t node) {
  std::lock_guard<std::mutex> g(mu_);
  tokens_[node] = 0;
}

void redlock_impl::post_home(std::function<void()> fn) { nodes_.post_home(std::move(fn)); }

void redlock_impl::run_home_or(std::function<void()> fn, const std::function<void()>& closed) {
  // A caller on a thread of its own starts the work itself when the home I/O thread is idle: the
  // requests go out on this thread, and no thread is woken for them (the blocking calls' latency).
  if (nodes_.run_home_here(fn)) return;
  post_home_or(std::move(fn), closed);
}

void redlock_impl::post_home_or(std::function<void()> fn, const std::function<void()>& closed) {
  if (!nodes_.post_home(std::move(fn))) complete_inline([&] { closed(); });
}

arg_list redlock_impl::args_with_ttl() const {
  arg_list a;
  a.add(1).add(name).add(value_).add(static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(ttl).count()));
  return a;
}

// One request to one node, answered once on the home executor: its reply, or request_timeout
// after node_timeout (a late reply is then read and dropped by the node's connection).
//
// The request's state (its timer on the home executor) is owned by the timer's wait alone, which
// ends at the answer, the timeout or the home's close; the reply handler, kept in the node's
// connection (which may outlive the home client), holds it weakly: a timer must not be destroyed
// after its io_context.
void redlock_impl::send(std::size_t node, const lua_script& s, arg_list args, answer_fn on_answer) {
  struct pending {
    explicit pending(const asio::any_io_executor& ex) : timer(ex) {}
    bool done = false;
    asio::steady_timer timer;
    answer_fn fn;
  };
  auto p = std::make_shared<pending>(nodes_.home_executor());
  p->fn = std::move(on_answer);
  auto answer = [](const std::shared_ptr<pending>& q, std::error_code ec, const reply& r) {
    if (q->done) return;
    q->done = true;
    q->timer.cancel();
    auto fn = std::move(q->fn);
    fn(ec, r);
  };
  // Pending timers keep the home client's I/O thread running: a close cancels them.
  std::erase_if(timeouts_, [](const auto& t) { return t.expired(); });
  timeouts_.emplace_back(std::shared_ptr<asio::steady_timer>(p, &p->timer));
  p->timer.expires_after(node_timeout);
  p->timer.async_wait([p, answer](std::error_code ec) {
    if (!ec) answer(p, errc::request_timeout, reply{});
  });
  std::weak_ptr<pending> wp = p;
  // Weak: a reply that outlives the handle (its client closed) keeps nothing alive.
  std::weak_ptr<redlock_impl> w = weak_from_this();
  bool posted = nodes_.exec_script(node, name, s, std::move(args), [w, wp, answer](std::error_code ec, reply r) mutable {
    // The server's words travel with its error to the home thread.
    std::string words = ec ? error_text_slot() : std::string();
    if (auto self = w.lock())
      self->post_home([wp, answer, ec, r = std::move(r), words = std::move(words)]() mutable {
        auto q = wp.lock();
        if (!q) return;
        scoped_error_text scope(std::move(words));
        answer(q, ec, r);
      });
  });
  if (!posted)
    post_home([wp, answer] {
      if (auto q = wp.lock()) answer(q, errc::client_closed, reply{});
    });
}

void redlock_impl::arm(asio::steady_timer& t, time_point at, std::function<void()> fn) {
  std::uint64_t& gen = &t == &timer_ ? timer_gen_ : expiry_gen_;
  std::uint64_t mine = ++gen;
  t.expires_at(at);
  t.async_wait([w = weak_from_this(), &gen, mine, fn = std::move(fn)](std::error_code ec) {
    auto self = w.lock();
    if (ec || !self || gen != mine) return;
    fn();
  });
}

// --- acquisition -----------------------------------------------------------------------------

void redlock_impl::acquire(time_point wait_until, acquire_done done, std::shared_ptr<redlock_cancel> cancel) {
  std::uint64_t op;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (phase_ != phase::idle) {
      std::error_code ec = phase_ == phase::closed ? std::error_code(errc::client_closed)
                                                   : std::error_code(errc::would_deadlock);
      post_home_or([done, ec] { done(ec, false); }, [done, ec] { done(ec, false); });
      return;
    }
    phase_ = phase::acquiring;
    op = ++op_;
    lost_ = false;
    value_ = random_token();  // one value for every node and every attempt of this acquisition
    lost_src_ = std::stop_source{};
  }
  run_home_or(
      [self = shared_from_this(), op, wait_until, done, cancel = std::move(cancel)]() mutable {
        if (!self->close_hook_) {
          self->close_hook_ = true;
          std::weak_ptr<redlock_impl> w = self;
          self->nodes_.on_home_close(w, [w] {
            if (auto s = w.lock()) s->on_home_closed();
          });
        }
        self->acquire_done_ = std::move(done);
        self->cancel_ = std::move(cancel);
        self->wait_until_ = wait_until;
        self->acq_.emplace(self->nodes_.size(), self->ttl, self->backoff_);
        self->start_attempt(op);
      },
      [self = shared_from_this(), done] {
        self->closed_for_good();
        done(errc::client_closed, false);
      });
}

void redlock_impl::start_attempt(std::uint64_t op) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (op != op_) return;
    std::fill(tokens_.begin(), tokens_.end(), 0);
  }
  refusals_ = 0;
  refusal_ = {};
  refusal_words_.clear();
  auto a = acq_->start(now());
  arm(timer_, acq_->decide_by(), [this, op] {
    if (current(op)) on_acquire(op, acq_->resume(now()));
  });
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    send(i, acquire_script(), acquire_args(), [w = weak_from_this(), op, a, i](std::error_code ec, const reply& r) {
      auto self = w.lock();
      if (!self || !self->current(op) || !self->acq_) return;
      if (a == self->acq_->attempt()) {
        self->note_token(op, i, r);  // a late grant is ours too
        if (definitive(ec) && self->refusals_++ == 0) {
          self->refusal_ = ec;
          self->refusal_words_ = error_text_slot();
        }
      }
      self->on_acquire(op, self->acq_->resume(a, i, acquire_answer(ec, r), now()));
    });
}

void redlock_impl::on_acquire(std::uint64_t op, redlock_acquire_fsm::next n) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (op != op_ || phase_ != phase::acquiring) return;
  }
  switch (n) {
    case redlock_acquire_fsm::next::wait:
    case redlock_acquire_fsm::next::none:
      return;
    case redlock_acquire_fsm::next::acquired: {
      ++timer_gen_;
      timer_.cancel();
      ext_.emplace(nodes_.size(), ttl, acq_->valid_until(), retake_);
      {
        std::lock_guard<std::mutex> g(mu_);
        phase_ = phase::held;
        valid_until_ = acq_->valid_until();
      }
      arm_watchdog(op);
      finish_acquire({}, true);
      return;
    }
    case redlock_acquire_fsm::next::release_all: {
      ++timer_gen_;
      timer_.cancel();
      release_everywhere();
      if (refusals_ > nodes_.size() - acq_->quorum()) {
        // Refusals another attempt would meet again stand in the way of a majority: said now, in
        // the server's words, rather than retried until the wait ends.
        {
          std::lock_guard<std::mutex> g(mu_);
          phase_ = phase::idle;
        }
        scoped_error_text scope(refusal_words_);
        finish_acquire(refusal_, false);
        return;
      }
      auto d = acq_->after_release(now(), wait_until_, random_unit());
      if (!d.again) {
        {
          std::lock_guard<std::mutex> g(mu_);
          phase_ = phase::idle;
        }
        finish_acquire({}, false);
        return;
      }
      arm(timer_, now() + d.delay, [this, op] { start_attempt(op); });
      return;
    }
  }
}

void redlock_impl::finish_acquire(std::error_code ec, bool ok) {
  auto done = std::move(acquire_done_);
  acquire_done_ = nullptr;
  cancel_.reset();
  if (done) done(ec, ok);
}

void redlock_impl::cancel(const std::shared_ptr<redlock_cancel>& x) {
  post_home([self = shared_from_this(), x] {
    if (!self->acquire_done_ || self->cancel_ != x) return;  // completed already: nothing to cancel
    {
      std::lock_guard<std::mutex> g(self->mu_);
      if (self->phase_ != phase::acquiring) return;
      self->phase_ = phase::idle;
      ++self->op_;  // the attempt's answers and timers stop here
    }
    ++self->timer_gen_;
    self->timer_.cancel();
    // Behind each node's SET on its connection: a grant on the wire is deleted as it lands.
    self->release_everywhere();
    self->acq_.reset();
    self->finish_acquire(errc::operation_aborted, false);
  });
}

void redlock_impl::on_home_closed() {
  closed_for_good();
  ++timer_gen_;
  ++expiry_gen_;
  timer_.cancel();
  expiry_.cancel();
  for (auto& t : timeouts_)
    if (auto timer = t.lock()) timer->cancel();
  timeouts_.clear();
  // The home executor runs nothing more: the completions go to their handlers' own executors.
  complete_inline([&] {
    finish_acquire(errc::client_closed, false);
    finish_release(errc::client_closed);
  });
}

// Compare-and-delete on every node, answers ignored: keys not deleted expire with their TTL.
// Each node's connection sends it behind that node's earlier requests of this handle.
void redlock_impl::release_everywhere() {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    arg_list a;
    a.add(1).add(name).add(value_);
    send(i, lua::redlock_release, std::move(a), [](std::error_code, const reply&) {});
  }
}

// --- the watchdog ------------------------------------------------------------------------------

void redlock_impl::arm_watchdog(std::uint64_t op) {
  arm(timer_, ext_->due(now(), interval_), [this, op] { start_round(op); });
  arm(expiry_, ext_->valid_until(), [this, op] {
    if (current(op) && ext_) on_extend(op, ext_->round(), 0, ext_->resume(now()));
  });
}

void redlock_impl::start_round(std::uint64_t op) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (op != op_ || phase_ != phase::held || lost_) return;
  }
  auto n = ext_->start(now());
  auto round = ext_->round();
  if (n != redlock_extend_fsm::next::wait) return on_extend(op, round, 0, n);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    arg_list a = args_with_ttl();
    send(i, lua::redlock_extend, std::move(a), [w = weak_from_this(), op, round, i](std::error_code ec, const reply& r) {
      auto self = w.lock();
      if (!self || !self->current(op) || !self->ext_) return;
      auto ans = compare_answer(ec, r);
      if (ans == node_answer::taken) self->forget_token(i);
      self->on_extend(op, round, i, self->ext_->resume(round, i, ans, now()));
    });
  }
}

void redlock_impl::on_extend(std::uint64_t op, std::uint64_t round, std::size_t node, redlock_extend_fsm::next n) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (op != op_ || phase_ != phase::held || lost_) return;
  }
  switch (n) {
    case redlock_extend_fsm::next::wait:
    case redlock_extend_fsm::next::none:
      return;
    case redlock_extend_fsm::next::retake:
      forget_token(node);
      send(node, acquire_script(), acquire_args(), [w = weak_from_this(), op, round, node](std::error_code ec, const reply& r) {
        auto self = w.lock();
        if (!self || !self->current(op) || !self->ext_) return;
        self->note_token(op, node, r);
        self->on_extend(op, round, node, self->ext_->resume(round, node, acquire_answer(ec, r), now()));
      });
      return;
    case redlock_extend_fsm::next::extended:
      {
        std::lock_guard<std::mutex> g(mu_);
        valid_until_ = ext_->valid_until();
      }
      arm_watchdog(op);
      return;
    case redlock_extend_fsm::next::not_extended:
      arm(timer_, ext_->due(now(), interval_), [this, op] { start_round(op); });
      return;
    case redlock_extend_fsm::next::lost: {
      ++timer_gen_;
      ++expiry_gen_;
      timer_.cancel();
      expiry_.cancel();
      lost_info info;
      info.name = name;
      info.reason = public_reason(ext_->loss().value_or(redlock_loss::expired));
      std::stop_source src;
      {
        std::lock_guard<std::mutex> g(mu_);
        lost_ = true;
        src = lost_src_;
      }
      release_everywhere();  // wherever our value is left
      src.request_stop();
      lost_cb_.call(nodes_.home_cfg(), "redlock on_lost", info);
      return;
    }
  }
}

// --- release -----------------------------------------------------------------------------------

void redlock_impl::release(release_done done) {
  std::uint64_t op;
  bool was_lost;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (phase_ != phase::held) {
      std::error_code ec = phase_ == phase::closed ? std::error_code(errc::client_closed)
                                                   : std::error_code(errc::not_owner);
      post_home_or([done, ec] { done(ec); }, [done, ec] { done(ec); });
      return;
    }
    was_lost = lost_;
    phase_ = phase::releasing;
    op = ++op_;
  }
  run_home_or([self = shared_from_this(), op, was_lost, done]() mutable {
    ++self->timer_gen_;
    ++self->expiry_gen_;
    self->timer_.cancel();
    self->expiry_.cancel();
    self->ext_.reset();
    if (was_lost) {  // told to on_lost, released then
      {
        std::lock_guard<std::mutex> g(self->mu_);
        if (op == self->op_) self->phase_ = phase::idle;
      }
      return done(errc::lock_lost);
    }
    self->do_release(op, std::move(done));
  }, [self = shared_from_this(), done] {
    self->closed_for_good();
    done(errc::client_closed);
  });
}

void redlock_impl::do_release(std::uint64_t op, release_done done) {
  struct state {
    explicit state(std::size_t n) : fsm(n) {}
    redlock_release_fsm fsm;
    std::error_code first_error;
  };
  auto st = std::make_shared<state>(nodes_.size());
  release_done_ = std::move(done);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    arg_list a;
    a.add(1).add(name).add(value_);
    send(i, lua::redlock_release, std::move(a), [self = shared_from_this(), st, op, i](std::error_code ec, const reply& r) {
      auto ans = compare_answer(ec, r);
      if (ans == node_answer::unknown && !st->first_error)
        st->first_error = ec ? ec : std::error_code(errc::bad_reply);
      if (st->fsm.resume(i, ans) != redlock_release_fsm::next::done) return;
      {
        std::lock_guard<std::mutex> g(self->mu_);
        if (op == self->op_) self->phase_ = phase::idle;
      }
      switch (st->fsm.outcome()) {
        case redlock_release_fsm::result::released: return self->finish_release({});
        case redlock_release_fsm::result::not_held: return self->finish_release(errc::lock_lost);
        case redlock_release_fsm::result::unknown: return self->finish_release(st->first_error);
      }
    });
  }
}

void redlock_impl::finish_release(std::error_code ec) {
  auto done = std::move(release_done_);
  release_done_ = nullptr;
  if (done) done(ec);
}

void redlock_impl::shutdown() noexcept {
  lost_cb_.set({});  // once this returns, on_lost is not running and never runs again
  bool held;
  {
    std::lock_guard<std::mutex> g(mu_);
    held = phase_ == phase::held && !lost_;
    phase_ = phase::closed;
    ++op_;
  }
  try {
    post_home([self = shared_from_this(), held] {
      ++self->timer_gen_;
      ++self->expiry_gen_;
      self->timer_.cancel();
      self->expiry_.cancel();
      if (held) self->release_everywhere();
      self->ext_.reset();
      self->finish_acquire(errc::operation_aborted, false);
    });
  } catch (...) {
    // Out of memory: the keys expire with their TTL.
  }
}

}  // namespace redlease::detail
