// SPDX-License-Identifier: MIT
// What the engine tells about itself: the lock metrics (relaxed counters, no lock) and
// config::on_event (built only when it is set), and the max_hold cap.
#include "background.hpp"
#include "lock/lock_service_state.hpp"

namespace redlease::detail {
namespace {

acquire_outcome outcome_of(std::error_code ec, bool granted) {
  if (granted) return acquire_outcome::granted;
  if (!ec || ec == errc::attempts_exhausted) return acquire_outcome::timed_out;
  if (ec == errc::operation_aborted) return acquire_outcome::cancelled;
  if (ec == errc::would_deadlock || ec == errc::lock_lost || ec == errc::wrong_type || ec == errc::invalid_argument ||
      ec == errc::no_permission || ec == errc::unknown_command || ec == errc::server_oom ||
      ec == errc::no_replicas || ec == errc::not_replicated || ec == errc::server_readonly)
    return acquire_outcome::refused;
  return acquire_outcome::error;
}

loss_cause cause_of(lost_reason r, const std::error_code& cause) {
  if (cause == errc::master_switched) return loss_cause::failover;
  switch (r) {
    case lost_reason::expired: return loss_cause::expired;
    case lost_reason::deleted: return loss_cause::deleted;
    case lost_reason::taken: return loss_cause::taken;
    case lost_reason::quorum: return loss_cause::quorum;
    case lost_reason::max_hold: return loss_cause::max_hold;
  }
  return loss_cause::deleted;
}

void emit(const config& cfg, const lock_event& e) noexcept {
  try {
    cfg.on_event(e);
  } catch (...) {
    report_exception(cfg, "on_event callback");
  }
}

}  // namespace

void lock_service::note_acquisition(lock_kind kind, std::error_code ec, bool granted, const waiter* w,
                                    prefix_cell* by_prefix) {
  const bool counting = c_.cfg().metrics;
  auto& m = c_.metrics;
  if (counting && w != nullptr) by_prefix = m.prefixes.cell(w->name);
  if (counting) {
    const auto o = outcome_of(ec, granted);
    m.acquired(static_cast<std::size_t>(kind), o);
    if (by_prefix != nullptr) m.count(by_prefix->acquisitions[static_cast<std::size_t>(o)]);
  }
  if (!granted || w == nullptr || (!counting && !c_.cfg().on_event)) return;
  const auto now = clock::now();
  if (counting) {
    m.wait.observe(now - w->started);
    if (by_prefix != nullptr) by_prefix->wait.observe(now - w->started);
    if (w->woken_at != clock::time_point{}) m.handoff.observe(now - w->woken_at);
  }
  if (!c_.cfg().on_event) return;
  lock_event e;
  e.what = lock_event::type::acquired;
  e.name = w->name;
  e.kind = static_cast<int>(kind);
  e.owner = w->owner;
  e.waited = now - w->started;
  emit(c_.cfg(), e);
}

void lock_service::note_hold_end(const hold& h, std::optional<lost_reason> lost, const std::error_code& cause,
                                 const std::string& detail) {
  if (!c_.cfg().metrics && !c_.cfg().on_event) return;
  const auto held = clock::now() - h.since;
  if (c_.cfg().metrics) {
    auto& m = c_.metrics;
    m.hold.observe(held);
    if (lost) m.count(m.losses[static_cast<std::size_t>(cause_of(*lost, cause))]);
    if (auto* p = m.prefixes.cell(h.name)) {
      p->hold.observe(held);
      if (lost) m.count(p->losses);
    }
  }
  if (!c_.cfg().on_event) return;
  lock_event e;
  e.what = lost ? lock_event::type::lost : lock_event::type::released;
  e.name = h.name;
  e.kind = static_cast<int>(h.kind);
  e.owner = h.owner;
  e.held = held;
  if (lost) e.reason_text = lost_reason_name(*lost);
  e.cause = cause;
  e.detail = detail;
  emit(c_.cfg(), e);
}

void lock_service::note_renewal_failed(const hold& h, std::error_code ec) {
  if (c_.cfg().metrics) c_.metrics.count(c_.metrics.renewals_failed);
  if (!c_.cfg().on_event || !ec) return;
  lock_event e;
  e.what = lock_event::type::renewal_failed;
  e.name = h.name;
  e.kind = static_cast<int>(h.kind);
  e.owner = h.owner;
  e.cause = ec;
  e.detail = error_text_slot();
  emit(c_.cfg(), e);
}

void lock_service::note_failover(const std::string& what) {
  if (c_.cfg().metrics) c_.metrics.count(c_.metrics.failovers);
  if (!c_.cfg().on_event) return;
  lock_event e;
  e.what = lock_event::type::failover;
  e.detail = what;
  emit(c_.cfg(), e);
}

bool lock_service::past_max_hold(hold& h, clock::time_point now) {
  const auto cap = c_.cfg().max_hold;
  if (cap.count() <= 0 || !h.watchdog() || now < h.since + cap) return false;
  renew_errors_[&h] = {errc::max_hold_exceeded, "held for config::max_hold (" + std::to_string(cap.count()) + " ms)"};
  mark_lost(h, lost_reason::max_hold);
  return true;
}

}  // namespace redlease::detail

const char* redlease::lost_reason_name(lost_reason r) noexcept {
  switch (r) {
    case lost_reason::expired: return "expired";
    case lost_reason::deleted: return "deleted";
    case lost_reason::taken: return "taken";
    case lost_reason::quorum: return "quorum";
    case lost_reason::max_hold: return "max_hold";
  }
  return "unknown";
}
