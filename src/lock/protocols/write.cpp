// SPDX-License-Identifier: MIT
// The write side of Redisson's read-write lock: the writer's field `<field>:write` in the hash, with
// `mode` "write"; a write release publishes "1" (every waiter may enter) when it frees the lock.
#include "lock/protocols/read_write.hpp"

namespace redlease::detail::protocols {
namespace {

class write_protocol final : public rw_protocol {
 public:
  bool release_sets_remaining_lease() const override { return true; }
  const lua_script& acquire_script(bool) const override { return lua::rw_write_acquire; }
  const lua_script* release_script(bool oom) const override {
    static const allow_oom flagged(lua::rw_write_release, "rw_write_release_allow_oom");
    return oom ? &flagged.script : &lua::rw_write_release;
  }
  void encode_release(arg_list& a, const release_request& r) const override {
    a.add(2LL).add(r.name).add(latch_key(r.name, r.request));
    a.add(channel(r.name)).add(r.publish).add(r.remaining_lease.count()).add(r.field).add(r.expected);
    a.add(r.retry ? "1" : "0").add(r.latch_ttl.count());
  }
  char renew_letter() const override { return 'w'; }
  void encode_hold_count(std::string& out, std::string_view name, std::string_view field,
                         std::string_view) const override {
    encode_command(out, {"HGET", name, holder_field(std::string(field), {})});
  }
  // The writer's field in the hash: the owner's, suffixed.
  std::string holder_field(std::string field, const std::string&) const override { return field + ":write"; }
};

}  // namespace

const lock_protocol& write() {
  static const write_protocol p;
  return p;
}

}  // namespace redlease::detail::protocols
