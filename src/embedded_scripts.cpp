// SPDX-License-Identifier: MIT
// embedded_scripts(): the generated script table (redlease_lua.hpp), as public data.
#include <array>
#include <cstddef>

#include "redlease/layout.hpp"
#include "redlease_lua.hpp"

namespace redlease {
namespace {

constexpr std::size_t script_count = std::size(detail::lua::all);

constexpr std::array<embedded_script, script_count> make_table() {
  std::array<embedded_script, script_count> out{};
  for (std::size_t i = 0; i < script_count; ++i)
    out[i] = {detail::lua::all[i]->name, detail::lua::all[i]->body, detail::lua::all[i]->sha1};
  return out;
}

constexpr auto table = make_table();

}  // namespace

std::span<const embedded_script> embedded_scripts() noexcept { return table; }

}  // namespace redlease
