// SPDX-License-Identifier: MIT
#include "lock/protocols/common.hpp"

#include <openssl/evp.h>

#include <chrono>
#include <charconv>

namespace redlease::detail::protocols {
namespace {

std::string sha1_hex(std::string_view text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text.data(), text.size(), md, &n, EVP_sha1(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(hex[md[i] >> 4]);
    out.push_back(hex[md[i] & 15]);
  }
  return out;
}

}  // namespace

allow_oom::allow_oom(const lua_script& plain, std::string_view name)
    : body("#!lua flags=allow-oom\n" + std::string(plain.body)), sha(sha1_hex(body)), script{name, body, sha} {}

acquire_result decode_grant_or_pttl(const reply& r) {
  acquire_result out;
  if (r.is_nil()) {
    out.what = acquire_result::kind::granted;
  } else if (r.is_integer()) {
    out.what = acquire_result::kind::busy;
    out.pttl = r.integer;
  } else if (r.is_string()) {
    // A fenced grant: the token in decimal digits, above 0. Anything else is a bad reply.
    std::uint64_t token = 0;
    auto [p, e] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), token);
    if (e == std::errc() && p == r.str.data() + r.str.size() && token > 0) {
      out.what = acquire_result::kind::granted;
      out.token = token;
    }
  }
  return out;
}

release_result decode_count_release(const reply& r) {
  if (r.is_nil()) return release_result::not_held;
  if (!r.is_integer()) return release_result::bad;
  return r.integer == 1 ? release_result::freed : release_result::decremented;
}

std::optional<long long> decode_count_field(const reply& r) {
  if (r.is_nil()) return 0;
  long long v = 0;
  auto [p, e] = std::from_chars(r.str.data(), r.str.data() + r.str.size(), v);
  if (!r.is_string() || e != std::errc{} || p != r.str.data() + r.str.size()) return std::nullopt;
  return v;
}

release_request retried(release_request r) {
  r.retry = true;
  return r;
}

// Deadlines in the fair lock's zset are epoch milliseconds of the clients' clocks, as Redisson
// writes them: every client of one lock must use the same kind of clock to share its queue.
long long epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace redlease::detail::protocols
