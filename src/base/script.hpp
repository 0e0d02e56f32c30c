// SPDX-License-Identifier: MIT
#pragma once

#include <string_view>

namespace redlease::detail {

/// A Lua script embedded at build time from src/lua/<name>.lua, with the SHA1 Redis knows it by.
struct lua_script {
  std::string_view name;
  std::string_view body;
  std::string_view sha1;
};

}  // namespace redlease::detail
