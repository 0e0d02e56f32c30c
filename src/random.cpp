// SPDX-License-Identifier: MIT
#include "random.hpp"

#include <openssl/rand.h>

#include <cstdint>
#include <stdexcept>

namespace redlease::detail {
namespace {

void fill(unsigned char* p, int n) {
  // RAND_bytes fails only when the system's entropy source is unavailable; a lock token must never
  // fall back to something predictable.
  if (RAND_bytes(p, n) != 1) throw std::runtime_error("redlease: the CSPRNG (RAND_bytes) failed");
}

std::string hex(const unsigned char* p, int n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(static_cast<std::size_t>(n) * 2, '0');
  for (int i = 0; i < n; ++i) {
    s[2 * static_cast<std::size_t>(i)] = digits[p[i] >> 4];
    s[2 * static_cast<std::size_t>(i) + 1] = digits[p[i] & 15];
  }
  return s;
}

}  // namespace

std::string random_token() {
  unsigned char b[16];
  fill(b, sizeof b);
  return hex(b, sizeof b);
}

std::string random_uuid() {
  unsigned char b[16];
  fill(b, sizeof b);
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  std::string h = hex(b, sizeof b);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

}  // namespace redlease::detail
