// SPDX-License-Identifier: MIT
#include "random.hpp"

#include "base/hex.hpp"

#include <openssl/rand.h>
#include <pthread.h>

#include <cstring>
#include <mutex>

#include <cstdint>
#include <stdexcept>

namespace redlease::detail {
namespace {

void fill_from_openssl(unsigned char* p, int n) {
  // RAND_bytes fails only when the system's entropy source is unavailable; a lock token must never
  // fall back to something predictable.
  if (RAND_bytes(p, n) != 1) throw std::runtime_error("redlease: the CSPRNG (RAND_bytes) failed");
}

// One RAND_bytes call per token was a quarter of the I/O thread's time in the mutex benchmarks:
// draw 4 KiB at a time, per thread. A forked child must not hand out its parent's unused bytes
// again, so fork empties the buffer of the thread that forks (the only thread the child has).
struct random_pool {
  unsigned char bytes[4096];
  std::size_t used = sizeof bytes;
};
thread_local random_pool pool;

void fill(unsigned char* p, int n) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, [] { pool.used = sizeof pool.bytes; }); });
  auto want = static_cast<std::size_t>(n);
  if (want > sizeof pool.bytes) return fill_from_openssl(p, n);
  if (pool.used + want > sizeof pool.bytes) {
    fill_from_openssl(pool.bytes, static_cast<int>(sizeof pool.bytes));
    pool.used = 0;
  }
  std::memcpy(p, pool.bytes + pool.used, want);
  // Bytes handed out are not kept.
  std::memset(pool.bytes + pool.used, 0, want);
  pool.used += want;
}

std::string hex(const unsigned char* p, int n) {
  return to_hex(std::string_view(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n)));
}

}  // namespace

std::string random_token() {
  unsigned char b[16];
  fill(b, sizeof b);
  return hex(b, sizeof b);
}

double random_unit() {
  unsigned char b[8];
  fill(b, sizeof b);
  std::uint64_t v = 0;
  for (unsigned char x : b) v = (v << 8) | x;
  return static_cast<double>(v >> 12) / static_cast<double>(std::uint64_t{1} << 52);
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
