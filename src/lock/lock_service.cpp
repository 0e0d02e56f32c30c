// SPDX-License-Identifier: MIT
// The lock engine: its state, the hold table (grants become holds, holds become lost) and close.
#include "lock/lock_service_state.hpp"

namespace redlease::detail {

std::size_t lock_service::hold_hash::operator()(const key& k) const noexcept {
  return std::hash<std::string_view>{}(k.name) ^
         ((std::hash<owner_id>{}(k.owner) + static_cast<std::size_t>(k.kind)) * 0x9e3779b97f4a7c15ULL);
}
std::size_t lock_service::hold_hash::operator()(const std::shared_ptr<hold>& h) const noexcept {
  return (*this)(key{h->name, h->owner, h->kind});
}
bool lock_service::hold_eq::operator()(const key& a, const std::shared_ptr<hold>& b) const noexcept {
  return a.name == b->name && a.owner == b->owner && a.kind == b->kind;
}
bool lock_service::hold_eq::operator()(const std::shared_ptr<hold>& a, const key& b) const noexcept {
  return b.name == a->name && b.owner == a->owner && b.kind == a->kind;
}
bool lock_service::hold_eq::operator()(const std::shared_ptr<hold>& a, const std::shared_ptr<hold>& b) const noexcept {
  return a->name == b->name && a->owner == b->owner && a->kind == b->kind;
}

lock_service::lock_service(lock_runtime& c)
    : c_(c),
      // Renewals due within a quarter of the interval of each other go out together (at 75-100% of the
      // interval, with two thirds of the lease or more left); once renewed together they stay aligned.
      schedule_(std::max<clock::duration>(c.cfg().watchdog_timeout / 12, std::chrono::milliseconds(1))),
      wd_timer_(c.executor()),
      interval_(std::max<ms>(c.cfg().watchdog_timeout / 3, ms(1))),
      linger_timer_(c.executor()),
      card_(c) {}

lock_service::~lock_service() = default;

ms lock_service::lost_hold_kept{std::chrono::minutes(5)};

// How long a retried release's latch lives: longer than any earlier attempt of it can stay stuck in
// a dead connection's buffers before the server reads it.
ms lock_service::latch_ttl() const { return request_latch_ttl(c_.cfg().request_timeout); }

void lock_service::append_field(std::string& out, owner_id owner) const {
  out.append(c_.uuid());
  out.push_back(':');
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, owner);
  (void)ec;
  out.append(buf, p);
}

std::string lock_service::field_of(owner_id owner) const {
  std::string f;
  f.reserve(c_.uuid().size() + 21);
  append_field(f, owner);
  return f;
}

std::string_view lock_service::scratch_field(owner_id owner) {
  field_scratch_.clear();
  append_field(field_scratch_, owner);
  return field_scratch_;
}

lock_service::hold* lock_service::find(std::string_view name, owner_id owner, lock_kind kind) const {
  auto it = holds_.find(key{name, owner, kind});
  return it == holds_.end() ? nullptr : it->get();
}

lock_service::local_view lock_service::view(std::string_view name, owner_id owner, lock_kind kind, bool want_token) {
  local_view v;
  std::lock_guard<std::mutex> g(view_mu_);
  if (auto* h = find(name, owner, kind)) {
    v.held = true;
    v.valid = !h->lost && clock::now() < h->valid_until;
    v.valid_until = h->valid_until;
    v.fence = h->fence;
    if (want_token) {
      if (!h->stop.stop_possible()) {
        h->stop = std::stop_source();
        if (h->lost) h->stop.request_stop();
      }
      v.token = h->stop.get_token();
    }
  }
  return v;
}

std::string lock_service::holder(std::string_view name, owner_id owner, lock_kind kind) {
  std::lock_guard<std::mutex> g(view_mu_);
  auto* h = find(name, owner, kind);
  return h ? protocol_of(kind).holder_field(field_of(owner), h->token) : std::string();
}

bool lock_service::on_acquired(const std::string& name, lock_kind kind, owner_id owner, std::optional<ms> lease,
                               const std::string& id, std::uint64_t fence, clock::time_point sent,
                               const std::shared_ptr<lost_slot>& slot) {
  auto it = holds_.find(key{name, owner, kind});
  std::shared_ptr<hold> h;
  bool fresh = false;
  const auto& proto = protocol_of(kind);
  // A re-entry whose hold was found lost while the attempt was on the wire: the grant is no level
  // of that hold (the key was free, or another's, when the loss was seen), and taking it as a fresh
  // one-level hold made the owner's outer unlock fail with not_owner (the soak's frozen holders).
  if (it != holds_.end() && (*it)->lost && proto.reentrant()) return false;
  if (it != holds_.end() && proto.reentrant()) {
    h = *it;
  } else {
    if (it != holds_.end()) {
      // A kind that cannot be re-entered granted to an owner that holds it (two acquisitions were
      // on the wire at once): the grant found the key free, so the hold known before is gone. It
      // is reported lost; the grant is a hold of its own, with its own token.
      auto old = *it;
      if (!old->lost) mark_lost(*old, lost_reason::deleted);
      erase(old.get());
    }
    h = std::make_shared<hold>();
    h->name = name;
    h->owner = owner;
    h->kind = kind;
    if (proto.per_attempt_id()) h->token = id;
    h->since = sent;
    fresh = true;
  }
  // The hold's callback is the one of the handle that took it: a re-entry through another handle
  // took it over, and the first handle's on_lost never ran for the hold it took.
  if (slot && (fresh || !h->slot)) h->slot = slot;
  h->levels.push_back(lease);
  {
    // One short lock per acquisition for what the local view reads: the set and the deadline.
    std::lock_guard<std::mutex> g(view_mu_);
    if (fresh) holds_.insert(h);
    if (fence != 0) h->fence = fence;  // the latest grant's (a re-entry gets a new one)
    h->valid_until = sent + lease.value_or(c_.cfg().watchdog_timeout);
  }
  if (fresh) ++c_.held_locks;
  reschedule(*h);
  return true;
}

void lock_service::reschedule(hold& h) {
  bool was = h.renewable;
  h.renewable = h.watchdog();
  if (was != h.renewable) {
    if (h.renewable) ++c_.watched_locks;
    else --c_.watched_locks;
  }
  if (h.in_flight) {
    schedule_.add(&h, h.valid_until);
  } else if (h.renewable) {
    // Renew a third of the watchdog timeout after the lease was last set. In a cluster, at the phase
    // of the hold's slot at or before that plus the early window, so that the slot's holds share one
    // script call: a renewal the window took early then falls due a whole interval after the phase
    // it went out at, not at that phase again (at once). At most 5/12 of the lease has passed then.
    const auto due = std::min(h.valid_until, h.valid_until - c_.cfg().watchdog_timeout + interval_);
    auto& topo = c_.topo();
    const auto count = topo.batch_count();
    auto when = count <= 1 ? due
                           : std::min(h.valid_until, aligned_due(due + schedule_.early(), interval_,
                                                                 topo.batch_id(h.name), count));
    // At max_hold the renewal that falls due finds the cap and ends the hold instead.
    if (c_.cfg().max_hold.count() > 0) when = std::min(when, h.since + c_.cfg().max_hold);
    schedule_.add(&h, when);
  } else {
    schedule_.add(&h, h.valid_until);
  }
  arm_watchdog();
}

void lock_service::erase(hold* h) {
  if (h == nullptr || h->removed) return;
  if (!h->lost) note_hold_end(*h, std::nullopt, {}, {});
  if (!renew_errors_.empty()) renew_errors_.erase(h);
  schedule_.remove(h);
  if (h->renewable) --c_.watched_locks;
  h->renewable = false;
  h->removed = true;
  --c_.held_locks;
  std::shared_ptr<hold> keep;  // the hold dies outside the lock (and after it, when the caller is done)
  std::lock_guard<std::mutex> g(view_mu_);
  if (auto it = holds_.find(key{h->name, h->owner, h->kind}); it != holds_.end()) {
    keep = *it;
    holds_.erase(it);
  }
}

// Runs user code (stop callbacks, on_lost): its callers hold the client (keep_client) for as long as
// they go on using the engine after it.
void lock_service::mark_lost(hold& h, lost_reason why) {
  if (h.lost) return;
  keep_client client(c_);
  std::stop_source stop{std::nostopstate};
  {
    std::lock_guard<std::mutex> g(view_mu_);
    h.lost = true;
    stop = h.stop;
  }
  schedule_.remove(&h);
  if (h.renewable) --c_.watched_locks;
  h.renewable = false;
  // Stop callbacks and on_lost are user code: they run outside view_mu_, so they may ask for the
  // local view; an exception on_lost throws is reported, never propagated.
  if (stop.stop_possible()) stop.request_stop();
  auto keep = h.shared_from_this();
  lost_info info{h.name, h.owner, why, {}, {}};
  if (auto it = renew_errors_.find(&h); it != renew_errors_.end()) {
    info.cause = it->second.first;
    info.detail = std::move(it->second.second);
    renew_errors_.erase(it);
  }
  note_hold_end(h, why, info.cause, info.detail);
  if (h.slot) h.slot->cb.call(c_.cfg(), "on_lost callback", info);
  // A lost hold stays until its owner unlocks (so unlock can say lock_lost), but not forever:
  // a fixed-lease lock that is never unlocked is a common pattern. The watchdog's timer drops it
  // lost_hold_kept after the loss.
  auto now = clock::now();
  auto self = holds_.find(key{h.name, h.owner, h.kind});
  if (self != holds_.end()) lost_.emplace_back(now, *self);
  prune_lost(now);
  arm_watchdog();
}

void lock_service::prune_lost(clock::time_point now) {
  while (!lost_.empty() && now - lost_.front().first >= lost_hold_kept) {
    if (auto old = lost_.front().second.lock(); old && old->lost) erase(old.get());
    lost_.pop_front();
  }
}


void lock_service::close() {
  if (closed_) return;
  closed_ = true;
  wd_timer_.cancel();
  linger_timer_.cancel();
  for (auto& t : timers_) t->cancel();
  timers_.clear();
  auto ws = waiters_;
  for (auto& w : ws) finish_waiter(w, errc::client_closed, false);
  auto parked = std::move(after_release_);
  after_release_.clear();
  for (auto& [h, fs] : parked)
    for (auto& f : fs) f();  // client_closed
  // The card outlives the close as long as the holds it describes are valid.
  const auto now = clock::now();
  auto keep = now;
  for (auto& h : holds_) {
    schedule_.remove(h.get());
    if (!h->lost) keep = std::max(keep, h->valid_until);
  }
  card_.close(std::chrono::ceil<ms>(keep - now));
  auto pending = std::move(keyspace_waiting_);
  keyspace_waiting_.clear();
}


}  // namespace redlease::detail
