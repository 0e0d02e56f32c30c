// SPDX-License-Identifier: MIT
// An incremental, bounded decoder of RESP replies (sans-io); commands are encoded by base/command.hpp.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/command.hpp"
#include "redlease/reply.hpp"

namespace redlease::detail {

/// Bounds on what one reply may be; beyond them the stream is a protocol error.
struct resp_limits {
  std::size_t max_depth = 64;               // nesting of aggregates
  std::size_t max_elements = 1u << 22;      // elements of one reply, all levels together
  std::size_t max_bulk = 512u * 1024 * 1024;  // bytes of one bulk string (Redis's proto-max-bulk-len)
  std::size_t max_line = 64 * 1024;         // bytes of one header, status or error line
};

/// Printable form of untrusted bytes for an error message: escapes, cut to `max` bytes.
std::string printable_prefix(std::string_view bytes, std::size_t max = 48);

/// Incremental reply decoder: feed bytes, take complete replies. Not thread-safe.
///
/// Memory follows the bytes received: a declared length is only ever checked against the limits,
/// never allocated up front. Aggregates grow as their elements arrive, a bulk string as its bytes
/// arrive. Throws nothing but `std::bad_alloc` (which the caller turns into a protocol fault).
class resp_reader {
 public:
  explicit resp_reader(resp_limits limits = {}) : limits_(limits) {}

  /// Adds received bytes. Returns false once the stream is in error.
  bool feed(const char* data, std::size_t n);
  /// Result of `next`.
  enum class status { reply, incomplete, error };
  /// Takes the next complete reply into `out`.
  status next(reply& out);
  /// After `status::error`: what was wrong and the first bytes the peer sent, for a message.
  std::string error_text() const;
  /// Drops all buffered bytes and state (after a reconnect).
  void reset();
  /// Bytes held for replies not yet complete (for tests and memory accounting).
  std::size_t buffered() const noexcept { return buf_.size() - pos_; }

 private:
  struct frame {
    reply* node;
    std::size_t left;  // elements still to come
  };
  status fail(std::string why);
  reply* place();           // the node the next value goes into
  bool complete_value();    // a value is done: pops finished aggregates; true when the root is done
  bool parse_length(std::string_view digits, long long& v) const;

  resp_limits limits_;
  std::string buf_;
  std::size_t pos_ = 0;        // first unconsumed byte of buf_
  std::size_t line_scanned_ = 0;  // bytes after pos_ of an unfinished line already searched for CRLF
  std::vector<frame> stack_;   // aggregates in progress, outermost first
  reply root_;
  reply* bulk_ = nullptr;      // a bulk string whose bytes are arriving
  std::size_t bulk_left_ = 0;  // its bytes still to come, CRLF included
  std::size_t elements_ = 0;   // elements of the current reply so far
  std::string first_;          // the first bytes the peer sent since reset (for messages)
  std::string error_;
};

}  // namespace redlease::detail
