// SPDX-License-Identifier: MIT
// Redisson's fair lock (RFairLock): the reentrant hash plus a FIFO queue of waiters, the list
// `redisson_lock_queue:{name}` and the zset of their deadlines `redisson_lock_timeout:{name}` (epoch
// ms of the clients' clocks); each waiter listens on a channel of its own,
// `redisson_lock__channel:{name}:<field>`, on which the lock is handed to the head.
#include <algorithm>

#include "lock/protocols/common.hpp"

namespace redlease::detail::protocols {
namespace {

// The fair lock's acquire reply: as decode_grant_or_pttl, and a one-element array {t} is a wait of
// t ms by a caller queued behind another waiter.
acquire_result decode_fair_acquire(const reply& r) {
  if (r.is_array() && r.elements.size() == 1 && r.elements[0].is_integer()) {
    acquire_result out;
    out.what = acquire_result::kind::busy;
    out.pttl = r.elements[0].integer;
    out.behind = true;
    return out;
  }
  return decode_grant_or_pttl(r);
}

// The allowance a fair-lock waiter declares (its place in the queue is kept that long after each
// call), from the engine; a single attempt that never queues declares Redisson's 300 s.
long long allowance_of(const acquire_request& r) {
  return r.allowance.count() > 0 && r.allowance < ms(300000) ? r.allowance.count() : 300000;
}

// The allowance a waiter that gives up takes off the deadlines of those behind it: the one it
// queued with, never more than Redisson's 300 s. An unknown one (0) moves nobody: 300000 there
// would push every deadline behind it five minutes into the past (Redisson's async bug 4).
long long give_up_allowance_of(const acquire_request& r) {
  return std::clamp<long long>(r.allowance.count(), 0, 300000);
}

class fair_protocol final : public owner_hash_protocol {
 public:
  bool release_sets_remaining_lease() const override { return true; }
  std::string channel(std::string_view name) const override { return tagged("redisson_lock__channel", name); }
  std::string waiter_channel(std::string_view name, std::string_view field) const override {
    return channel(name) + ":" + std::string(field);
  }
  bool poll_capped() const override { return true; }
  bool linger() const override { return true; }

  // Fenced: a fourth key, the reentrant lock's token key (one name, one sequence).
  const lua_script& acquire_script(bool) const override { return lua::fair_acquire; }
  void encode_acquire(arg_list& a, const acquire_request& r) const override {
    a.add(r.fenced ? 4LL : 3LL).add(r.name).add(tagged("redisson_lock_queue", r.name));
    a.add(tagged("redisson_lock_timeout", r.name));
    if (r.fenced) a.add(tagged("redisson_lock_token", r.name));
    a.add(r.lease.count()).add(r.field).add(allowance_of(r)).add(epoch_ms()).add(r.queue ? "1" : "0");
    a.add(channel(r.name)).add(r.publish);
  }
  // nil (or a token): granted; otherwise the most ms to wait before calling again (-1: no expiry, a
  // message only), as {t} when another waiter is ahead in the queue.
  acquire_result decode_acquire(const reply& r) const override { return decode_fair_acquire(r); }

  const lua_script* release_script(bool oom) const override {
    static const allow_oom flagged(lua::fair_release, "fair_release_allow_oom");
    return oom ? &flagged.script : &lua::fair_release;
  }
  void encode_release(arg_list& a, const release_request& r) const override {
    a.add(4LL).add(r.name).add(tagged("redisson_lock_queue", r.name)).add(tagged("redisson_lock_timeout", r.name));
    a.add(latch_key(r.name, r.request));
    a.add(channel(r.name)).add(r.publish).add(r.remaining_lease.count()).add(r.field).add(r.expected);
    a.add(r.retry ? "1" : "0").add(r.latch_ttl.count()).add(epoch_ms());
  }
  const lua_script& force_unlock_script() const override { return lua::fair_force_unlock; }
  void encode_force_unlock(arg_list& a, std::string_view name, std::string_view publish) const override {
    a.add(3LL).add(name).add(tagged("redisson_lock_queue", name)).add(tagged("redisson_lock_timeout", name));
    a.add(channel(name)).add("0").add(epoch_ms()).add(publish);
  }
  const lua_script* give_up_script() const override { return &lua::fair_cancel; }
  void encode_give_up(arg_list& a, const acquire_request& r) const override {
    a.add(3LL).add(r.name).add(tagged("redisson_lock_queue", r.name)).add(tagged("redisson_lock_timeout", r.name));
    a.add(r.field).add(give_up_allowance_of(r)).add(channel(r.name)).add(r.publish).add(epoch_ms());
  }

};

}  // namespace

const lock_protocol& fair() {
  static const fair_protocol p;
  return p;
}

}  // namespace redlease::detail::protocols
