// SPDX-License-Identifier: MIT
#include "info_parser.hpp"

#include <charconv>

namespace redlease::cli {

std::optional<long long> parse_integer(std::string_view text) {
  if (text.empty()) return std::nullopt;
  long long v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<std::string_view> info_fields::get(std::string_view key) const {
  auto it = values.find(key);
  if (it == values.end()) return std::nullopt;
  return std::string_view(it->second);
}

std::optional<long long> info_fields::integer(std::string_view key) const {
  auto v = get(key);
  if (!v) return std::nullopt;
  return parse_integer(*v);
}

info_fields parse_info(std::string_view text) {
  info_fields out;
  std::string section;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line.front() == '#') {
      line.remove_prefix(1);
      while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      section.assign(line);
      out.sections.push_back(section);
      continue;
    }
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) continue;
    std::string_view key = line.substr(0, colon);
    if (out.values.find(key) != out.values.end()) continue;
    out.values.emplace(std::string(key), std::string(line.substr(colon + 1)));
    out.section_of.emplace(std::string(key), section);
  }
  return out;
}

std::map<std::string, std::string, std::less<>> info_subfields(std::string_view value) {
  std::map<std::string, std::string, std::less<>> out;
  std::size_t pos = 0;
  while (pos <= value.size()) {
    std::size_t end = value.find(',', pos);
    if (end == std::string_view::npos) end = value.size();
    std::string_view piece = value.substr(pos, end - pos);
    pos = end + 1;
    if (piece.empty()) continue;
    std::size_t eq = piece.find('=');
    std::string_view k = piece.substr(0, eq);
    std::string_view v = eq == std::string_view::npos ? std::string_view{} : piece.substr(eq + 1);
    if (k.empty() || out.find(k) != out.end()) continue;
    out.emplace(std::string(k), std::string(v));
  }
  return out;
}

std::optional<std::array<int, 3>> parse_version(std::string_view text) {
  std::array<int, 3> v{0, 0, 0};
  std::size_t pos = 0;
  for (int part = 0; part < 3; ++part) {
    std::size_t start = pos;
    int n = 0;
    while (pos < text.size() && pos - start < 9 && text[pos] >= '0' && text[pos] <= '9')
      n = n * 10 + (text[pos++] - '0');
    if (pos == start) {
      if (part == 0) return std::nullopt;
      break;
    }
    v[static_cast<std::size_t>(part)] = n;
    if (pos >= text.size() || text[pos] != '.') break;
    ++pos;
  }
  return v;
}

}  // namespace redlease::cli
