// SPDX-License-Identifier: MIT
// A parser for the text of Redis's INFO reply (`redlease doctor`), robust to any input: it never
// throws (but std::bad_alloc), never reads out of bounds, and what it keeps is at most the input's
// size (every key and value is a piece of the input).
//
// INFO is lines separated by "\r\n" (a bare "\n" is accepted too): "# Section" headers, "key:value"
// fields, empty lines. A value may itself hold "k=v,k=v" pairs (`slave0:ip=...,port=...,state=online`,
// `db0:keys=1,expires=0`): see `info_subfields`.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlease::cli {

/// The fields of one INFO reply.
struct info_fields {
  /// Every "key:value" line: key → value. A key given twice keeps its first value.
  std::map<std::string, std::string, std::less<>> values;
  /// For each key, the section it appeared in ("" before any header); same keys as `values`.
  std::map<std::string, std::string, std::less<>> section_of;
  /// Section names in order of appearance ("# Server" gives "Server").
  std::vector<std::string> sections;

  /// The value of `key`, if present.
  std::optional<std::string_view> get(std::string_view key) const;
  /// The value of `key` as a whole decimal integer (optional leading '-'); empty if absent or not one.
  std::optional<long long> integer(std::string_view key) const;
};

/// Parses INFO text. Lines without ':' (other than headers) and lines with an empty key are skipped.
/// A trailing "\r" is removed from each line; keys and values are otherwise kept byte for byte.
info_fields parse_info(std::string_view text);

/// Splits "k=v,k=v,..." into its pairs (a piece without '=' is a key with an empty value; a key
/// given twice keeps its first value; empty pieces are skipped).
std::map<std::string, std::string, std::less<>> info_subfields(std::string_view value);

/// "7.0.15" → {7, 0, 15}; missing minor or patch parts are 0 ("7" → {7, 0, 0}). Empty unless the
/// text starts with a number of at most 9 digits; parts after the first stop at the first non-digit.
std::optional<std::array<int, 3>> parse_version(std::string_view text);

/// A whole decimal integer (optional leading '-'), without overflow; empty otherwise.
std::optional<long long> parse_integer(std::string_view text);

}  // namespace redlease::cli
