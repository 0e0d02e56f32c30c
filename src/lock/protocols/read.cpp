// SPDX-License-Identifier: MIT
// The read side of Redisson's read-write lock: a reader field per owner in the hash, and a timeout
// key `{name}:<field>:rwlock_timeout:<level>` per level it holds.
#include "lock/protocols/read_write.hpp"

namespace redlease::detail::protocols {
namespace {

class read_protocol final : public rw_protocol {
 public:
  // The scripts' budget of timeout keys per call (src/lua/include/max_read_levels.lua).
  std::size_t max_levels() const override { return 1000; }
  const lua_script& acquire_script(bool) const override { return lua::rw_read_acquire; }
  const lua_script* release_script(bool oom) const override {
    static const allow_oom flagged(lua::rw_read_release, "rw_read_release_allow_oom");
    return oom ? &flagged.script : &lua::rw_read_release;
  }
  void encode_release(arg_list& a, const release_request& r) const override {
    a.add(2LL).add(r.name).add(latch_key(r.name, r.request));
    a.add(channel(r.name)).add(r.publish).add(r.field).add(r.expected).add(r.retry ? "1" : "0").add(r.latch_ttl.count());
  }
  char renew_letter() const override { return 'r'; }
};

}  // namespace

const lock_protocol& read() {
  static const read_protocol p;
  return p;
}

}  // namespace redlease::detail::protocols
