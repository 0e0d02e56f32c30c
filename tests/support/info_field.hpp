// SPDX-License-Identifier: MIT
/// @file
/// One field of an INFO-like reply (INFO, CLUSTER INFO), for the rigs' readiness polls.
#pragma once

#include <string>
#include <string_view>

namespace redlease::test {

/// The value of `name:` in an INFO-like reply ("key:value" lines), or "" when it is absent.
inline std::string info_field(const std::string& info, std::string_view name) {
  // (Appended piece by piece: `"\n" + std::string(...)` trips GCC 12's -Wrestrict false positive.)
  std::string key(1, '\n');
  key.append(name).push_back(':');
  std::string text(1, '\n');
  text += info;
  const std::size_t pos = text.find(key);
  if (pos == std::string::npos) return {};
  const std::size_t begin = pos + key.size();
  const std::size_t end = text.find_first_of("\r\n", begin);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

}  // namespace redlease::test
