// SPDX-License-Identifier: MIT
// The lock-kind seam. A lock kind is a protocol: its scripts and how their replies read, the
// channel its releases publish on and whom they wake, and what a hold of it is. One wait engine and
// one watchdog (lock_service) drive every protocol; a new kind (fair lock, read-write lock,
// semaphore) is a new protocol with its scripts and tests, and no branch in the engine.
// Sans-io: a protocol encodes arguments and decodes replies; it never sends anything itself.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/command.hpp"
#include "base/script.hpp"
#include "redlease/reply.hpp"
#include "redlease/lock.hpp"

namespace redlease::detail {

/// What one acquisition attempt sends.
struct acquire_request {
  std::string_view name;
  std::string_view field;  // the owner's field "<client-uuid>:<owner>" (kinds that key by owner)
  std::string_view id;     // this attempt's random id (kinds with `per_attempt_id`)
  ms lease{0};
  bool fenced = false;     // return a fencing token with the grant
  ms allowance{0};         // the place kept in a queue after each call (fair lock); 0: never queued
  bool queue = false;      // the acquisition waits if it does not get the lock (fair lock: join the queue)
  long long amount = 1;    // how many units one acquisition takes (a semaphore's permits); 1 for a lock
  std::string_view publish = "publish";  // the scripts' publish command (topology::publish_command)
  // Settled exactly-once keys of this name (latch_sweeper) the script deletes in passing (kinds with
  // `sweeps_settled_keys`); they share the name's slot.
  std::span<const std::string> sweep{};
};

/// What an acquisition attempt's reply says.
struct acquire_result {
  // would_deadlock: the owner's own hold stands in the way (a read-write upgrade): refused at once.
  enum class kind { granted, busy, would_deadlock, bad } what = kind::bad;
  std::optional<long long> pttl;  // busy: the holder's remaining lease (-1: no expiry; empty: unknown, waited as -1)
  std::uint64_t token = 0;        // granted and fenced: the fencing token
  // busy: the caller waits in a queue behind another waiter, which alone is handed the lock next
  // (a fair lock): it need not watch for a free lock as often as a waiter at the head.
  bool behind = false;
};

/// What one release sends (see release.lua for the reentrant meaning of each).
struct release_request {
  std::string_view name;
  std::string_view field;
  std::string_view id;       // the hold's token (kinds with `per_attempt_id`)
  std::string_view request;  // this release's id (the latch of an idempotent retry)
  ms remaining_lease{0};     // the lease the holds that remain keep
  long long expected = 0;    // the hold count the client expects before this release
  bool retry = false;        // a retry of a release whose reply never came
  ms latch_ttl{0};
  std::string_view publish = "publish";  // the scripts' publish command (topology::publish_command)
  long long amount = 1;      // how many units the release gives back (a semaphore's permits)
  std::span<const std::string> sweep{};  // as acquire_request::sweep
};

/// Whom a message on a kind's channel wakes among a client's waiters on that channel (in the order
/// they began to wait): nobody, the first, or all of them.
enum class wake_policy { none, one, all };

/// What a release's reply says.
enum class release_result { freed, decremented, not_held, bad };

/// One hold in a watchdog renewal call.
struct renew_item {
  std::string_view name;
  std::string_view id;  // the hold's token (kinds with `per_attempt_id`), else its owner's field
  bool by_owner = true; // `id` is the owner's field (a run of one owner's holds may send it once)
  char letter = 'h';    // the kind's letter in its renewal script (lock_protocol::renew_letter)
};

/// What a renewal call says of one of its holds.
enum class renew_outcome {
  renewed,    // the lease was set again (or, when only checking, the hold is there)
  gone,       // the key is gone (deleted, expired, or not on a new master)
  taken,      // another owner holds it
  wrong_type, // a key of another type stands in its place
  bad_count,  // the hold count is not one this client made
  unknown,    // the reply said nothing of it (an error, a reply no script sends)
};

/// The watchdog's script for some kinds and how its arguments and reply read. Holds whose kinds
/// share one codec go in one call. Sans-io; the objects live for ever and are thread-safe.
class renewal_codec {
 public:
  virtual ~renewal_codec() = default;
  virtual const lua_script& script() const = 0;
  /// The arguments for `items` (one slot's keys); `lease` 0 checks ownership and leaves the lease.
  virtual void encode(arg_list& a, std::span<const renew_item> items, ms lease) const = 0;
  /// Fills `out` (one per item, in order) from the call's reply.
  virtual void decode(const reply& r, std::span<renew_outcome> out) const = 0;
};

/// Reads the failure pairs {index from 1, code} that renew.lua's contract returns into `out` (every
/// item renewed unless listed; 0 gone, 2 taken, 3 wrong type, 4 a count this client did not make);
/// a reply that is no array leaves every item `unknown`.
void decode_renew_failures(const reply& r, std::span<renew_outcome> out);

/// renew.lua's and rw_renew.lua's codec: KEYS the names; ARGV the lease, one letter per key, one id
/// per key (empty: the previous one); the reply lists the failures only, as pairs {index, code}
/// (0 gone, 2 taken, 3 wrong type, 4 a count this client did not make).
const renewal_codec& renew_lua_codec();
const renewal_codec& rw_renew_lua_codec();
class lock_protocol {
 public:
  virtual ~lock_protocol() = default;
  /// The channel this kind's releases publish on (Redisson's name for Redisson's kinds).
  virtual std::string channel(std::string_view name) const = 0;
  /// Whether the kind's acquire script can hand out fencing tokens.
  virtual bool fencing() const { return true; }
  /// Whether an owner may acquire again while it holds (else `would_deadlock`).
  virtual bool reentrant() const = 0;
  /// Whether each attempt carries a fresh random id that the hold keeps (a mutex's token).
  virtual bool per_attempt_id() const = 0;
  /// A fresh id for an attempt that takes `amount` units (kinds with `per_attempt_id`): 128 random
  /// bits in hex by default; a kind whose grant is several things (a permit-expirable semaphore's
  /// permits) may say in it how many, so that the hold's token names all of them.
  virtual std::string attempt_id(long long amount) const;
  /// Whether a waiter also listens to the key's keyspace events (a holder of another library may
  /// release without publishing).
  virtual bool keyspace_wake() const = 0;
  /// Whether a release needs the local hold (its token): without it, nothing could be released.
  virtual bool release_needs_hold() const = 0;
  /// Whether a release that leaves levels sets the key's TTL to at least `remaining_lease` (Redisson's
  /// unlock of a re-entered hold sets its lease again): the hold's deadline then counts from that
  /// release, whatever the level given back had. Else the TTL is left as it was.
  virtual bool release_sets_remaining_lease() const { return false; }
  /// The Redis type of the lock's key ("hash" for Redisson's kinds, "string" for the mutex): a release
  /// that meets WRONGTYPE asks the key's type, to tell a lock replaced by a key of another type (the
  /// hold is lost) from another key of the kind's (a fair queue) holding the wrong type.
  virtual std::string_view key_type() const { return "hash"; }
  /// Why a hold that a release finds not held was lost.
  virtual lost_reason not_held_reason() const = 0;
  /// How deep one owner's hold may nest (further acquisitions fail with `invalid_argument`, nothing
  /// sent): a read hold has a key per level, which its scripts look at within a fixed budget.
  virtual std::size_t max_levels() const { return static_cast<std::size_t>(-1); }
  /// Whom a message `payload` on the kind's channel wakes. Redisson's rule (LockPubSub) by default:
  /// "1" (a write lock's release) all of them, anything else (its unlock "0") the first, who passes
  /// the wake-up on if it gives up without the lock. A kind whose message carries a count or a state
  /// (a semaphore's permits, a latch reaching zero) says so here; no other part of the engine reads it.
  virtual wake_policy wakes(std::string_view payload) const { return payload == "1" ? wake_policy::all : wake_policy::one; }
  /// How many units a message `payload` says are available (a semaphore's permits), for a kind whose
  /// waiters take several: the engine then wakes, in the order they began to wait, each waiter whose
  /// amount still fits in what is left. Empty (every lock kind): `wakes` decides.
  virtual std::optional<long long> units_available(std::string_view /*payload*/) const { return std::nullopt; }
  /// The channel a waiter of `field` listens on: the kind's channel, or one of its own (a fair lock
  /// hands the lock to the head of its queue only, on that waiter's channel).
  virtual std::string waiter_channel(std::string_view name, std::string_view /*field*/) const { return channel(name); }
  /// Whether a waiter's channel stays subscribed for a while after its last waiter left (a channel of
  /// one owner's, which that owner's next wait reuses: no SUBSCRIBE and UNSUBSCRIBE per wait).
  virtual bool linger() const { return false; }
  /// Whether a waiter re-checks at least every `config::mutex_poll_cap` even without a message
  /// (a holder of another library, or Redisson's give-up and delete, may wake nobody). A waiter
  /// whose last reply said it is `behind` another in a queue re-checks every ten caps instead, and
  /// at least three times per queue allowance (lock_service::poll_interval).
  virtual bool poll_capped() const { return false; }
  /// Whether, of a client's poll-capped waiters on one channel, only the first re-checks (the others
  /// wait for the message its grant and release bring, and take over the polling when it leaves).
  /// Right for a kind whose grant excludes everyone else: a re-check by the others could only find
  /// the lock taken. Not for one whose grant may admit the waiters behind it (readers).
  virtual bool one_poller_per_channel() const { return false; }
  /// What a waiter that gives up without the lock must tell the server (leave the fair lock's
  /// queue); nullptr: nothing. Also sent after the undo of a grant whose reply never came.
  virtual const lua_script* give_up_script() const { return nullptr; }
  virtual void encode_give_up(arg_list& /*a*/, const acquire_request& /*r*/) const {}

  /// The forced unlock: its script (force_unlock.lua: delete, publish on the kind's channel) and
  /// arguments; the fair lock's also purges dead waiters and wakes its head on the head's own channel
  /// (Redisson's forceUnlock of each kind).
  virtual const lua_script& force_unlock_script() const;
  /// `publish`: the script's publish command (topology::publish_command).
  virtual void encode_force_unlock(arg_list& a, std::string_view name, std::string_view publish) const;

  virtual const lua_script& acquire_script(bool fenced) const = 0;
  virtual void encode_acquire(arg_list& a, const acquire_request& r) const = 0;
  virtual acquire_result decode_acquire(const reply& r) const = 0;

  /// The release script; `allow_oom` asks for its Redis 7 variant with the allow-oom flag, where
  /// the kind has one (nullptr otherwise).
  virtual const lua_script* release_script(bool allow_oom) const = 0;
  virtual void encode_release(arg_list& a, const release_request& r) const = 0;
  virtual release_result decode_release(const reply& r) const = 0;

  /// Gives back a grant whose reply never came: `before` holds were known before it. `allow_oom`
  /// as for release_script (nullptr: the kind has no such variant). The release script by default.
  virtual const lua_script* undo_script(bool allow_oom) const { return release_script(allow_oom); }
  virtual void encode_undo(arg_list& a, const release_request& r) const = 0;

  /// The watchdog's renewal of this kind's holds (holds whose kinds share a codec share a call), and
  /// this kind's letter in it ("h": a hash field, "s": a string token, "r"/"w": a read or write hold).
  virtual const renewal_codec& renewal() const = 0;
  virtual char renew_letter() const = 0;
  /// The key a granted attempt `id` leaves for an undo of it to read (the plain semaphore's grant
  /// mark), or empty. Once the grant is delivered nothing reads it again: the engine hands it to the
  /// client's latch_sweeper.
  virtual std::string grant_mark(std::string_view /*name*/, std::string_view /*id*/) const { return {}; }
  /// Whether the acquire script deletes the settled keys of `acquire_request::sweep` in passing.
  virtual bool sweeps_settled_keys() const { return false; }
  /// Whether a grant is a hold the client keeps, renews and releases. A wait that only waits (a
  /// count-down latch's await) is granted and forgotten: no hold, no renewal.
  virtual bool grant_is_hold() const { return true; }

  /// A status read of the lock's key: whether it exists (EXISTS) and its remaining TTL in ms (PTTL:
  /// -1 no expiry, -2 no key).
  virtual void encode_is_locked(std::string& out, std::string_view name) const;
  virtual std::optional<bool> decode_is_locked(const reply& r) const;
  virtual void encode_remaining_ttl(std::string& out, std::string_view name) const;
  virtual std::optional<long long> decode_remaining_ttl(const reply& r) const;

  /// The command that reads how many holds an owner has (`field`: the owner's; `token`: the hold's
  /// per-attempt id, empty without one), and its reply.
  virtual void encode_hold_count(std::string& out, std::string_view name, std::string_view field,
                                 std::string_view token) const = 0;
  /// The holder as `redlease status` lists it, from the hold's owner field and its token (a
  /// per-attempt token names the holder of a kind that has one).
  virtual std::string holder_field(std::string field, const std::string& token) const {
    return per_attempt_id() ? token : field;
  }
  virtual std::optional<long long> decode_hold_count(const reply& r, std::string_view token) const = 0;
};

/// The protocol of a kind. The objects live forever; thread-safe (they hold no state).
const lock_protocol& protocol_of(lock_kind kind) noexcept;

}  // namespace redlease::detail
