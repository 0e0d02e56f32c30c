// SPDX-License-Identifier: MIT
// The two kinds redlease had before the seam, as protocols: Redisson's reentrant lock (a hash of
// owner fields and hold counts) and the SET NX PX mutex (a string holding a random token).
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <charconv>

#include "lock/lock_service.hpp"
#include "lock/protocol.hpp"
#include "redlease_lua.hpp"

namespace redlease::detail {
namespace {

std::string sha1_hex(std::string_view text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text.data(), text.size(), md, &n, EVP_sha1(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(hex[md[i] >> 4]);
    out.push_back(hex[md[i] & 15]);
  }
  return out;
}

// A release script with Redis 7's `allow-oom` flag: a release that only takes a hold away must work
// on a server that is out of memory, also when it decrements (HINCRBY), latches a retry (SET) or
// moves a read-write lock's mode. One static object per script: `script` views its own strings.
struct allow_oom {
  allow_oom(const lua_script& plain, std::string_view name)
      : body("#!lua flags=allow-oom\n" + std::string(plain.body)), sha(sha1_hex(body)), script{name, body, sha} {}
  allow_oom(const allow_oom&) = delete;
  allow_oom& operator=(const allow_oom&) = delete;
  const std::string body, sha;
  const lua_script script;
};

const lua_script& release_allow_oom() {
  static const allow_oom s(lua::release, "release_allow_oom");
  return s.script;
}

// `prefix:{name}`, or `prefix:name` when the name already has a hash tag (the channel then shares
// the key's cluster slot).
std::string tagged(std::string_view prefix, std::string_view name) {
  std::string out;
  out.reserve(prefix.size() + name.size() + 3);
  out.append(prefix).push_back(':');
  bool tag = name.find('{') == std::string_view::npos;
  if (tag) out.push_back('{');
  out.append(name);
  if (tag) out.push_back('}');
  return out;
}

// A grant: nil (plain scripts) or the fencing token in decimal digits; contention: the holder's PTTL.
acquire_result decode_grant_or_pttl(const reply& r) {
  acquire_result out;
  if (r.is_nil()) {
    out.what = acquire_result::kind::granted;
  } else if (r.is_integer()) {
    out.what = acquire_result::kind::busy;
    out.pttl = r.integer;
  } else if (r.is_string()) {
    // A fenced grant: the token in decimal digits, above 0. Anything else is a bad reply.
    std::uint64_t token = 0;
    auto [p, e] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), token);
    if (e == std::errc() && p == r.str.data() + r.str.size() && token > 0) {
      out.what = acquire_result::kind::granted;
      out.token = token;
    }
  }
  return out;
}

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

// The hash kinds' release reply (release.lua's contract): nil not held, 0 one hold less, 1 freed.
release_result decode_count_release(const reply& r) {
  if (r.is_nil()) return release_result::not_held;
  if (!r.is_integer()) return release_result::bad;
  return r.integer == 1 ? release_result::freed : release_result::decremented;
}

// A hold count stored in a hash field (HGET): nil is 0; anything but a number is a bad reply.
std::optional<long long> decode_count_field(const reply& r) {
  if (r.is_nil()) return 0;
  long long v = 0;
  auto [p, e] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), v);
  if (!r.is_string() || e != std::errc{} || p != r.str.data() + r.str.size()) return std::nullopt;
  return v;
}

// The undo of a hash kind's grant whose reply never came: its release in retry mode, which takes a
// hold only if the count is the one the lost grant would have made.
release_request retried(release_request r) {
  r.retry = true;
  return r;
}

class reentrant_protocol final : public lock_protocol {
 public:
  bool release_sets_remaining_lease() const override { return true; }
  std::string channel(std::string_view name) const override { return tagged("redisson_lock__channel", name); }
  bool reentrant() const override { return true; }
  bool per_attempt_id() const override { return false; }
  bool keyspace_wake() const override { return false; }
  bool release_needs_hold() const override { return false; }
  lost_reason not_held_reason() const override { return lost_reason::deleted; }

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
    a.add(r.latch_ttl.count());
  }
  release_result decode_release(const reply& r) const override { return decode_count_release(r); }

  // The release script in retry mode with the count the lost acquire would have produced: it
  // decrements only if the server count is that one, and is a no-op if the acquire never ran.
  void encode_undo(arg_list& a, const release_request& r) const override { encode_release(a, retried(r)); }

  const lua_script& renew_script() const override { return lua::renew; }
  char renew_letter() const override { return 'h'; }
  void encode_hold_count(std::string& out, std::string_view name, std::string_view field) const override {
    encode_command(out, {"HGET", name, field});
  }
  std::optional<long long> decode_hold_count(const reply& r, std::string_view) const override {
    return decode_count_field(r);
  }
};

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
    a.add(1LL).add(r.name).add(channel(r.name)).add(r.id);
  }
  // The token is the hold's alone: a release that finds it gone after an earlier attempt whose reply
  // never came knows that attempt ran (the engine reads not_held on a retry that way).
  release_result decode_release(const reply& r) const override {
    if (!r.is_integer()) return release_result::bad;
    return r.integer == 1 ? release_result::freed : release_result::not_held;
  }

  // The token is this attempt's alone: delete the key only if it holds it.
  void encode_undo(arg_list& a, const release_request& r) const override { encode_release(a, r); }

  const lua_script& renew_script() const override { return lua::renew; }
  char renew_letter() const override { return 's'; }
  void encode_hold_count(std::string& out, std::string_view name, std::string_view) const override {
    encode_command(out, {"GET", name});
  }
  std::optional<long long> decode_hold_count(const reply& r, std::string_view token) const override {
    return (!token.empty() && r.is_string() && r.str == token) ? 1 : 0;
  }
};

// Deadlines in the fair lock's zset are epoch milliseconds of the clients' clocks, as Redisson
// writes them: every client of one lock must use the same kind of clock to share its queue.
long long epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
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

class fair_protocol final : public lock_protocol {
 public:
  bool release_sets_remaining_lease() const override { return true; }
  std::string channel(std::string_view name) const override { return tagged("redisson_lock__channel", name); }
  std::string waiter_channel(std::string_view name, std::string_view field) const override {
    return channel(name) + ":" + std::string(field);
  }
  bool reentrant() const override { return true; }
  bool per_attempt_id() const override { return false; }
  bool keyspace_wake() const override { return false; }
  bool release_needs_hold() const override { return false; }
  bool poll_capped() const override { return true; }
  bool linger() const override { return true; }
  lost_reason not_held_reason() const override { return lost_reason::deleted; }

  // Fenced: a fourth key, the reentrant lock's token key (one name, one sequence).
  const lua_script& acquire_script(bool) const override { return lua::fair_acquire; }
  void encode_acquire(arg_list& a, const acquire_request& r) const override {
    a.add(r.fenced ? 4LL : 3LL).add(r.name).add(tagged("redisson_lock_queue", r.name));
    a.add(tagged("redisson_lock_timeout", r.name));
    if (r.fenced) a.add(tagged("redisson_lock_token", r.name));
    a.add(r.lease.count()).add(r.field).add(allowance_of(r)).add(epoch_ms()).add(r.queue ? "1" : "0");
    a.add(channel(r.name)).add("publish");
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
    a.add(channel(r.name)).add("publish").add(r.remaining_lease.count()).add(r.field).add(r.expected);
    a.add(r.retry ? "1" : "0").add(r.latch_ttl.count()).add(epoch_ms());
  }
  release_result decode_release(const reply& r) const override { return decode_count_release(r); }
  void encode_undo(arg_list& a, const release_request& r) const override { encode_release(a, retried(r)); }
  const lua_script& force_unlock_script() const override { return lua::fair_force_unlock; }
  void encode_force_unlock(arg_list& a, std::string_view name) const override {
    a.add(3LL).add(name).add(tagged("redisson_lock_queue", name)).add(tagged("redisson_lock_timeout", name));
    a.add(channel(name)).add("0").add(epoch_ms());
  }
  const lua_script* give_up_script() const override { return &lua::fair_cancel; }
  void encode_give_up(arg_list& a, const acquire_request& r) const override {
    a.add(3LL).add(r.name).add(tagged("redisson_lock_queue", r.name)).add(tagged("redisson_lock_timeout", r.name));
    a.add(r.field).add(give_up_allowance_of(r)).add(channel(r.name)).add("publish").add(epoch_ms());
  }

  const lua_script& renew_script() const override { return lua::renew; }
  char renew_letter() const override { return 'h'; }
  void encode_hold_count(std::string& out, std::string_view name, std::string_view field) const override {
    encode_command(out, {"HGET", name, field});
  }
  std::optional<long long> decode_hold_count(const reply& r, std::string_view) const override {
    return decode_count_field(r);
  }
};

// Redisson's read-write lock: one hash for both sides (`mode`, reader fields, the writer field
// `<owner>:write`), per-acquisition reader timeout keys, one channel `redisson_rwlock:{name}` on
// which "0" wakes one waiter and "1" (a write release) wakes them all.
class rw_protocol : public lock_protocol {
 public:
  std::string channel(std::string_view name) const override { return tagged("redisson_rwlock", name); }
  // "1" wakes every waiter, readers and writers (Redisson's write forceUnlock): the lock is free.
  void encode_force_unlock(arg_list& a, std::string_view name) const override {
    a.add(1LL).add(name).add(channel(name)).add("1");
  }
  bool reentrant() const override { return true; }
  bool per_attempt_id() const override { return false; }
  bool keyspace_wake() const override { return false; }
  bool release_needs_hold() const override { return false; }
  // Redisson's downgrade (a write unlock that leaves reads) publishes nothing, nor does its
  // delete(), and a "0" wakes one local waiter of several: a waiter re-checks every poll cap rather
  // than sleep out the holder's whole PTTL.
  bool poll_capped() const override { return true; }
  lost_reason not_held_reason() const override { return lost_reason::deleted; }

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
  release_result decode_release(const reply& r) const override { return decode_count_release(r); }
  void encode_undo(arg_list& a, const release_request& r) const override { encode_release(a, retried(r)); }
  const lua_script& renew_script() const override { return lua::rw_renew; }
  std::optional<long long> decode_hold_count(const reply& r, std::string_view) const override {
    return decode_count_field(r);
  }
};

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
    a.add(channel(r.name)).add("publish").add(r.field).add(r.expected).add(r.retry ? "1" : "0").add(r.latch_ttl.count());
  }
  char renew_letter() const override { return 'r'; }
  void encode_hold_count(std::string& out, std::string_view name, std::string_view field) const override {
    encode_command(out, {"HGET", name, field});
  }
};

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
    a.add(channel(r.name)).add("publish").add(r.remaining_lease.count()).add(r.field).add(r.expected);
    a.add(r.retry ? "1" : "0").add(r.latch_ttl.count());
  }
  char renew_letter() const override { return 'w'; }
  void encode_hold_count(std::string& out, std::string_view name, std::string_view field) const override {
    std::string f(field);
    f += ":write";
    encode_command(out, {"HGET", name, f});
  }
};

}  // namespace

const lua_script& lock_protocol::force_unlock_script() const { return lua::force_unlock; }

void lock_protocol::encode_force_unlock(arg_list& a, std::string_view name) const {
  a.add(1LL).add(name).add(channel(name)).add("0");
}

const lock_protocol& protocol_of(lock_kind kind) noexcept {
  static const reentrant_protocol reentrant;
  static const mutex_protocol mutex;
  static const fair_protocol fair;
  static const read_protocol read;
  static const write_protocol write;
  // The registry of kinds: indexed by the public enum's value.
  static const lock_protocol* const table[] = {&reentrant, &mutex, &fair, &read, &write};
  return *table[static_cast<std::size_t>(kind)];
}

}  // namespace redlease::detail
