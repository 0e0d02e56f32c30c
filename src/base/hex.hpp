// SPDX-License-Identifier: MIT
// Hex digits both ways: URL escapes, random tokens, a permit's id as Redisson shows it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace redlease::detail {

/// The value of one hex digit (either case), or -1. Thread-safe (pure).
constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// `raw` as lowercase hex digits, two per byte. Thread-safe (pure).
inline std::string to_hex(std::string_view raw) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

/// The bytes an even number of hex digits spell; nothing for anything else. Thread-safe (pure).
inline std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<char>((hi << 4) | lo);
  }
  return out;
}

}  // namespace redlease::detail
