// SPDX-License-Identifier: MIT
// Redisson's naming rule for the keys and channels that go with a lock, in one place: every name
// derived from a lock's name shares its cluster slot.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>

namespace redlease::detail {

/// `prefix:{name}`, or `prefix:name` when the name already contains a `{` (its own hash tag then
/// decides the slot). Redisson's `prefixName`. Thread-safe (pure).
std::string tagged(std::string_view prefix, std::string_view name);

/// `{name}:suffix`, or `name:suffix` when the name already contains a `{`. Redisson's `suffixName`
/// (a permit-expirable semaphore's `{name}:timeout`). Thread-safe (pure).
std::string suffixed(std::string_view name, std::string_view suffix);

/// The latch key of one release request: `redisson_unlock_latch:{name}:<request>` (Redisson's
/// name), so that it shares the lock's cluster slot. Thread-safe (pure).
std::string latch_key(std::string_view name, std::string_view request);

/// How long a request latch lives: a minute, and at least ten request timeouts, so that it outlives
/// every sending of its request, one stuck in a reset connection's buffers included. Thread-safe.
inline std::chrono::milliseconds request_latch_ttl(std::chrono::milliseconds request_timeout) {
  return std::max<std::chrono::milliseconds>(std::chrono::minutes(1), 10 * request_timeout);
}

}  // namespace redlease::detail
