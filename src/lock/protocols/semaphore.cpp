// SPDX-License-Identifier: MIT
// Redisson's RSemaphore: a string `name` holding the available permits; every change that adds
// permits publishes the new count on `redisson_sc:{name}`. An acquisition takes `amount` permits or
// is busy, and its grant is no hold: the permits belong to nobody, nothing renews them, and they are
// given back by redlease::semaphore::release, not by the engine. A waiter is woken by count: a
// message saying `n` are available wakes the waiters whose amounts fit in `n` (units_available).
#include <algorithm>

#include "lock/protocols/common.hpp"

namespace redlease::detail::protocols {
namespace {

// The latch of an acquisition attempt (its grant mark) or of a release: the locks' latch names.
std::string attempt_latch(std::string_view name, std::string_view id) { return latch_key(name, id); }

// Grant marks must outlive any undo of their attempt: the undo is sent as soon as a reply is lost,
// and its resends follow within the latch TTL the engine gives releases (at least a minute).
constexpr long long min_mark_ms = 60000;

class semaphore_protocol final : public lock_protocol {
 public:
  std::string channel(std::string_view name) const override { return tagged("redisson_sc", name); }
  bool fencing() const override { return false; }
  bool reentrant() const override { return true; }  // an owner may take more permits while it has some
  bool per_attempt_id() const override { return true; }  // each attempt's id names its grant mark
  bool keyspace_wake() const override { return false; }
  bool release_needs_hold() const override { return false; }
  std::string_view key_type() const override { return "string"; }
  lost_reason not_held_reason() const override { return lost_reason::deleted; }
  bool grant_is_hold() const override { return false; }

  // Every message on the channel carries the count available after the change (release,
  // addPermits, trySetPermits). Anything else (a forced delete's "0") wakes nobody by count: 0 fits
  // no waiter.
  std::optional<long long> units_available(std::string_view payload) const override { return count_payload(payload); }

  const lua_script& acquire_script(bool) const override { return lua::semaphore_acquire; }
  void encode_acquire(arg_list& a, const acquire_request& r) const override {
    keys(a, r.name, attempt_latch(r.name, r.id), r.sweep);
    a.add(r.amount).add(std::max<long long>(r.lease.count(), min_mark_ms));
  }
  // A grant's mark is read only by an undo of its attempt, which a delivered grant never gets.
  std::string grant_mark(std::string_view name, std::string_view id) const override { return attempt_latch(name, id); }
  bool sweeps_settled_keys() const override { return true; }
  // 1 granted; 0 busy, with nothing to wait on but a message (no TTL to sleep out).
  acquire_result decode_acquire(const reply& r) const override {
    acquire_result out;
    if (!r.is_integer()) return out;
    if (r.integer == 1) {
      out.what = acquire_result::kind::granted;
    } else if (r.integer == 0) {
      out.what = acquire_result::kind::busy;
      out.pttl = -1;
    }
    return out;
  }

  // The release of `amount` permits under the request's latch (semaphore_release.lua). Used by
  // redlease::semaphore directly: a grant is no hold, so the engine never releases one.
  const lua_script* release_script(bool allow_oom) const override {
    return allow_oom ? nullptr : &lua::semaphore_release;
  }
  void encode_release(arg_list& a, const release_request& r) const override {
    keys(a, r.name, attempt_latch(r.name, r.request), r.sweep);
    a.add(channel(r.name)).add(r.amount).add(r.latch_ttl.count()).add(r.publish);
  }
  release_result decode_release(const reply& r) const override {
    return r.is_integer() ? release_result::freed : release_result::bad;
  }

  // The undo of an attempt (cancelled, or its reply lost): gives its permits back only if its grant
  // mark says it took them, exactly once (semaphore_undo.lua).
  const lua_script* undo_script(bool allow_oom) const override { return allow_oom ? nullptr : &lua::semaphore_undo; }
  void encode_undo(arg_list& a, const release_request& r) const override {
    a.add(2LL).add(r.name).add(attempt_latch(r.name, r.id)).add(channel(r.name)).add(r.amount)
        .add(std::max<long long>(r.latch_ttl.count(), min_mark_ms)).add(r.publish);
  }

  // Never used (no holds): the codec of the string kinds.
  const renewal_codec& renewal() const override { return renew_lua_codec(); }
  char renew_letter() const override { return 's'; }
  // Nobody holds permits: the count of an owner's holds is always 0 (the engine's sweep after an
  // unordered undo then finds nothing to give back; the grant marks keep the undo exact instead).
  void encode_hold_count(std::string& out, std::string_view name, std::string_view, std::string_view) const override {
    encode_command(out, {"EXISTS", name});
  }
  std::optional<long long> decode_hold_count(const reply& r, std::string_view) const override {
    if (!r.is_integer()) return std::nullopt;
    return 0;
  }

 private:
  // KEYS: the name, the call's own latch, then the settled keys it deletes in passing.
  static void keys(arg_list& a, std::string_view name, const std::string& latch, std::span<const std::string> sweep) {
    a.add(static_cast<long long>(2 + sweep.size())).add(name).add(latch);
    for (const auto& k : sweep) a.add(k);
  }
};

}  // namespace

const lock_protocol& semaphore() {
  static const semaphore_protocol p;
  return p;
}

}  // namespace redlease::detail::protocols
