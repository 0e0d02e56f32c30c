// SPDX-License-Identifier: MIT
// RESP2 encoding of commands, and decoding of replies with hiredis's redisReader (parser only).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "redlease/reply.hpp"

struct redisReader;

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

/// Incremental reply parser: feed bytes, take complete replies. Not thread-safe.
class resp_reader {
 public:
  resp_reader();
  ~resp_reader();
  resp_reader(const resp_reader&) = delete;
  resp_reader& operator=(const resp_reader&) = delete;

  /// Adds received bytes. Returns false on a protocol error.
  bool feed(const char* data, std::size_t n);
  /// Result of `next`.
  enum class status { reply, incomplete, error };
  /// Takes the next complete reply into `out`.
  status next(reply& out);
  /// The parser's error text after `status::error`.
  std::string error_text() const;
  /// Drops all buffered bytes and state (after a reconnect).
  void reset();

 private:
  redisReader* r_ = nullptr;
};

}  // namespace redlease::detail
