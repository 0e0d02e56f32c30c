// SPDX-License-Identifier: MIT
/// @file
/// `redlease::reply`: a RESP2 reply as a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace redlease {

/// One reply from the server (RESP2), as returned by `client::command`.
/// A plain value type; not synchronised.
struct reply {
  /// The RESP2 type of the reply.
  enum class kind : std::uint8_t { nil, string, status, error, integer, array };
  /// The type; `nil` for a null bulk string or null array.
  kind type = kind::nil;
  /// Text of a bulk string, status or error reply (binary-safe).
  std::string str;
  /// Value of an integer reply.
  long long integer = 0;
  /// Elements of an array reply.
  std::vector<reply> elements;

  /// True for a null reply.
  bool is_nil() const noexcept { return type == kind::nil; }
  /// True for an error reply (its text is in `str`).
  bool is_error() const noexcept { return type == kind::error; }
  /// True for an integer reply.
  bool is_integer() const noexcept { return type == kind::integer; }
  /// True for a bulk string or status reply.
  bool is_string() const noexcept { return type == kind::string || type == kind::status; }
  /// True for an array reply.
  bool is_array() const noexcept { return type == kind::array; }
};

}  // namespace redlease
