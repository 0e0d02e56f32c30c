// SPDX-License-Identifier: MIT
/// @file
/// The wire layout of each lock kind: which Redis keys and channels a lock of a given name uses,
/// the type each key must have, and the ACL patterns a user restricted to a key prefix needs; and
/// the Lua scripts the library sends, with the SHA1 Redis knows each by.
///
/// The names are Redisson's where the kind is Redisson's (`redisson_lock__channel:{NAME}`,
/// `redisson_lock_queue:{NAME}`, ...), so tools and operators can look at locks that Redisson and
/// redlease share. Every name derived from a lock name carries that name in a hash tag
/// (`prefix:{NAME}`), or the name itself when it already contains a `{` (`prefix:NAME`), so that
/// it lands in the lock's cluster slot.
///
/// **Example**:
/// @code
/// auto l = redlease::describe(redlease::lock_kind::fair, "orders");
/// for (const auto& k : l.keys) std::cout << k.key << " (" << k.type << "): " << k.purpose << "\n";
/// // orders (hash): the lock: owner field -> hold count
/// // redisson_lock_queue:{orders} (list): the waiters' queue, head first
/// // ...
/// @endcode
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "redlease/lock.hpp"

namespace redlease {

/// One key of a lock's layout.
struct layout_key {
  /// The key's name.
  std::string key;
  /// The Redis type the key must have, as `TYPE` answers it: "hash", "string", "list" or "zset".
  std::string_view type;
  /// What the kind keeps there, in a few words.
  std::string_view purpose;
};

/// One channel of a lock's layout.
struct layout_channel {
  /// The channel's name, or with `per_waiter` a glob pattern whose `*` stands for a waiter's owner
  /// field (`<client-uuid>:<owner>`).
  std::string channel;
  /// What is published there, in a few words.
  std::string_view purpose;
  /// True for a pattern of channels of one waiter each (the fair lock's hand-off).
  bool per_waiter = false;
};

/// The keys and channels a lock of one kind and name uses, as `describe()` returns them.
///
/// Plain data plus a few functions that derive names for one owner or one release; copying is
/// cheap enough. Thread-safety: none of its functions modifies it, so any number of threads may
/// read one object at once.
struct lock_layout {
  /// The kind described.
  lock_kind kind = lock_kind::reentrant;
  /// The lock's name (the main key), as given to `describe()`.
  std::string name;

  /// The keys a lock keeps under its name, the lock itself first, then (fair lock) the queue and
  /// the deadlines, and last the fencing token key. A key of another type there makes acquisitions
  /// fail with `errc::wrong_type`. Keys per owner or per release are not listed: see
  /// `latch_key_pattern` and `read_timeout_key_pattern`.
  std::vector<layout_key> keys;
  /// The channels: the one releases publish on (every kind), and for the fair lock the pattern of
  /// each waiter's own hand-off channel (`per_waiter`).
  std::vector<layout_channel> channels;
  /// The fair lock's queue of waiters (a list of owner fields, head first); empty for the other kinds.
  std::string queue_key;
  /// The fair lock's deadlines (a zset: owner field -> epoch ms until which its place is kept);
  /// empty for the other kinds.
  std::string deadlines_key;
  /// The fencing token key (a string holding the last token handed out; one sequence per name,
  /// shared by the reentrant and the fair lock, and by the read and the write lock); empty for the
  /// semaphore and the count-down latch, which hand out none.
  std::string token_key;
  /// The pattern (`*`: a release's request id) of the keys that latch a release against a retry,
  /// so it is applied once (the count-down latch's: a `try_set_count` or `count_down` call); empty
  /// for the mutex, whose release needs none.
  std::string latch_key_pattern;
  /// The pattern of a read hold's per-level timeout keys (first `*`: the owner field, second: the
  /// level from 1); empty except for the read and write kinds. The scripts write them without
  /// declaring them among their KEYS.
  std::string read_timeout_key_pattern;

  /// ACL key patterns (each to be written after `~`) that a user needs to use this kind on every
  /// name matched by the glob `name`: the names themselves, and everything derived from them.
  /// A pattern ending in `*` stays open (its derived patterns end in `*` too, which also matches
  /// the closing brace of the hash tag). `name == "*"` gives just `*`.
  std::vector<std::string> acl_keys;
  /// ACL channel patterns (each to be written after `&`), as for `acl_keys`. Not included: the
  /// keyspace channel of the mutex (see `keyspace_channel()`), which depends on the database.
  std::vector<std::string> acl_channels;

  /// The main channel: where releases publish (`channels.front().channel`).
  const std::string& channel() const noexcept { return channels.front().channel; }
  /// The latch key of the release with request id `request` (for the semaphore also the grant mark
  /// of the acquisition attempt with that id). Empty for the mutex.
  std::string latch_key(std::string_view request) const;
  /// The hand-off channel of the fair lock's waiter with owner field `field`
  /// (`<channel>:<field>`); for the other kinds, the main channel.
  std::string waiter_channel(std::string_view field) const;
  /// The timeout key of read level `level` (from 1) of the owner with field `field`. Empty for
  /// kinds other than read and write.
  std::string read_timeout_key(std::string_view field, unsigned long long level) const;
  /// The keyspace channel a mutex waiter also listens on when the server sends keyspace events:
  /// `__keyspace@<database>__:<name>`. Empty for the other kinds.
  std::string keyspace_channel(int database) const;
};

/// The layout of a lock of kind `kind` named `name` (or, for the ACL patterns, of every lock whose
/// name the glob `name` matches). Sends nothing; any name is accepted, the empty one too (which
/// the lock calls themselves refuse).
///
/// Thread-safe. @throws std::bad_alloc only.
lock_layout describe(lock_kind kind, std::string_view name);

/// The ACL patterns a user restricted to the lock names matched by a glob needs for every kind:
/// the union of `describe(k, pattern).acl_keys` and `.acl_channels` over all kinds, each once, in
/// the order docs/cli.md shows them (the names, the latches, the token keys, the other keys; the
/// channels kind by kind). Plain data.
struct acl_patterns {
  /// Key patterns, each to be written after `~`.
  std::vector<std::string> keys;
  /// Channel patterns, each to be written after `&`.
  std::vector<std::string> channels;
};

/// The ACL patterns of every kind for the lock names matched by the glob `pattern` (see
/// `acl_patterns`). Sends nothing.
///
/// Thread-safe. @throws std::bad_alloc only.
acl_patterns acl_patterns_for(std::string_view pattern);

/// Whether `field` holding `value` can be an entry of a lock's hash: a holder's field
/// `<client id>:<id>` (the id all digits, as Redisson's `<uuid>:<thread id>` and ours; a read-write
/// lock's writer adds `:write`) holding a whole count, or a read-write lock's `mode` holding `read`
/// or `write`. A hash with another entry
/// is not a lock: an application's hash under the lock's name. The acquisition of a hash kind
/// fails at once with errc::wrong_type on such a hash when it has no expiry (a lock's hash always
/// has one), and `redlease status` and `unlock` use the same rule. Sends nothing.
///
/// Thread-safe. Never throws.
bool is_lock_hash_entry(std::string_view field, std::string_view value) noexcept;

/// A Lua script the library sends (embedded at build time from src/lua/<name>.lua).
struct embedded_script {
  /// Its name: the file name without `.lua`.
  std::string_view name;
  /// Its text, as sent with `EVAL` and `SCRIPT LOAD`.
  std::string_view body;
  /// The SHA1 of `body` in lowercase hex: what `EVALSHA` takes and `SCRIPT LOAD` returns.
  std::string_view sha1;
};

/// Every script the library sends with `EVALSHA` (and `EVAL` after `NOSCRIPT`), in a fixed order.
/// Not included: the Redis 7 variants of the release scripts with the `allow-oom` flag, which are
/// the same scripts with a flag line in front. The views point to static storage.
///
/// Thread-safe. Never throws.
std::span<const embedded_script> embedded_scripts() noexcept;

}  // namespace redlease
