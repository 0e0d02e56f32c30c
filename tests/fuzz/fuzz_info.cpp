// SPDX-License-Identifier: MIT
// Fuzzes the INFO parser of `redlease doctor`: never crashes; what it keeps is pieces of the input
// (keys without ':' or line breaks, values without line breaks), so its size follows the input's.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "info_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto info = redlease::cli::parse_info(text);
  std::size_t kept = 0;
  if (info.section_of.size() != info.values.size()) std::abort();
  for (const auto& [k, v] : info.values) {
    if (k.empty() || k.find(':') != std::string_view::npos || k.find('\n') != std::string_view::npos) std::abort();
    if (v.find('\n') != std::string_view::npos) std::abort();
    if (text.find(k + ":" + v) == std::string_view::npos) std::abort();
    if (!info.get(k) || *info.get(k) != v) std::abort();
    kept += k.size() + v.size() + 1;
    // Every value goes through the helpers too.
    auto n = info.integer(k);
    if (n && redlease::cli::parse_integer(v) != n) std::abort();
    std::size_t sub = 0;
    for (const auto& [sk, sv] : redlease::cli::info_subfields(v)) {
      if (sk.empty() || sk.find(',') != std::string_view::npos || sv.find(',') != std::string_view::npos) std::abort();
      sub += sk.size() + sv.size();
    }
    if (sub > v.size()) std::abort();
    if (auto ver = redlease::cli::parse_version(v))
      for (int part : *ver)
        if (part < 0 || part > 999'999'999) std::abort();
  }
  if (kept > size) std::abort();
  std::size_t names = 0;
  for (const auto& s : info.sections) names += s.size() + 1;
  if (names > size) std::abort();
  if (auto ver = redlease::cli::parse_version(text))
    for (int part : *ver)
      if (part < 0 || part > 999'999'999) std::abort();
  return 0;
}
