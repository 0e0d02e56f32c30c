// SPDX-License-Identifier: MIT
#include "lock/release_fsm.hpp"

#include "redlease/error.hpp"

namespace redlease::detail {

// A request written whose reply never came: it may have run (the connection dropped, it timed out
// and may still run late, or the stream broke after the server ran it).
bool release_fsm::unknown(std::error_code ec) noexcept {
  return ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::protocol_error;
}

release_fsm::next release_fsm::resume(std::error_code ec, const release_facts& f) {
  if (unknown(ec) && attempt_ < max_attempt && !f.closed && !(f.has_hold && f.removed)) {
    // The retry tells the script which count to expect, so that it never decrements twice.
    ++attempt_;
    return next::send_again;
  }
  if (ec == errc::wrong_type && f.has_hold && !f.removed && !f.lost && !f.closed) return next::ask_type;
  return next::settle;
}

release_outcome release_fsm::settle(const release_facts& f, std::error_code ec, release_result res) const {
  release_outcome o;
  const bool live = f.has_hold && !f.removed;
  if (ec && live && f.lost && !unknown(ec)) {
    // The hold was found lost before: its level is gone whatever the server says.
    o.change = release_outcome::level::drop_lost;
    o.result = errc::lock_lost;
    return o;
  }
  if (ec) {
    // Still unknown: the next unlock of this hold goes on in retry mode.
    o.set_in_doubt = f.has_hold && unknown(ec);
    o.report_seen = f.has_hold;
    o.result = ec;
    return o;
  }
  o.clear_in_doubt = f.has_hold;
  if (res == release_result::bad) {
    o.report_seen = f.has_hold;
    o.result = errc::bad_reply;
    return o;
  }
  if (res == release_result::not_held) {
    if (!f.has_hold) {
      o.result = errc::not_owner;
      return o;
    }
    // A retry of the last level that finds nothing: the first sending freed it.
    if (attempt_ > 0 && expected_ == 1 && !f.lost) {
      o.change = release_outcome::level::erase;
      return o;
    }
    o.change = release_outcome::level::drop_lost;
    o.drop_reason = f.seen.value_or(f.not_held_reason);
    o.result = errc::lock_lost;
    return o;
  }
  if (!f.has_hold) return o;  // held on the server without our knowing (a lost acquire reply)
  if (f.lost) {
    o.change = release_outcome::level::drop_lost;
    o.result = errc::lock_lost;
    return o;
  }
  if (res == release_result::freed && f.levels > 1) {
    // Freed with levels left: the server's count was not the one we made (someone overwrote it).
    // Those levels are gone; the owner hears it now, and from its next unlock.
    o.change = release_outcome::level::pop;
    o.mark_lost = f.not_held_reason;
    return o;
  }
  if (res == release_result::freed || f.levels <= 1) {
    o.change = release_outcome::level::erase;
    return o;
  }
  o.change = release_outcome::level::pop;
  o.set_deadline = f.sets_remaining_lease;
  // Levels remain, so a renewal's "gone" meanwhile was not this unlock's doing.
  o.report_seen = true;
  o.reschedule = true;
  return o;
}

release_outcome release_fsm::settle_type(const release_facts& f, std::error_code ec, std::string_view type,
                                         std::string_view own_type) const {
  release_outcome o;
  o.result = errc::wrong_type;
  const bool replaced = !ec && !type.empty() && type != own_type;
  if (f.closed) {
    o.result = errc::client_closed;
  } else if (!f.removed && (replaced || f.lost)) {
    // The lock's own key changed type (or was found gone before): the hold is lost.
    o.change = release_outcome::level::drop_lost;
    o.drop_reason = f.seen.value_or(type == "none" ? lost_reason::deleted : lost_reason::taken);
    o.result = errc::lock_lost;
  } else if (f.seen && !f.lost && !f.removed) {
    o.mark_lost = *f.seen;  // a renewal found it gone meanwhile: the hold stands no more
  }
  return o;
}

}  // namespace redlease::detail
