// SPDX-License-Identifier: MIT
// The SET NX PX mutex: a string `name` holding the holder's random token; unlocks publish on
// `redlease_mutex__channel:{name}`, and waiters also listen to the key's keyspace events (a holder
// of another library releases without publishing); a fenced grant takes its token from
// `redlease_mutex_token:{name}`.
#include "lock/protocols/common.hpp"

namespace redlease::detail::protocols {
namespace {

class mutex_protocol final : public lock_protocol {
 public:
  std::string channel(std::string_view name) const override { return tagged("redlease_mutex__channel", name); }
  bool reentrant() const override { return false; }
  bool per_attempt_id() const override { return true; }
  bool keyspace_wake() const override { return true; }
  bool release_needs_hold() const override { return true; }
  bool one_poller_per_channel() const override { return true; }
  lost_reason not_held_reason() const override { return lost_reason::taken; }

  const lua_script& acquire_script(bool fenced) const override {
    return fenced ? lua::mutex_fenced_acquire : lua::mutex_acquire;
  }
  void encode_acquire(arg_list& a, const acquire_request& r) const override {
    if (r.fenced) {
      a.add(2LL).add(r.name).add(tagged("redlease_mutex_token", r.name)).add(r.id).add(r.lease.count());
      return;
    }
    a.add(1LL).add(r.name).add(r.id).add(r.lease.count());
  }
  acquire_result decode_acquire(const reply& r) const override { return decode_grant_or_pttl(r); }

  const lua_script* release_script(bool allow_oom) const override {
    return allow_oom ? nullptr : &lua::mutex_release;  // GET, DEL, PUBLISH: allowed out of memory
  }
  std::string_view key_type() const override { return "string"; }
  void encode_release(arg_list& a, const release_request& r) const override {
    a.add(1LL).add(r.name).add(channel(r.name)).add(r.id).add(r.publish);
  }
  // The token is the hold's alone: a release that finds it gone after an earlier attempt whose reply
  // never came knows that attempt ran (the engine reads not_held on a retry that way).
  release_result decode_release(const reply& r) const override {
    if (!r.is_integer()) return release_result::bad;
    return r.integer == 1 ? release_result::freed : release_result::not_held;
  }

  // The token is this attempt's alone: delete the key only if it holds it.
  void encode_undo(arg_list& a, const release_request& r) const override { encode_release(a, r); }

  const renewal_codec& renewal() const override { return renew_lua_codec(); }
  char renew_letter() const override { return 's'; }
  void encode_hold_count(std::string& out, std::string_view name, std::string_view, std::string_view) const override {
    encode_command(out, {"GET", name});
  }
  std::optional<long long> decode_hold_count(const reply& r, std::string_view token) const override {
    return (!token.empty() && r.is_string() && r.str == token) ? 1 : 0;
  }
};

}  // namespace

const lock_protocol& mutex() {
  static const mutex_protocol p;
  return p;
}

}  // namespace redlease::detail::protocols
