// SPDX-License-Identifier: MIT
// A command about one lock, whose refusal names the lock (commands.hpp). Apart from common.cpp,
// which the fuzz targets compile without the client.
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "redlease/redlease.hpp"

namespace redlease::cli {

namespace {
template <class Args>
reply command_for_lock(client& c, std::string_view name, const Args& args) {
  std::error_code ec;
  auto r = c.command(args, ec);
  if (ec) throw_for_lock(ec, name, last_error_text());
  return r;
}
}  // namespace

reply lock_command(client& c, std::string_view name, std::initializer_list<std::string_view> args) {
  return command_for_lock(c, name, args);
}

reply lock_command(client& c, std::string_view name, const std::vector<std::string>& args) {
  return command_for_lock(c, name, args);
}

}  // namespace redlease::cli
