// SPDX-License-Identifier: MIT
// Replies written by hand for the unit tests of parsers and state machines (no server).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "redlease/reply.hpp"

namespace redlease::test_replies {

/// A bulk string reply.
inline reply str(std::string s) {
  reply r;
  r.type = reply::kind::string;
  r.str = std::move(s);
  return r;
}
/// An integer reply.
inline reply num(long long v) {
  reply r;
  r.type = reply::kind::integer;
  r.integer = v;
  return r;
}
/// An array reply.
inline reply arr(std::vector<reply> e) {
  reply r;
  r.type = reply::kind::array;
  r.elements = std::move(e);
  return r;
}
/// An error reply.
inline reply err(std::string s) {
  reply r;
  r.type = reply::kind::error;
  r.str = std::move(s);
  return r;
}

}  // namespace redlease::test_replies
