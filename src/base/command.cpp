// SPDX-License-Identifier: MIT
#include "base/command.hpp"

#include <charconv>

namespace redlease::detail {
namespace {

void append_number(std::string& out, long long v) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  out.append(buf, p);
}

}  // namespace

void encode_header(std::string& out, std::size_t nargs) {
  out.push_back('*');
  append_number(out, static_cast<long long>(nargs));
  out.append("\r\n", 2);
}

void encode_arg(std::string& out, std::string_view arg) {
  out.push_back('$');
  append_number(out, static_cast<long long>(arg.size()));
  out.append("\r\n", 2);
  out.append(arg);
  out.append("\r\n", 2);
}

void encode_arg(std::string& out, long long value) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;
  encode_arg(out, std::string_view(buf, static_cast<std::size_t>(p - buf)));
}

void encode_command(std::string& out, std::span<const std::string_view> args) {
  encode_header(out, args.size());
  for (auto a : args) encode_arg(out, a);
}

}  // namespace redlease::detail
