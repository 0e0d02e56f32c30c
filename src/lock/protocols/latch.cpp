// SPDX-License-Identifier: MIT
// Redisson's count-down latch (RCountDownLatch), as far as the wait engine sees it: its await. The
// key `name` is a string holding the count (missing: 0); count changes publish on
// `redisson_countdownlatch__channel__{name}` (braces always, Redisson's name): "0" when the count
// reaches zero, "1" for a new count or a deletion. An await is an acquisition whose grant is no
// hold (grant_is_hold false): granted when the count reads 0, and forgotten. The count's own calls
// (try_set_count, count_down, count) are in facade/latch.cpp; delete is this kind's forced unlock.
#include "lock/protocols/common.hpp"

namespace redlease::detail::protocols {
namespace {

class latch_protocol final : public lock_protocol {
 public:
  std::string channel(std::string_view name) const override {
    std::string out = "redisson_countdownlatch__channel__{";
    out.append(name).push_back('}');
    return out;
  }
  bool fencing() const override { return false; }
  // Several awaits of one owner are fine (there is no hold to collide with).
  bool reentrant() const override { return true; }
  bool per_attempt_id() const override { return false; }
  bool keyspace_wake() const override { return false; }
  bool release_needs_hold() const override { return true; }
  std::string_view key_type() const override { return "string"; }
  lost_reason not_held_reason() const override { return lost_reason::deleted; }
  bool grant_is_hold() const override { return false; }

  // Every message wakes every waiter to check again: "0" (the count reached zero) lets them all
  // pass; "1" is a new count (they wait on) or a deletion (the count now reads 0, as Redisson's
  // getCount says, so they pass on that check, as Redisson's await does).
  wake_policy wakes(std::string_view) const override { return wake_policy::all; }
  // Each waiter checks again at least every config::mutex_poll_cap: a lost "0", a count changed by
  // a client that does not publish, or a TTL set after the wait began would otherwise hold it for
  // ever (a TTL known at the check already bounds the sleep: the check's reply is the PTTL). Not one
  // poller per channel: a check that passes admits every waiter, and ends its poller's wait.
  bool poll_capped() const override { return true; }

  const lua_script& acquire_script(bool) const override { return lua::latch_await; }
  void encode_acquire(arg_list& a, const acquire_request& r) const override { a.add(1LL).add(r.name); }
  // nil: the count is 0 (granted); an integer: the key's PTTL (busy).
  acquire_result decode_acquire(const reply& r) const override {
    if (r.is_string()) return {};  // the check never answers a token: a bad reply
    return decode_grant_or_pttl(r);
  }

  // Nothing is ever held, so nothing is released. The undo of a check whose reply never came (the
  // engine's release script by default) is the check again: it reads only.
  const lua_script* release_script(bool allow_oom) const override { return allow_oom ? nullptr : &lua::latch_await; }
  void encode_release(arg_list& a, const release_request& r) const override { a.add(1LL).add(r.name); }
  release_result decode_release(const reply&) const override { return release_result::not_held; }
  void encode_undo(arg_list& a, const release_request& r) const override { encode_release(a, r); }

  // Delete (Redisson's delete: DEL, and "1" published when it deleted).
  const lua_script& force_unlock_script() const override { return lua::latch_delete; }
  void encode_force_unlock(arg_list& a, std::string_view name, std::string_view publish) const override {
    a.add(1LL).add(name).add(channel(name)).add(publish);
  }

  const renewal_codec& renewal() const override { return renew_lua_codec(); }  // never used: no holds
  char renew_letter() const override { return 's'; }
  // No owner holds a latch: the count of holds is 0 whatever the key says (the engine's sweeps after
  // a lost check then find nothing to give back).
  void encode_hold_count(std::string& out, std::string_view name, std::string_view, std::string_view) const override {
    encode_command(out, {"EXISTS", name});
  }
  std::optional<long long> decode_hold_count(const reply&, std::string_view) const override { return 0; }
};

}  // namespace

const lock_protocol& latch() {
  static const latch_protocol p;
  return p;
}

}  // namespace redlease::detail::protocols
