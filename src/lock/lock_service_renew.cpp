// SPDX-License-Identifier: MIT
// The watchdog: renewals in batches, what their replies say, and the re-check after a failover.
#include "lock/lock_service_state.hpp"

#include <map>

namespace redlease::detail {

// ---- watchdog ----------------------------------------------------------------------------------

void lock_service::arm_watchdog() {
  auto next = schedule_.next();
  // Also when the oldest lost hold is due to be dropped (it is no longer in the schedule).
  if (!lost_.empty()) next = std::min(next, lost_.front().first + lost_hold_kept);
  if (next == clock::time_point::max() || closed_) return;
  if (next >= wd_armed_at_) return;
  wd_armed_at_ = next;
  wd_timer_.expires_at(next);
  wd_timer_.async_wait([this, next, life = c_.life()](std::error_code ec) {
    if (ec) return;
    // The client may be gone (this handler was queued before it closed), and on_lost may run below.
    keep_client keep(life);
    if (!keep || closed_ || next != wd_armed_at_) return;
    wd_armed_at_ = clock::time_point::max();
    on_watchdog_timer();
  });
}

void lock_service::on_watchdog_timer() {
  const auto now = clock::now();
  prune_lost(now);
  auto due = schedule_.take_due(now);
  std::vector<std::shared_ptr<hold>> batch;
  batch.reserve(due.renew.size());
  for (auto* e : due.renew) {
    auto h = static_cast<hold*>(e)->shared_from_this();
    if (!past_max_hold(*h, now)) batch.push_back(std::move(h));
  }
  // on_lost runs for each: the holds are kept (user code there may close the client).
  std::vector<std::shared_ptr<hold>> expired;
  expired.reserve(due.expired.size());
  for (auto* e : due.expired) expired.push_back(static_cast<hold*>(e)->shared_from_this());
  for (auto& h : expired) mark_lost(*h, lost_reason::expired);
  if (!batch.empty()) {
    card_.touch(now);  // one call per half TTL at most, whatever the number of holds
    ++c_.watchdog_ticks;
    send_renewals(std::move(batch), {});
  }
  arm_watchdog();
}

void lock_service::send_renewals(std::vector<std::shared_ptr<hold>> all, const renew_context& ctx) {
  // One script call touches keys of one batch id only (a cluster: one slot); in a deployment with
  // one master they all share id 0 and this is one pass. Holds whose kinds share a renewal codec
  // share a call.
  auto& topo = c_.topo();
  auto group_of = [&topo](const hold& h) { return std::make_pair(topo.batch_id(h.name), &protocol_of(h.kind).renewal()); };
  auto first = all.empty() ? std::make_pair(std::uint64_t{0}, static_cast<const renewal_codec*>(nullptr))
                           : group_of(*all.front());
  bool mixed = false;
  for (auto& h : all) mixed = mixed || group_of(*h) != first;
  if (mixed) {
    std::map<std::pair<std::uint64_t, const renewal_codec*>, std::vector<std::shared_ptr<hold>>> groups;
    for (auto& h : all) groups[group_of(*h)].push_back(std::move(h));
    for (auto& [id, group] : groups) send_renewals(std::move(group), ctx);
    return;
  }
  const std::size_t per_call = std::max<std::size_t>(1, c_.cfg().watchdog_batch_size);
  // Verification (a fixed lease after a failover) checks ownership without touching the lease.
  const ms lease = ctx.verify_only ? ms(0) : c_.cfg().watchdog_timeout;
  std::vector<renew_item> items;
  std::string fields;
  for (std::size_t start = 0; start < all.size(); start += per_call) {
    std::size_t n = std::min(per_call, all.size() - start);
    std::vector<std::shared_ptr<hold>> batch(all.begin() + static_cast<std::ptrdiff_t>(start),
                                             all.begin() + static_cast<std::ptrdiff_t>(start + n));
    // The owners' fields, written once each into one buffer that does not grow while viewed.
    fields.clear();
    fields.reserve(n * (c_.uuid().size() + 24));
    items.clear();
    const hold* prev = nullptr;
    std::string_view prev_field;
    for (auto& h : batch) {
      const auto& proto = protocol_of(h->kind);
      renew_item it{h->name, h->token, !proto.per_attempt_id(), proto.renew_letter()};
      if (it.by_owner) {
        if (prev == nullptr || prev->owner != h->owner || prev_field.empty()) {
          const auto at = fields.size();
          append_field(fields, h->owner);
          prev_field = std::string_view(fields).substr(at);
        }
        it.id = prev_field;
        prev = h.get();
      }
      items.push_back(it);
    }
    arg_list a;
    const auto& codec = protocol_of(batch.front()->kind).renewal();
    codec.encode(a, items, lease);
    auto sent = clock::now();
    ++c_.renew_calls;
    // The key views the first hold's name (the holds outlive the call; the vector moves below).
    const std::string_view key = batch.front()->name;
    c_.exec_script_acked(key, codec.script(), std::move(a),
                         [this, batch = std::move(batch), sent, ctx, &codec](std::error_code ec, reply r) {
                           // The renewal ran on the master, which is what holds the lock; a replica
                           // that lags (a resync after a failover) gets the TTL with the next one.
                           if (ec == errc::not_replicated) ec.clear();
                           on_renewed(batch, sent, ctx, ec, r, codec);
                         },
                         true);
  }
}

void lock_service::on_renewed(const std::vector<std::shared_ptr<hold>>& batch, clock::time_point sent,
                              const renew_context& ctx, std::error_code ec, const reply& r,
                              const renewal_codec& codec) {
  if (closed_) return;
  keep_client keep(c_);  // on_lost may run below
  std::vector<renew_outcome> outcome(batch.size(), renew_outcome::unknown);
  if (!ec) codec.decode(r, outcome);
  auto now = clock::now();
  ms retry = std::max<ms>(interval_ / 4, ms(5));
  // Why this call failed, kept per hold until it renews, so that a loss at the deadline names the
  // cause (NOREPLICAS, OOM, a changed password, ...).
  std::error_code why = ec ? ec : (!r.is_array() ? std::error_code(errc::bad_reply) : std::error_code{});
  for (std::size_t i = 0; i < batch.size(); ++i) {
    auto& h = *batch[i];
    if (!ctx.verify_only) h.in_flight = false;
    if (h.removed || h.lost) continue;
    const renew_outcome res = outcome[i];
    if (res != renew_outcome::renewed) {
      if (why) renew_errors_[&h] = {why, error_text_slot()};
      if (!ctx.verify_only) note_renewal_failed(h, why);
    }
    // The key did not make it to the new master: the failover cost this hold. (A check retried
    // after the failover, within an interval of it, tells the same story.)
    const std::string& failover = !ctx.failover.empty() || now - failover_at_ > interval_ ? ctx.failover : failover_;
    if ((res == renew_outcome::gone || res == renew_outcome::taken) && !failover.empty())
      renew_errors_[&h] = {errc::master_switched, failover + "; the lock's key was not on the new master"};
    if (res == renew_outcome::renewed) {
      if (!renew_errors_.empty()) renew_errors_.erase(&h);
      if (ctx.verify_only) continue;
      ++c_.renewed_locks;
      {
        std::lock_guard<std::mutex> g(view_mu_);
        h.valid_until = std::max(h.valid_until, sent + c_.cfg().watchdog_timeout);
      }
      reschedule(h);
    } else if (res != renew_outcome::unknown) {
      auto why = res == renew_outcome::gone ? lost_reason::deleted : lost_reason::taken;
      if (res == renew_outcome::bad_count)
        renew_errors_[&h] = {errc::bad_reply, "the hold count in \"" + h.name + "\" is not one this client made"};
      // An unlock of this hold is out (on the lane, it may have run before this renewal): its
      // reply decides. The hold is not rescheduled; the unlock's completion ends it either way.
      if (h.releasing > 0) {
        if (!h.loss_seen) h.loss_seen = why;
        continue;
      }
      mark_lost(h, why);
    } else if (now >= h.valid_until) {
      mark_lost(h, lost_reason::expired);
    } else if (ctx.verify_only) {
      // Not verified (the new master not reachable yet): try again soon; the deadline stands.
      verify_later(batch[i], ctx);
    } else {
      // The renewal failed (timeout, reconnect, script error): try again soon, and declare the
      // lock lost when its deadline passes unrenewed.
      schedule_.add(&h, std::min(h.valid_until, now + retry));
    }
  }
  arm_watchdog();
}

// After a failover nothing is known of any hold until the new master is asked: every hold is
// checked at once, not at its next renewal. A watchdog hold is renewed (which checks it); a
// fixed-lease hold is only checked (its lease is its owner's choice).
void lock_service::on_failover(const std::string& what) {
  if (closed_) return;
  note_failover(what);
  failover_ = what;
  failover_at_ = clock::now();
  card_.forget();  // the new master may not have it
  renew_context renew{what, false};
  renew_context verify{what, true};
  std::vector<std::shared_ptr<hold>> renewable, fixed;
  for (auto& h : holds_) {
    if (h->lost || h->removed) continue;
    if (h->renewable) {
      h->in_flight = true;
      renewable.push_back(h);
    } else {
      fixed.push_back(h);
    }
  }
  if (!renewable.empty()) send_renewals(std::move(renewable), renew);
  if (!fixed.empty()) send_renewals(std::move(fixed), verify);
  // Waiters hear of it when the pub/sub connection comes back on the new master (they retry then).
}

void lock_service::verify_later(std::shared_ptr<hold> h, const renew_context& ctx) {
  auto t = std::make_shared<asio::steady_timer>(c_.executor(), std::max<ms>(interval_ / 4, ms(5)));
  timers_.insert(t);
  t->async_wait([this, t, h = std::move(h), ctx, life = c_.life()](std::error_code ec) {
    if (ec) return;  // cancelled by close(): the engine may be gone
    keep_client keep(life);
    if (!keep) return;
    timers_.erase(t);
    if (closed_ || h->lost || h->removed) return;
    send_renewals({h}, ctx);
  });
}


}  // namespace redlease::detail
