// SPDX-License-Identifier: MIT
// A command as bytes: RESP2 encoding of its arguments. A plain type of the lock layer (which builds
// scripts' arguments) and of the connection core (which writes them); neither depends on the other
// for it. Thread-safe (pure functions; an arg_list is a value).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace redlease::detail {

/// Appends `*<n>\r\n` (the array header of a command with n arguments).
void encode_header(std::string& out, std::size_t nargs);
/// Appends one bulk-string argument.
void encode_arg(std::string& out, std::string_view arg);
/// Appends one integer argument as a bulk string.
void encode_arg(std::string& out, long long value);
/// Appends a whole command.
void encode_command(std::string& out, std::span<const std::string_view> args);
inline void encode_command(std::string& out, std::initializer_list<std::string_view> args) {
  encode_command(out, std::span<const std::string_view>(args.begin(), args.size()));
}

/// Arguments of a command being built: encoded as they are added, and counted, so that the array
/// header written in front of them always matches.
struct arg_list {
  std::string buf;
  std::size_t count = 0;
  arg_list& add(std::string_view a) {
    encode_arg(buf, a);
    ++count;
    return *this;
  }
  arg_list& add(long long v) {
    encode_arg(buf, v);
    ++count;
    return *this;
  }
};

}  // namespace redlease::detail
