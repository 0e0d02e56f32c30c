// SPDX-License-Identifier: MIT
// How `redlease status` prints: JSON strings, TTLs, and aligned tables (cli_status.cpp,
// cli_status_redlock.cpp, client_cards.cpp).
#pragma once

#include <algorithm>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"

namespace redlease::cli {

/// `s` as a JSON string, quotes included (json_escape_to).
inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  json_escape_to(out, s);
  out += '"';
  return out;
}

/// A PTTL for the TTL column: "no expiry" for -1, "-" for none, else "850ms", "27.3s", "2m5s", "1h2m".
inline std::string format_ttl(long long ms) {
  if (ms == -1) return "no expiry";
  if (ms < 0) return "-";
  if (ms < 1000) return std::to_string(ms) + "ms";
  long long tenths = (ms + 50) / 100;
  if (ms < 60'000) return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + "s";
  long long s = (ms + 500) / 1000;
  if (s < 3600) return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  return std::to_string(s / 3600) + "h" + std::to_string(s % 3600 / 60) + "m";
}

/// Prints `rows` (the first is the header) on stdout, each column as wide as its widest cell plus
/// two spaces; the last column is not padded.
inline void print_rows(const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return;
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

}  // namespace redlease::cli
