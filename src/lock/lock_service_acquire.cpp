// SPDX-License-Identifier: MIT
// Acquisition: one attempt, the undo of a grant whose reply never came (and its sweeps), the
// first attempt of an acquisition, and cancellation.
#include "lock/lock_service_state.hpp"

namespace redlease::detail {

// ---- acquire -----------------------------------------------------------------------------------

void lock_service::attempt(const std::shared_ptr<waiter>& w, attempt_handler h) {
  const auto& proto = protocol_of(w->kind);
  ms lease = w->lease.value_or(c_.cfg().watchdog_timeout);
  arg_list a;
  a.buf.reserve(w->name.size() + w->id.size() + 96);
  std::vector<std::string> sweep;
  if (proto.sweeps_settled_keys()) sweep = sweeper_.take(w->name);
  proto.encode_acquire(a, acquire_request{w->name, scratch_field(w->owner), w->id, lease, w->fenced, w->allowance,
                                          w->queue, w->amount, c_.topo().publish_command(), sweep});
  auto sent = clock::now();
  card_.touch(sent);  // ahead of the attempt, on its connection: a grant is never seen without it
  // The waiter outlives its attempt (it is not retried before this reply): what an undo needs is
  // read from it, not copied per attempt.
  c_.exec_script_acked(w->name, proto.acquire_script(w->fenced), std::move(a),
                                      [this, &proto, w, h = std::move(h), sent](std::error_code ec, reply r) mutable {
    auto res = ec && ec != errc::not_replicated ? acquire_result{} : proto.decode_acquire(r);
    w->behind = res.what == acquire_result::kind::busy && res.behind;
    if (ec == errc::not_replicated) {
      if (res.what != acquire_result::kind::granted) return h({}, res.pttl, 0, sent);
      // A grant the replicas did not confirm would not survive a failover: give it back (in order,
      // before any retry), then report it.
      std::string words = error_text_slot();
      return undo_acquire(*w, [h = std::move(h), sent, words = std::move(words)]() mutable {
        scoped_error_text scope(std::move(words));
        h(errc::not_replicated, std::nullopt, 0, sent);
      });
    }
    if (ec) return h(ec, std::nullopt, 0, sent);
    if (res.what == acquire_result::kind::granted) return h({}, std::nullopt, res.token, sent);
    // A busy reply without the holder's TTL is waited like one without expiry (a message, or the poll
    // cap): an empty PTTL below would read as a grant.
    if (res.what == acquire_result::kind::busy) return h({}, res.pttl.value_or(-1), 0, sent);
    if (res.what == acquire_result::kind::would_deadlock) return h(errc::would_deadlock, std::nullopt, 0, sent);
    h(errc::bad_reply, std::nullopt, 0, sent);
  });
}

// One sending of an undo, and of the give-up that goes with it.
struct lock_service::undo_round {
  std::string name;
  lock_kind kind = lock_kind::reentrant;
  owner_id owner = 0;
  std::string id;
  std::string request;
  bool queued = false;  // the attempt may have queued the owner (a fair lock): leave the queue too
  ms allowance{0};      // ... with the allowance it queued with
  long long amount = 1; // the units the attempt took (a semaphore's permits)
  int parts = 0;        // sends not answered yet
  bool resend = false;  // one of them may not have reached the server
  bool later = false;   // ... and the connection fails requests at once for now (a protocol error)
  // This round may run before its attempt: it goes on another connection than the attempt did (it
  // sends again one whose reply never came, or the attempt's connection was lost).
  bool unordered = false;
  clock::time_point sweep_until{};  // the reads that follow an unordered round end by then
  unique_function<void()> then;
};

// The reply of an acquisition never came (the connection dropped, or it timed out and may still run
// late): the script may have granted the lock. Undo that before anyone retries, or the hold would
// leak (a held mutex, or one level too many). The undo queues behind the attempt on the same
// connection, so it runs after it; and it must run before the waiter's next attempt, which is
// queued after it: it goes out as EVAL, because an EVALSHA answered NOSCRIPT (after SCRIPT FLUSH)
// would be resent behind that next attempt and could undo it instead.
void lock_service::undo_acquire(const waiter& w, unique_function<void()> then, bool unordered) {
  undo_acquire(w.name, w.kind, w.owner, w.id, w.queue, w.allowance, std::move(then), {}, unordered, w.amount);
}

// An undo whose own reply never comes is sent again (undo_answered), under the same `request` id.
void lock_service::undo_acquire(const std::string& name, lock_kind kind, owner_id owner, const std::string& id,
                                bool queued, ms allowance, unique_function<void()> then, std::string request,
                                bool unordered, long long amount) {
  auto round = std::make_shared<undo_round>();
  round->name = name;
  round->kind = kind;
  round->owner = owner;
  round->id = id;
  round->queued = queued;
  round->allowance = allowance;
  round->amount = amount;
  round->then = std::move(then);
  auto done = [this, round](std::error_code ec, reply) { undo_answered(round, ec); };
  const auto& proto = protocol_of(kind);
  hold* h = find(name, owner, kind);
  release_request u;
  u.name = name;
  u.field = scratch_field(owner);
  u.id = id;
  round->unordered = unordered || !request.empty();
  if (request.empty()) request = random_token();
  round->request = request;
  ++undos_out_;
  u.request = request;
  // The levels known before the lost grant keep their lease (as release_hold gives it): an outer
  // fixed lease of ten minutes must not come back as the watchdog's 30 s, which nothing renews.
  const bool known = h && !h->lost;
  u.remaining_lease = c_.cfg().watchdog_timeout;
  if (known) u.remaining_lease = lease_of_levels(h->levels, h->levels.size(), u.remaining_lease);
  u.expected = (known ? static_cast<long long>(h->levels.size()) : 0) + 1;
  u.latch_ttl = latch_ttl();
  u.amount = amount;
  arg_list a;
  proto.encode_undo(a, u);
  // Out of memory (noeviction) an undo must still give the grant back, as a release does: with the
  // allow-oom flag once a release has shown that the server takes it. An undo does not probe: on a
  // server that refused the flag it would fail, and nothing would send it again.
  const lua_script* flagged = allow_oom_ == probe::yes ? proto.undo_script(true) : nullptr;
  const lua_script& undo = flagged ? *flagged : *proto.undo_script(false);
  const lua_script* g = proto.give_up_script();
  if (g != nullptr && queued) {
    // The lost attempt may have queued the owner instead (a fair lock): leave the queue too, in
    // order, after the undo, with the allowance it queued with (the deadlines behind it lose that
    // much, no more). A single attempt (queued false) never queues: nothing to leave.
    round->parts = 2;
    send_behind(name, undo, std::move(a), done);
    arg_list b;
    proto.encode_give_up(b, acquire_request{name, scratch_field(owner), id, ms(0), false, allowance, true, 1,
                                            c_.topo().publish_command()});
    return send_behind(name, *g, std::move(b), std::move(done));
  }
  round->parts = 1;
  send_behind(name, undo, std::move(a), std::move(done));
}

// An undo, or a give-up of a queue's place: as EVAL (no NOSCRIPT round that would requeue it
// behind the owner's next attempt), to the node that served the attempt, right behind it.
void lock_service::send_behind(std::string_view key, const lua_script& s, arg_list a, reply_handler h) {
  auto r = keyed_request::script_call(key, s, std::move(a), std::move(h));
  r.always_eval = true;
  r.follows = true;
  c_.exec(std::move(r));
}

// The undo was fire-and-forget: one whose own reply never came (the reconnect that carried it failed
// too, or it timed out) left the grant on the server, held for a lease by nobody, and a re-entry by
// the same owner counted one level too many for good. Once every part of a round has answered, a
// round that may not have reached the server is sent again, at once, so that it stays ahead of the
// owner's later commands on the connection; the same request id makes its latch count it once if
// the first did run. The expected count is read again from the hold as it is then. It goes on until
// the server answers or the client closes; `then` (a cancelled acquisition's completion) does not
// wait for the resends.
void lock_service::undo_answered(const std::shared_ptr<undo_round>& r, std::error_code ec) {
  if (ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::connect_failed ||
      ec == errc::connect_timeout || ec == errc::tls_not_offered_by_server)
    r->resend = true;
  // After a protocol error the connection fails new requests at once until its next attempt: sent
  // again at once, the undo would fail again, in a loop. It waits a reconnect delay instead.
  if (ec == errc::protocol_error) r->later = true;
  if (--r->parts > 0) return;
  --undos_out_;
  auto then = std::move(r->then);
  r->then = nullptr;
  if (r->later && !closed_) {
    auto t = std::make_shared<asio::steady_timer>(c_.executor(), std::max<ms>(c_.cfg().reconnect_max_delay, ms(50)));
    timers_.insert(t);
    t->async_wait([this, t, r, life = c_.life()](std::error_code e) {
      if (e) return;  // cancelled by close(): the engine may be gone
      keep_client keep(life);
      if (!keep) return;
      timers_.erase(t);
      if (!closed_)
        undo_acquire(r->name, r->kind, r->owner, r->id, r->queued, r->allowance, nullptr, r->request, false, r->amount);
    });
  } else if (r->resend && !closed_) {
    undo_acquire(r->name, r->kind, r->owner, r->id, r->queued, r->allowance, nullptr, r->request, false, r->amount);
  } else if (r->unordered && !closed_) {
    const ms step = c_.cfg().request_timeout;
    r->sweep_until = clock::now() + 64 * step;
    sweep_later(r, step, step, 6);
  }
  if (then) then();
}

// An unordered undo went out on a new connection: a resend (the old connection was dropped with the
// attempt and the first undo maybe still in it, in a stalled server's buffers or on the way), or the
// first undo of an attempt whose connection was lost. It can run before the late attempt: it finds
// nothing (and its latch makes a first undo behind the attempt change nothing), so the late grant
// would be held for a lease by nobody. So the owner's count is
// read six times after it (1, 2, 4 ... 32 request timeouts apart, all within 64), and a level the
// client does not know of is given back by a fresh undo. A read waits while something that could
// be a grant whose reply is still coming is under way: a first attempt or an undo of this client's
// (counted, not indexed: the common path pays an increment), or a wait or an unlock of this owner's
// on this lock. A kind with a token per attempt (the mutex) asks for that attempt's token alone,
// which no later grant has.
bool lock_service::undo_may_race(const undo_round& r) const {
  if (protocol_of(r.kind).per_attempt_id()) return false;
  if (first_attempts_out_ > 0 || undos_out_ > 0) return true;
  if (hold* h = find(r.name, r.owner, r.kind); h && h->releasing > 0) return true;
  for (const auto& w : waiters_)
    if (w->owner == r.owner && w->kind == r.kind && w->name == r.name) return true;
  return false;
}

// `wait`: until this read; `step`: the gap before it, doubled after it.
void lock_service::sweep_later(std::shared_ptr<undo_round> r, ms wait, ms step, int left) {
  if (closed_ || left <= 0 || clock::now() >= r->sweep_until) return;
  auto t = std::make_shared<asio::steady_timer>(c_.executor(), wait);
  timers_.insert(t);
  t->async_wait([this, t, r = std::move(r), step, left, life = c_.life()](std::error_code e) mutable {
    if (e) return;  // cancelled by close(): the engine may be gone
    keep_client keep(life);
    if (!keep) return;
    timers_.erase(t);
    if (closed_) return;
    // Busy: looked at again a little later; the steps after it keep their length.
    if (undo_may_race(*r)) return sweep_later(std::move(r), std::max<ms>(step / 4, ms(10)), step, left);
    const auto& proto = protocol_of(r->kind);
    std::string cmd;
    proto.encode_hold_count(cmd, r->name, scratch_field(r->owner), r->id);
    c_.exec(r->name, std::move(cmd), [this, r, step, left, &proto, life](std::error_code ec, reply rep) mutable {
      keep_client keep(life);
      if (!keep || closed_) return;
      auto n = ec ? std::nullopt : proto.decode_hold_count(rep, r->id);
      if (n && !undo_may_race(*r)) {
        const hold* h = find(r->name, r->owner, r->kind);
        const long long known =
            h && !h->lost && (!proto.per_attempt_id() || h->token == r->id) ? static_cast<long long>(h->levels.size()) : 0;
        if (*n > known) undo_acquire(r->name, r->kind, r->owner, r->id, false, r->allowance, nullptr, {}, false, r->amount);
      }
      sweep_later(std::move(r), 2 * step, 2 * step, left - 1);
    }, true);
  });
}

// A grant whose reply comes after its own lease ran out (the process was frozen, or the reply was
// very late) may already have expired on the server and gone to someone else: it is worth nothing.
// It is undone (in order, before the next attempt) and treated as contention.
// A grant ends the acquisition. A re-entry whose hold was found lost meanwhile (on_acquired says
// so) is given back, and the caller hears lock_lost, as a re-entry that starts after the loss does.
void lock_service::finish_grant(const std::shared_ptr<waiter>& w, std::uint64_t fence, clock::time_point sent) {
  if (protocol_of(w->kind).grant_is_hold() &&
      !on_acquired(w->name, w->kind, w->owner, w->lease, w->id, fence, sent, w->slot)) {
    undo_acquire(*w);
    return finish_waiter(w, errc::lock_lost, false);
  }
  if (auto mark = protocol_of(w->kind).grant_mark(w->name, w->id); !mark.empty()) sweeper_.settled(w->name, std::move(mark));
  finish_waiter(w, {}, true);
}

bool lock_service::stale_grant(waiter& w, clock::time_point sent) {
  if (clock::now() < sent + w.lease.value_or(c_.cfg().watchdog_timeout)) return false;
  undo_acquire(w);
  return true;
}

// A queued waiter calls again at least every poll cap, so its declared allowance need not cover its
// whole wait: it only has to outlast the gap between two calls. Kept short, it bounds how long a
// waiter that died without giving up blocks everyone behind it. A zero wait (one attempt, never
// queued) declares none.

void lock_service::acquire(std::string name, lock_kind kind, owner_id owner, std::optional<ms> wait,
                           std::optional<ms> lease, std::shared_ptr<lost_slot> slot, const wait_strategy& how,
                           bool_handler h, std::shared_ptr<acquire_cancel> cancel, bool fenced, long long amount) {
  // Ended before any waiter was made: counted here (a waiter counts in finish_waiter).
  // (The prefix's counters, found now: `name` is moved from before a parked re-entry ends.)
  auto end = [this, kind, by_prefix = c_.cfg().metrics ? c_.metrics.prefixes.cell(name) : nullptr](
                 bool_handler& done, std::error_code ec) {
    note_acquisition(kind, ec, false, nullptr, by_prefix);
    done(ec, false);
  };
  if (closed_) return end(h, errc::client_closed);
  if (amount < 1) return end(h, errc::invalid_argument);
  if (cancel && cancel->requested) return end(h, errc::operation_aborted);
  if (name.empty() || (wait && !valid_duration(*wait, true)) || (lease && !valid_duration(*lease, false)))
    return end(h, errc::invalid_argument);
  if (fenced && !protocol_of(kind).fencing()) return end(h, errc::invalid_argument);
  if (!lost_.empty()) prune_lost(clock::now());
  if (auto* held = find(name, owner, kind)) {
    // The owner still holds the lock as far as it knows. If it was lost, re-entering (or locking the
    // mutex again) must not silently start a new hold in the middle of a critical section that is
    // already broken: the owner hears lock_lost, and unlocks to start afresh.
    if (held->lost) return end(h, errc::lock_lost);
    if (!protocol_of(kind).reentrant()) return end(h, errc::would_deadlock);
    if (held->levels.size() >= protocol_of(kind).max_levels()) return end(h, errc::invalid_argument);
    // An unlock of this hold is out, and is sent again (expecting the count it leaves) if its reply
    // is late. A re-entry sent now would run between the two on the server: the retry would find
    // the count it expects taken by the re-entry and take a second level. So it waits until the
    // unlock is settled; its wait counts from now.
    // A cancellation meanwhile completes it at once; the handler is then gone when the unlock settles.
    // So does its wait, plus the request timeout an attempt would have had: the unlock may go on
    // retrying for several request timeouts against a stalled server, and a try_lock(0) must not
    // wait out all of them (request_timeout, nothing sent).
    if (held->releasing > 0) {
      auto parked = std::make_shared<bool_handler>(std::move(h));
      std::shared_ptr<asio::steady_timer> timer;
      if (wait) {
        timer = std::make_shared<asio::steady_timer>(c_.executor(), *wait + c_.cfg().request_timeout);
        timers_.insert(timer);
        timer->async_wait([this, t = std::weak_ptr(timer), parked, end, life = c_.life()](std::error_code e) {
          if (e) return;  // cancelled by close() or settled: the engine may be gone
          keep_client keep(life);
          if (!keep) return;
          if (auto timer = t.lock()) timers_.erase(timer);
          if (auto done = std::move(*parked)) {
            scoped_error_text words("an unlock of this hold is still unanswered: the re-entry was not sent");
            end(done, errc::request_timeout);
          }
        });
      }
      auto settle = [this, timer] {
        if (!timer) return;
        timer->cancel();
        timers_.erase(timer);
      };
      if (cancel) {
        cancel->parked = [parked, settle, end] {
          settle();
          if (auto done = std::move(*parked)) end(done, errc::operation_aborted);
        };
      }
      after_release_[held].push_back([this, name = std::move(name), kind, owner, wait, lease, slot = std::move(slot),
                                      how = how, parked, cancel = std::move(cancel), fenced, amount, settle,
                                      since = clock::now()]() mutable {
        if (cancel) cancel->parked = nullptr;
        settle();
        if (!*parked) return;
        if (wait) wait = std::max(ms(0), *wait - std::chrono::duration_cast<ms>(clock::now() - since));
        acquire(std::move(name), kind, owner, wait, lease, std::move(slot), how, std::move(*parked),
                std::move(cancel), fenced, amount);
      });
      return;
    }
  }
  auto w = std::make_shared<waiter>(c_.executor());
  w->started = clock::now();
  w->name = std::move(name);
  w->kind = kind;
  w->owner = owner;
  w->lease = lease;
  if (wait) w->deadline = clock::now() + *wait;
  w->slot = std::move(slot);
  w->how = how;
  // A delay beyond the longest duration is "as long as it takes": clamped, so that adding it to
  // the clock cannot overflow.
  w->how.initial = std::min(w->how.initial, max_duration);
  w->how.max = std::min(w->how.max, max_duration);
  w->next_delay = w->how.initial;
  w->done = std::move(h);
  w->fenced = fenced;
  w->amount = amount;
  w->allowance = queue_allowance(wait);
  w->queue = !(wait && wait->count() == 0);
  if (protocol_of(kind).per_attempt_id()) w->id = protocol_of(kind).attempt_id(amount);
  if (cancel) cancel->waiter = w;
  w->trying = true;
  ++first_attempts_out_;
  attempt(w, [this, w](std::error_code ec, std::optional<long long> pttl, std::uint64_t fence, clock::time_point sent) mutable {
            w->trying = false;
            --first_attempts_out_;
            if (closed_) return end_attempt_after_close(w, ec, !ec && !pttl);
            if (outcome_unknown(ec)) undo_acquire(*w, nullptr, attempt_left_its_connection(ec));
            if (end_if_cancelled(w, !ec && !pttl)) return;
            // The first attempt reports errors as they are (an unreachable server fails fast), except
            // a refusal that passes, which an acquisition with time left waits out.
            if (ec && refused_for_now(ec, c_.cfg(), c_.topo().promotes_replicas()) && !(w->deadline && clock::now() >= *w->deadline)) {
              w->last_error = ec;
              w->last_error_text = error_text_slot();
              return start_waiter(w, std::nullopt);
            }
            if (ec) return finish_waiter(w, ec, false);
            if (!pttl && stale_grant(*w, sent)) pttl = 0;
            if (!pttl) return finish_grant(w, fence, sent);
            if (w->deadline && clock::now() >= *w->deadline) return finish_waiter(w, {}, false);
            start_waiter(w, pttl);
          });
}


void lock_service::cancel_acquire(acquire_cancel& x) {
  x.requested = true;
  if (auto parked = std::move(x.parked)) return parked();  // moved from: empty
  auto w = std::static_pointer_cast<waiter>(x.waiter.lock());
  if (!w || w->finished || w->cancelled) return;
  w->cancelled = true;
  if (!w->trying) finish_waiter(w, errc::operation_aborted, false);
}

// After an attempt's reply: a cancelled acquisition ends here. A grant the attempt brought is given
// back first (in order, before anything else this owner sends), so a cancelled acquisition never
// leaves the lock held; an attempt whose outcome is unknown was undone by the caller already.
bool lock_service::end_if_cancelled(const std::shared_ptr<waiter>& w, bool granted) {
  if (!w->cancelled) return false;
  if (!granted) {
    finish_waiter(w, errc::operation_aborted, false);
    return true;
  }
  // Completes once the grant is given back, so that the caller never sees the lock still held.
  undo_acquire(*w,
               [this, w] { finish_waiter(w, closed_ ? errc::client_closed : errc::operation_aborted, false); });
  return true;
}

// The client closed while this attempt was out (close() lets what is out be answered for
// config::close_timeout): a grant now has no holder, and is given back like one whose outcome is
// unknown. A queued kind's place is given back once: by finish_waiter, after the undo, for a first
// attempt (close() did not know of it); here, for a waiter close() finished already, whose attempt
// on the lane can run after the give-up close() sent on the node's connection and queue it again.
void lock_service::end_attempt_after_close(const std::shared_ptr<waiter>& w, std::error_code ec, bool granted) {
  const bool leave_here = w->finished;
  if (granted || outcome_unknown(ec)) {
    undo_acquire(w->name, w->kind, w->owner, w->id, w->queue && leave_here, w->allowance, nullptr, {}, false, w->amount);
  } else if (!ec && leave_here) {
    give_up(*w);
  }
  finish_waiter(w, errc::client_closed, false);
}

// Leaves a fair lock's queue (a kind whose waiters queue on the server), so that the waiters behind
// are not held up until this one's deadline. Idempotent; nothing for the other kinds.

}  // namespace redlease::detail
