// SPDX-License-Identifier: MIT
#include "topology/cluster_slot.hpp"

#include <array>

namespace redlease::detail {
namespace {

constexpr std::array<std::uint16_t, 256> make_crc16_table() {
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    unsigned crc = i << 8;
    for (int b = 0; b < 8; ++b) crc = (crc & 0x8000u) ? ((crc << 1) ^ 0x1021u) : (crc << 1);
    t[i] = static_cast<std::uint16_t>(crc & 0xFFFFu);
  }
  return t;
}

constexpr auto crc16_table = make_crc16_table();

}  // namespace

std::uint16_t crc16_xmodem(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (unsigned char c : data) {
    crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_table[((crc >> 8) ^ c) & 0xFFu]);
  }
  return crc;
}

std::string_view hash_tag(std::string_view key) noexcept {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return key;
  const auto close = key.find('}', open + 1);
  // No closing brace, or an empty tag ("{}"): the whole key is hashed.
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

std::uint16_t key_slot(std::string_view key) noexcept {
  return static_cast<std::uint16_t>(crc16_xmodem(hash_tag(key)) & (cluster_slot_count - 1));
}

}  // namespace redlease::detail
