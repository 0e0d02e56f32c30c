// SPDX-License-Identifier: MIT
#include "base/command.hpp"

#include <charconv>
#include <cstring>

namespace redlease::detail {
namespace {

// Writes `v` at `p`, returns the end.
char* put_number(char* p, long long v) { return std::to_chars(p, p + 20, v).ptr; }

}  // namespace

void encode_header(std::string& out, std::size_t nargs) {
  char buf[24];
  buf[0] = '*';
  char* e = put_number(buf + 1, static_cast<long long>(nargs));
  *e++ = '\r';
  *e++ = '\n';
  out.append(buf, e);
}

// The watchdog encodes two arguments per held lock per interval: a short argument (a name, an
// owner's field) is composed on the stack and appended once, not in five appends.
void encode_arg(std::string& out, std::string_view arg) {
  constexpr std::size_t small = 200;
  char buf[small + 32];
  buf[0] = '$';
  char* e = put_number(buf + 1, static_cast<long long>(arg.size()));
  *e++ = '\r';
  *e++ = '\n';
  if (arg.size() <= small) {
    if (!arg.empty()) std::memcpy(e, arg.data(), arg.size());
    e += arg.size();
    *e++ = '\r';
    *e++ = '\n';
    out.append(buf, e);
    return;
  }
  out.append(buf, e);
  out.append(arg);
  out.append("\r\n", 2);
}

void encode_arg(std::string& out, long long value) {
  char buf[24];
  char* e = put_number(buf, value);
  encode_arg(out, std::string_view(buf, static_cast<std::size_t>(e - buf)));
}

void encode_command(std::string& out, std::span<const std::string_view> args) {
  encode_header(out, args.size());
  for (auto a : args) encode_arg(out, a);
}

}  // namespace redlease::detail
