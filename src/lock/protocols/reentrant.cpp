// SPDX-License-Identifier: MIT
// Redisson's reentrant lock (RLock): a hash `name` of owner fields `<client-uuid>:<owner>` and their
// hold counts; unlocks publish "0" on `redisson_lock__channel:{name}`; a fenced grant takes its
// token from `redisson_lock_token:{name}` (Redisson's RFencedLock key).
#include "lock/protocols/common.hpp"

namespace redlease::detail::protocols {
namespace {

const lua_script& release_allow_oom() {
  static const allow_oom s(lua::release, "release_allow_oom");
  return s.script;
}

class reentrant_protocol final : public owner_hash_protocol {
 public:
  bool release_sets_remaining_lease() const override { return true; }
  std::string channel(std::string_view name) const override { return tagged("redisson_lock__channel", name); }

  const lua_script& acquire_script(bool fenced) const override { return fenced ? lua::fenced_acquire : lua::acquire; }
  void encode_acquire(arg_list& a, const acquire_request& r) const override {
    if (r.fenced) {
      a.add(2LL).add(r.name).add(tagged("redisson_lock_token", r.name)).add(r.lease.count()).add(r.field);
      return;
    }
    a.add(1LL).add(r.name).add(r.lease.count()).add(r.field);
  }
  acquire_result decode_acquire(const reply& r) const override { return decode_grant_or_pttl(r); }

  const lua_script* release_script(bool allow_oom) const override {
    return allow_oom ? &release_allow_oom() : &lua::release;
  }
  void encode_release(arg_list& a, const release_request& r) const override {
    a.add(2LL).add(r.name).add(latch_key(r.name, r.request)).add(channel(r.name));
    a.add("0").add(r.remaining_lease.count()).add(r.field).add(r.expected).add(r.retry ? "1" : "0");
    a.add(r.latch_ttl.count()).add(r.publish);
  }
};

}  // namespace

const lock_protocol& reentrant() {
  static const reentrant_protocol p;
  return p;
}

}  // namespace redlease::detail::protocols
