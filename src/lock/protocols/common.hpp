// SPDX-License-Identifier: MIT
// What the lock kinds' protocols share: reply decoders, the allow-oom variants of release scripts,
// the clock the fair queue's deadlines use, and one accessor per kind for the registry.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "lock/naming.hpp"
#include "lock/protocol.hpp"
#include "redlease_lua.hpp"

namespace redlease::detail::protocols {

/// A release script with Redis 7's `allow-oom` flag: a release that only takes a hold away must work
/// on a server that is out of memory, also when it decrements (HINCRBY), latches a retry (SET) or
/// moves a read-write lock's mode. One static object per script: `script` views its own strings.
struct allow_oom {
  allow_oom(const lua_script& plain, std::string_view name);
  allow_oom(const allow_oom&) = delete;
  allow_oom& operator=(const allow_oom&) = delete;
  const std::string body, sha;
  const lua_script script;
};

/// A grant: nil (plain scripts) or the fencing token in decimal digits; contention: the holder's PTTL.
acquire_result decode_grant_or_pttl(const reply& r);
/// The hash kinds' release reply (release.lua's contract): nil not held, 0 one hold less, 1 freed.
release_result decode_count_release(const reply& r);
/// A hold count stored in a hash field (HGET): nil is 0; anything but a number is a bad reply.
std::optional<long long> decode_count_field(const reply& r);
/// The undo of a hash kind's grant whose reply never came: its release in retry mode, which takes a
/// hold only if the count is the one the lost grant would have made.
release_request retried(release_request r);
/// Epoch milliseconds of this client's clock (the fair queue's deadlines, as Redisson writes them).
long long epoch_ms();

/// What Redisson's hash kinds share (the reentrant, fair and read-write locks): holds keyed by the
/// owner's field in a hash, counted per owner; releases latched and answered as release.lua does;
/// the undo of a lost grant is its release in retry mode; renewed by renew.lua as "h".
class owner_hash_protocol : public lock_protocol {
 public:
  bool reentrant() const override { return true; }
  bool per_attempt_id() const override { return false; }
  bool keyspace_wake() const override { return false; }
  bool release_needs_hold() const override { return false; }
  lost_reason not_held_reason() const override { return lost_reason::deleted; }
  release_result decode_release(const reply& r) const override { return decode_count_release(r); }
  // The release script in retry mode with the count the lost acquire would have produced: it
  // decrements only if the server count is that one, and is a no-op if the acquire never ran.
  void encode_undo(arg_list& a, const release_request& r) const override { encode_release(a, retried(r)); }
  const renewal_codec& renewal() const override { return renew_lua_codec(); }
  char renew_letter() const override { return 'h'; }
  void encode_hold_count(std::string& out, std::string_view name, std::string_view field,
                         std::string_view) const override {
    encode_command(out, {"HGET", name, field});
  }
  std::optional<long long> decode_hold_count(const reply& r, std::string_view) const override {
    return decode_count_field(r);
  }
};

// The registry's entries, one per file.
const lock_protocol& reentrant();
const lock_protocol& mutex();
const lock_protocol& fair();
const lock_protocol& read();
const lock_protocol& write();
const lock_protocol& semaphore();
const lock_protocol& latch();
const lock_protocol& permit_semaphore();

/// A semaphore's message: the count available it carries, 0 for anything that is no count (wakes
/// nobody by count). Thread-safe (pure).
std::optional<long long> count_payload(std::string_view payload);

/// The permits of a permit-expirable semaphore's hold from its token ("<32 hex>" or "<32 hex>+<n>",
/// permit_semaphore_protocol::attempt_id): how many, and their 16-byte ids (the first from the
/// hex digits, the i-th that plus i in its last four bytes); `add_ids` appends the ids as arguments.
long long permit_count(std::string_view token);
std::vector<std::string> permit_ids(std::string_view token);
void add_ids(arg_list& a, std::string_view token);

}  // namespace redlease::detail::protocols
