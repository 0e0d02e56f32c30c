// SPDX-License-Identifier: MIT
// Redisson's read-write lock (RReadWriteLock), what its two sides share: one hash for both (`mode`,
// reader fields, the writer field `<owner>:write`), per-acquisition reader timeout keys, one channel
// `redisson_rwlock:{name}` on which "0" wakes one waiter and "1" (a write release) wakes them all.
#pragma once

#include "lock/protocols/common.hpp"

namespace redlease::detail::protocols {

class rw_protocol : public owner_hash_protocol {
 public:
  std::string channel(std::string_view name) const override { return tagged("redisson_rwlock", name); }
  // "1" wakes every waiter, readers and writers (Redisson's write forceUnlock): the lock is free.
  void encode_force_unlock(arg_list& a, std::string_view name, std::string_view publish) const override {
    a.add(1LL).add(name).add(channel(name)).add("1").add(publish);
  }
  // Redisson's downgrade (a write unlock that leaves reads) publishes nothing, nor does its
  // delete(), and a "0" wakes one local waiter of several: a waiter re-checks every poll cap rather
  // than sleep out the holder's whole PTTL.
  bool poll_capped() const override { return true; }

  // Fenced: a second key, `redlease_rwlock_token:{name}`, one sequence for readers and writers.
  void encode_acquire(arg_list& a, const acquire_request& r) const override {
    a.add(r.fenced ? 2LL : 1LL).add(r.name);
    if (r.fenced) a.add(tagged("redlease_rwlock_token", r.name));
    a.add(r.lease.count()).add(r.field);
  }
  acquire_result decode_acquire(const reply& r) const override {
    if (r.type == reply::kind::status && r.str == "WOULD_DEADLOCK") {
      acquire_result out;
      out.what = acquire_result::kind::would_deadlock;
      return out;
    }
    return decode_grant_or_pttl(r);
  }
  const renewal_codec& renewal() const override { return rw_renew_lua_codec(); }
};

}  // namespace redlease::detail::protocols
