// SPDX-License-Identifier: MIT
// Redis Cluster's key → slot rule (CRC16-XMODEM of the hash tag, mod 16384), without I/O. The
// cluster router (not built yet, docs/cluster.md) routes every keyed command by it.
#pragma once

#include <cstdint>
#include <string_view>

namespace redlease::detail {

/// The number of hash slots of a Redis Cluster (0 … 16383).
inline constexpr std::uint16_t cluster_slot_count = 16384;

/// CRC16-XMODEM (polynomial 0x1021, initial value 0, no reflection, no final xor) of `data`,
/// table-driven: the checksum Redis Cluster hashes keys with. `crc16_xmodem("123456789")` is
/// 0x31C3. Binary-safe; pure, thread-safe; no errors.
std::uint16_t crc16_xmodem(std::string_view data) noexcept;

/// The part of `key` that is hashed: the bytes between the first `{` and the first `}` after it
/// when there are any (the hash tag), else the whole key (`foo{}{bar}` hashes whole, `foo{{bar}}`
/// hashes `{bar`). Returns a view into `key`. Pure, thread-safe; no errors.
std::string_view hash_tag(std::string_view key) noexcept;

/// The cluster slot of `key`: `crc16_xmodem(hash_tag(key)) & 16383`, as `CLUSTER KEYSLOT` gives it
/// (`mylock` and `redisson_lock__channel:{mylock}` are both 1711). Binary-safe; pure, thread-safe;
/// no errors.
std::uint16_t key_slot(std::string_view key) noexcept;

}  // namespace redlease::detail
