// SPDX-License-Identifier: MIT
// Waiting: channels and wake-ups, polling and backoff, retries, giving up, the keyspace probe.
#include "lock/lock_service_state.hpp"

namespace redlease::detail {

ms lock_service::queue_allowance(std::optional<ms> wait) const {
  if (wait && wait->count() == 0) return ms(0);
  const auto& cfg = c_.cfg();
  const ms floor = std::max<ms>(ms(1000), 3 * cfg.mutex_poll_cap);
  const ms cap = std::max(floor, std::min<ms>(cfg.queue_allowance, ms(300000)));
  return wait ? std::min(*wait, cap) : cap;
}

// A poll-capped waiter re-checks every mutex_poll_cap for a free lock that nobody announced. One
// queued behind another waiter cannot be handed the lock before that one: it calls again only to
// keep its place and, ten caps at the most after the head left, to find itself at the head. N
// waiters in one queue cost the server about 10 + N calls a second instead of 10 N.
// Keeping its place: each call moves its deadline to at least now + allowance, and a grant to
// another waiter lowers it to no less than now + that holder's lease. Calling three times per
// allowance and per lease (its own, standing for the other clients') keeps the deadline ahead of
// the next call, even when a holder dies and nobody announces the free lock.
ms lock_service::poll_interval(const waiter& w) const {
  const auto& cfg = c_.cfg();
  const ms cap = cfg.mutex_poll_cap;
  if (!w.behind || w.allowance.count() == 0) return cap;
  const ms lease = w.lease.value_or(cfg.watchdog_timeout);
  return std::max(cap, std::min({10 * cap, w.allowance / 3, lease / 3}));
}


// ---- waiting -----------------------------------------------------------------------------------

void lock_service::start_waiter(std::shared_ptr<waiter> w, std::optional<long long> pttl) {
  waiters_.insert(w);
  w->on_card = card_.wait_started(w->name, w->kind);
  const auto& proto = protocol_of(w->kind);
  std::string channel = proto.waiter_channel(w->name, scratch_field(w->owner));
  if (proto.poll_capped()) w->poll_capped = true;
  if (!w->how.use_backoff && !refused_channels_.empty() && channel_refused_lately(channel))
    poll_instead(*w);
  if (w->how.use_backoff) return waiter_sleep(w, pttl);  // no channel: retries on a schedule
  auto go = [this, w, pttl, channel = std::move(channel)] {
    if (w->finished) return;
    join_channel(w, channel, false);
    if (protocol_of(w->kind).keyspace_wake()) {
      if (keyspace_ == keyspace::on) {
        std::string ch = "__keyspace@" + std::to_string(c_.cfg().database) + "__:" + w->name;
        join_channel(w, ch, true);
      } else {
        w->poll_capped = true;
      }
    }
    if (!w->finished && !w->trying) waiter_sleep(w, pttl);
  };
  if (protocol_of(w->kind).keyspace_wake()) with_keyspace_state(w->name, std::move(go));
  else go();
}

void lock_service::join_channel(const std::shared_ptr<waiter>& w, const std::string& channel, bool keyspace) {
  auto it = channels_.find(channel);
  bool fresh = it == channels_.end();
  if (fresh) {
    auto e = std::make_unique<channel_entry>();
    e->svc = this;
    e->channel = channel;
    e->keyspace = keyspace;
    if (!keyspace) e->proto = &protocol_of(w->kind);
    e->lingers = !keyspace && protocol_of(w->kind).linger();
    it = channels_.emplace(channel, std::move(e)).first;
  }
  channel_entry& e = *it->second;
  // A lingering channel that nobody waited on: a message that came since this waiter's attempt
  // (it was busy then) was missed, so the waiter tries again at once.
  bool retry = e.waiters.empty() && e.missed;
  e.missed = false;
  if (retry) {
    asio::post(c_.executor(), [this, w, life = c_.life()] {
      // close() finishes every waiter: check the waiter, and the client (gone once its last
      // reference went on this thread), before the engine.
      if (w->finished) return;
      keep_client keep(life);
      if (keep && !closed_) waiter_try(w);
    });
  }
  e.waiters.push_back(w.get());
  w->channels.push_back(&e);
  // The first waiter subscribes, and the confirmation wakes the waiters: they try again, closing the
  // race with an unlock published before the subscription existed. A later waiter joins a channel
  // that other local waiters already listen on: an unlock published meanwhile woke one of them, and
  // the lock went to someone, so it need not try again before the next message.
  if (fresh) {
    e.sub = c_.topo().subscribe(channel, &e);
  }
}

// The server will not let this user subscribe (an ACL without the channel): waiting for a message
// would sleep out the holder's whole lease. Say so once, and let the channel's waiters, and later
// ones on it, retry with backoff instead.
void lock_service::channel_refused(channel_entry& ch, std::error_code ec, const std::string& text) {
  keep_client keep(c_);  // config::on_error runs below
  if (!subscribe_refusal_reported_) {
    subscribe_refusal_reported_ = true;
    report_background(c_.cfg(), "lock waiter", ec,
                      "SUBSCRIBE " + ch.channel + " refused (" + text +
                          "): waiters fall back to polling with backoff; grant the channel (&" + ch.channel +
                          ") to wake them at once (docs/deployment.md)");
  }
  std::vector<std::shared_ptr<waiter>> ws;
  for (auto* w : ch.waiters)
    if (!w->finished) ws.push_back(w->shared_from_this());
  if (ch.keyspace) {
    // Only the keyspace events are refused: the waiters keep their unlock channel and poll at the
    // cap for a holder that does not publish, as when keyspace events are off.
    keyspace_ = keyspace::off;
    for (auto& w : ws) {
      w->poll_capped = true;
      leave_channel(*w, ch);
      if (!w->trying) waiter_sleep(w, std::nullopt);
    }
    return;
  }
  // Remembered for a while (a grant may come later), so that new waiters on it poll from the start.
  // A minute at most, and the latest 1024 channels at most: a client that waits on millions of
  // names under an ACL without channels must not keep one entry per name.
  const auto now = clock::now();
  while (!refused_order_.empty() &&
         (now - refused_order_.front().first >= std::chrono::minutes(1) || refused_order_.size() >= 1024)) {
    auto it = refused_channels_.find(refused_order_.front().second);
    if (it != refused_channels_.end() && it->second == refused_order_.front().first) refused_channels_.erase(it);
    refused_order_.pop_front();
  }
  refused_channels_[ch.channel] = now;
  refused_order_.emplace_back(now, ch.channel);
  for (auto& w : ws) fall_back_to_backoff(w);
}

bool lock_service::channel_refused_lately(const std::string& channel) {
  auto it = refused_channels_.find(channel);
  if (it == refused_channels_.end()) return false;
  if (clock::now() - it->second < std::chrono::minutes(1)) return true;
  refused_channels_.erase(it);
  return false;
}

// A waiter that cannot be woken by a message retries on the backoff schedule (10 ms doubling to 500 ms).
void lock_service::poll_instead(waiter& w) {
  if (w.how.use_backoff) return;
  w.how = wait_strategy::backoff(ms(10), ms(500));
  w.next_delay = w.how.initial;
}

void lock_service::fall_back_to_backoff(const std::shared_ptr<waiter>& w) {
  poll_instead(*w);
  leave_channels(*w);
  if (!w->trying) waiter_sleep(w, std::nullopt);
}

// The first live waiter of a channel: the one a message wakes, and the one that polls for a kind
// with one poller per channel.
lock_service::waiter* lock_service::channel_head(const channel_entry& e, const waiter* leaving) {
  for (auto* o : e.waiters)
    if (o == leaving || (!o->finished && !o->cancelled)) return o;
  return nullptr;
}

// 2,000 waiters on one mutex in one client polled 20,000 times a second, and each poll could only
// find the lock taken by one of them or by the holder: the first one polls for all. A grant to it
// ends in a release that publishes, which wakes the next.
bool lock_service::polls(const waiter& w) const {
  if (!w.poll_capped) return false;
  if (w.channels.empty() || w.channels.front()->keyspace || !protocol_of(w.kind).one_poller_per_channel()) return true;
  return channel_head(*w.channels.front(), nullptr) == &w;
}

void lock_service::leave_channel(waiter& w, channel_entry& e) {
  const bool was_poller = !e.keyspace && protocol_of(w.kind).one_poller_per_channel() && channel_head(e, &w) == &w;
  std::erase(w.channels, &e);
  e.waiters.remove(&w);
  if (was_poller) {
    // The next one takes over the polling (its timer was set for its TTL or deadline only).
    if (auto* next = channel_head(e, nullptr); next && next->poll_capped && !next->trying)
      waiter_sleep(next->shared_from_this(), std::nullopt);
  }
  if (!e.waiters.empty()) return;
  if (e.lingers) {
    e.idle_since = clock::now();
    e.missed = false;
    return arm_linger();
  }
  std::string ch = e.channel;
  c_.topo().unsubscribe(e.sub, ch, &e);
  channels_.erase(ch);
}

// Lingering channels left idle for a few seconds are unsubscribed.
void lock_service::arm_linger() {
  if (linger_armed_ || closed_) return;
  linger_armed_ = true;
  linger_timer_.expires_after(linger_for);
  linger_timer_.async_wait([this, life = c_.life()](std::error_code ec) {
    // Cancelled only by close(), after which the engine may be freed before this runs (the client's
    // last reference went on its own thread): nothing of it is touched then.
    if (ec) return;
    keep_client keep(life);
    if (!keep) return;
    linger_armed_ = false;
    if (closed_) return;
    auto now = clock::now();
    bool more = false;
    for (auto it = channels_.begin(); it != channels_.end();) {
      auto& e = *it->second;
      if (e.lingers && e.waiters.empty()) {
        if (now - e.idle_since >= linger_for) {
          c_.topo().unsubscribe(e.sub, e.channel, &e);
          it = channels_.erase(it);
          continue;
        }
        more = true;
      }
      ++it;
    }
    if (more) arm_linger();
  });
}

void lock_service::leave_channels(waiter& w) {
  while (!w.channels.empty()) leave_channel(w, *w.channels.back());
}

void lock_service::wake(channel_entry& ch, wake_policy how) {
  // Collect first: a woken waiter may finish and leave the channel (and erase it) synchronously.
  // A waiter cancelled while its attempt is on the wire is not finished until that attempt answers,
  // and it will not try again: a "0" it took would be lost to the waiters behind it.
  if (how == wake_policy::none) return;
  std::vector<std::shared_ptr<waiter>> targets;
  for (auto* w : ch.waiters) {
    if (w->finished || w->cancelled) continue;
    targets.push_back(w->shared_from_this());
    if (how == wake_policy::one) {
      w->woken = true;
      break;
    }
  }
  if (targets.empty()) ch.missed = true;
  for (auto& w : targets) waiter_try(w);
}

// A message that says how many units are free (a semaphore's permits): each waiter whose amount fits
// in what is left is woken, in the order they began to wait, and counted off; one that needs more
// than is left is passed over (a waiter for 3 is not woken by 1 free, and does not hold up a waiter
// for 1 behind it). Other clients' waiters compete for the same units: a woken waiter that finds
// them taken waits for the next message. A waiter whose attempt is out (woken by an earlier message)
// tries again after it, but is not counted: a grant it gets is the earlier message's, and this one's
// units go to the waiters behind it.
void lock_service::wake_units(channel_entry& ch, long long units) {
  std::vector<std::shared_ptr<waiter>> targets;
  for (auto* w : ch.waiters) {
    if (units <= 0) break;
    if (w->finished || w->cancelled || w->amount > units) continue;
    if (!w->trying) {
      units -= w->amount;
      w->woken = true;  // passes the wake-up on if it gives up without the units (finish_waiter)
    }
    targets.push_back(w->shared_from_this());
  }
  if (targets.empty()) ch.missed = true;
  for (auto& w : targets) waiter_try(w);
}

void lock_service::waiter_sleep(const std::shared_ptr<waiter>& w, std::optional<long long> pttl) {
  auto now = clock::now();
  clock::time_point until = clock::time_point::max();
  if (w->how.use_backoff) {
    if (w->how.max_attempts != 0 && w->retries >= w->how.max_attempts) {
      // Out of attempts. A wait with a deadline says "not acquired" (contention is not an error);
      // one without (lock()) has no such answer: it must end in the lock or an error.
      std::error_code ec = w->last_error;
      if (!ec && !w->deadline) ec = errc::attempts_exhausted;
      return finish_waiter(w, ec, false);
    }
    ++w->retries;
    double share = std::uniform_real_distribution<double>(0.0, w->how.jitter)(rng_);
    auto delay = std::max<ms>(ms(1), ms(static_cast<long long>(static_cast<double>(w->next_delay.count()) * (1.0 - share))));
    double grown = static_cast<double>(w->next_delay.count()) * w->how.multiplier;
    w->next_delay = grown >= static_cast<double>(w->how.max.count()) ? w->how.max : ms(static_cast<long long>(grown));
    until = now + delay;
  }
  // The server's PTTL may exceed what the clock can add (a key set with PX 10^13, by anyone).
  if (pttl && *pttl >= 0) until = std::min(until, now + ms(std::min<long long>(*pttl, max_duration.count())));
  if (polls(*w)) until = std::min(until, now + poll_interval(*w));
  if (w->last_error) {
    // Backoff with jitter while the server refuses or cannot be reached: 10 ms doubling to 1 s.
    w->error_delay = w->error_delay.count() == 0 ? ms(10) : std::min<ms>(w->error_delay * 2, ms(1000));
    double share = std::uniform_real_distribution<double>(0.0, 0.5)(rng_);
    until = std::min(until, now + ms(static_cast<long long>(static_cast<double>(w->error_delay.count()) * (1.0 - share))));
  }
  if (w->deadline) until = std::min(until, *w->deadline);
  if (until == clock::time_point::max()) return;  // no TTL, no deadline: only a message wakes us
  w->timer.expires_at(until);
  w->timer.async_wait([this, w](std::error_code ec) {
    // close() finishes every waiter (and cancels its timer): an unfinished one is on a live engine.
    if (ec || w->finished || w->trying) return;
    waiter_try(w);
  });
}

void lock_service::waiter_try(const std::shared_ptr<waiter>& w) {
  if (w->finished || w->cancelled) return;
  if (w->trying) {
    w->again = true;
    return;
  }
  // The owner took this lock meanwhile (another acquisition of an async owner's): a kind that
  // cannot be re-entered would wait for itself, as acquire() says at the start. Granted anyway
  // (the owner's key vanished from the server before the client noticed), a second hold would
  // share the first's token.
  if (!protocol_of(w->kind).reentrant()) {
    if (auto* held = find(w->name, w->owner, w->kind); held && !held->lost)
      return finish_waiter(w, errc::would_deadlock, false);
  }
  w->trying = true;
  w->again = false;
  w->timer.cancel();
  // A fresh token per attempt: nothing meant for an earlier attempt can touch this one.
  if (protocol_of(w->kind).per_attempt_id()) w->id = protocol_of(w->kind).attempt_id(w->amount);
  attempt(w, [this, w](std::error_code ec, std::optional<long long> pttl, std::uint64_t fence, clock::time_point sent) {
            w->trying = false;
            if (closed_) return end_attempt_after_close(w, ec, !ec && !pttl);
            if (w->finished) return;
            if (outcome_unknown(ec)) undo_acquire(*w, nullptr, attempt_left_its_connection(ec));
            if (end_if_cancelled(w, !ec && !pttl)) return;
            bool past = w->deadline && clock::now() >= *w->deadline;
            if (ec) {
              // While waiting, a reconnect or a timeout is not the end: keep trying until the deadline,
              // and report the error if it is still failing then.
              if (!transient(ec, c_.cfg(), c_.topo().promotes_replicas()) || past) return finish_waiter(w, ec, false);
              w->last_error = ec;
              w->last_error_text = error_text_slot();
              return waiter_sleep(w, std::nullopt);
            }
            w->last_error.clear();
            w->error_delay = ms(0);
            if (!pttl && stale_grant(*w, sent)) pttl = 0;
            if (!pttl) return finish_grant(w, fence, sent);
            if (past) return finish_waiter(w, {}, false);
            if (w->again) return waiter_try(w);
            // Busy after the wake-up: someone took the lock; its release will publish again.
            w->woken = false;
            waiter_sleep(w, pttl);
          });
}


void lock_service::give_up(const waiter& w) {
  const auto& proto = protocol_of(w.kind);
  if (!w.queue || proto.give_up_script() == nullptr) return;
  arg_list a;
  proto.encode_give_up(a, acquire_request{w.name, scratch_field(w.owner), w.id, ms(0), false, w.allowance, true, 1,
                                          c_.topo().publish_command()});
  send_behind(w.name, *proto.give_up_script(), std::move(a), [](std::error_code, reply) {});
}

void lock_service::finish_waiter(const std::shared_ptr<waiter>& w, std::error_code ec, bool acquired) {
  if (w->finished) return;
  w->finished = true;
  if (w->on_card) card_.wait_ended(w->name);
  if (!acquired && (w->woken || w->again) && !closed_) {
    // An unlock message woke this waiter alone, and it gives up (an error, its deadline, a
    // cancellation) without the lock: the next waiter gets the wake-up, or it would sleep on a free
    // lock until the old holder's TTL or its own deadline. Before leaving: the channels stay.
    auto channels = w->channels;
    for (auto* ch : channels) wake(*ch, wake_policy::one);
  }
  // It may be queued (a fair lock): leave, also when the client closes (close() lets it be answered).
  if (!acquired) give_up(*w);
  w->timer.cancel();
  leave_channels(*w);
  auto done = std::move(w->done);
  waiters_.erase(w);
  if (!done) return;
  // An error that is the one the waiter kept (reported later, from a timer) keeps its words.
  std::optional<scoped_error_text> words;
  if (ec && ec == w->last_error && !w->last_error_text.empty() && error_text_slot().empty())
    words.emplace(std::move(w->last_error_text));
  done(ec, acquired);
}

void lock_service::with_keyspace_state(std::string_view key, unique_function<void()> then) {
  if (keyspace_ == keyspace::on || keyspace_ == keyspace::off) return then();
  keyspace_waiting_.push_back(std::move(then));
  if (keyspace_ == keyspace::querying) return;
  keyspace_ = keyspace::querying;
  std::string cmd;
  encode_command(cmd, {"CONFIG", "GET", "notify-keyspace-events"});
  // Asked of the node that serves the waiter's key: its keyspace events are the ones the waiter needs.
  c_.exec(key, std::move(cmd), [this](std::error_code ec, reply r) {
    bool on = false;
    if (!ec && r.is_array() && r.elements.size() == 2) {
      const std::string& f = r.elements[1].str;
      bool k = f.find('K') != std::string::npos;
      bool all = f.find('A') != std::string::npos;
      on = k && (all || (f.find('g') != std::string::npos && f.find('x') != std::string::npos));
    }
    keyspace_ = on ? keyspace::on : keyspace::off;
    auto pending = std::move(keyspace_waiting_);
    keyspace_waiting_.clear();
    for (auto& f : pending) f();
  }, true);
}

void lock_service::on_command_connection_up() {
  if (keyspace_ != keyspace::querying) keyspace_ = keyspace::unknown;
}


}  // namespace redlease::detail
