// SPDX-License-Identifier: MIT
#include "lock/naming.hpp"

namespace redlease::detail {

std::string tagged(std::string_view prefix, std::string_view name) {
  std::string out;
  out.reserve(prefix.size() + name.size() + 3);
  out.append(prefix).push_back(':');
  const bool tag = name.find('{') == std::string_view::npos;
  if (tag) out.push_back('{');
  out.append(name);
  if (tag) out.push_back('}');
  return out;
}

std::string suffixed(std::string_view name, std::string_view suffix) {
  std::string out;
  out.reserve(name.size() + suffix.size() + 3);
  const bool tag = name.find('{') == std::string_view::npos;
  if (tag) out.push_back('{');
  out.append(name);
  if (tag) out.push_back('}');
  out.push_back(':');
  out.append(suffix);
  return out;
}

std::string latch_key(std::string_view name, std::string_view request) {
  std::string out = tagged("redisson_unlock_latch", name);
  out.push_back(':');
  out.append(request);
  return out;
}

}  // namespace redlease::detail
