// SPDX-License-Identifier: MIT
/// @file
/// Client cards: the small, expiring description each client keeps of itself in Redis, so that the
/// `<client uuid>` of a holder's field (`<uuid>:<owner>`) can be tied to a host and a process.
/// `redlease status` shows it next to each holder, and lists a read-write lock's waiting writers
/// from it. Redisson keeps none: its holders show as "(no description)". The lock's own keys stay
/// Redisson's; the card is a key of its own (docs/design.md, "Who holds it: client cards").
///
/// The card of a client is a hash `redlease:client:{<uuid>}` with the fields
/// - `host`: the host name (`gethostname`), `pid`: the process id, `program`: the program's name,
/// - `name`: `config::client_name` (also set with CLIENT SETNAME), `started`: the client's start,
///   in Unix epoch milliseconds,
/// - `waiting:<lock name>` → `write since <epoch ms>` while the client waits for that write lock
///   (the read-write lock records no waiters of its own).
///
/// It is written before the client's first acquisition attempt, with a TTL of
/// `client_card_ttl(cfg)`, and again (fields and TTL) whenever it is older than half of that at an
/// acquisition attempt or a watchdog renewal, so it lives while the client holds or waits for locks.
/// At close it is deleted, or left to expire with the locks still held. `config::client_card`
/// turns it off. A user whose ACL refuses the key loses nothing but the card.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "redlease/config.hpp"

namespace redlease {

/// The card key of the client whose id (`client::id()`) is `client_id`: `redlease:client:{<id>}`.
/// Thread-safe (pure).
std::string client_card_key(std::string_view client_id);

/// The glob that matches every card key, for SCAN MATCH and ACL key patterns: `redlease:client:{*}`.
std::string_view client_card_pattern() noexcept;

/// The card field that records a wait for the write lock `lock_name`: `waiting:<lock_name>`.
/// Thread-safe (pure).
std::string client_card_wait_field(std::string_view lock_name);

/// The client id in a holder as `redlease status` shows it (a hash field `<uuid>:<owner>` or
/// `<uuid>:<owner>:write`): the part before the first `:`. Empty when there is none (a mutex's
/// token, which names no client). Thread-safe (pure).
std::string_view client_id_of_holder(std::string_view holder) noexcept;

/// How long a card lives without being written again: twice `cfg.watchdog_timeout`, and at least
/// a minute. Thread-safe (pure).
std::chrono::milliseconds client_card_ttl(const config& cfg) noexcept;

}  // namespace redlease
