// SPDX-License-Identifier: MIT
#include "watchdog/scheduler.hpp"

namespace redlease::detail {

void schedule::add(watch_entry* e, clock::time_point due) {
  if (e->queued) remove(e);
  e->due = due;
  e->seq = ++seq_;
  e->queued = true;
  q_.insert(item{{due, e->seq}, e});
}

void schedule::remove(watch_entry* e) {
  if (!e->queued) return;
  q_.erase(item{{e->due, e->seq}, e});
  e->queued = false;
}

clock::time_point schedule::next() const {
  return q_.empty() ? clock::time_point::max() : q_.begin()->k.first;
}

schedule::due_items schedule::take_due(clock::time_point now) {
  due_items out;
  std::vector<watch_entry*> rescheduled;
  auto horizon = now + early_;
  for (auto it = q_.begin(); it != q_.end() && it->k.first <= horizon;) {
    watch_entry* e = it->e;
    if (now >= e->valid_until) {
      out.expired.push_back(e);
      e->queued = false;
      it = q_.erase(it);
    } else if (e->renewable && !e->in_flight) {
      // Renewing a little early is harmless and lets nearby renewals share one script call.
      e->in_flight = true;
      out.renew.push_back(e);
      e->queued = false;
      it = q_.erase(it);
      rescheduled.push_back(e);
    } else if (it->k.first <= now) {
      // Nothing to do before its deadline.
      e->queued = false;
      it = q_.erase(it);
      rescheduled.push_back(e);
    } else {
      ++it;
    }
  }
  for (auto* e : rescheduled) add(e, e->valid_until);
  return out;
}

}  // namespace redlease::detail
