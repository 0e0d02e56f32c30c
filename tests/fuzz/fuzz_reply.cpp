// SPDX-License-Identifier: MIT
// Fuzzes reply decoding: never crashes, and the replies decoded from one buffer are the same whether
// it arrives at once or one byte at a time (as a socket may deliver it).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "net/resp.hpp"

namespace {

using redlease::reply;
using redlease::detail::resp_reader;

bool same(const reply& a, const reply& b) {
  if (a.type != b.type || a.str != b.str || a.integer != b.integer || a.elements.size() != b.elements.size())
    return false;
  for (std::size_t i = 0; i < a.elements.size(); ++i)
    if (!same(a.elements[i], b.elements[i])) return false;
  return true;
}

// Decodes `data` fed in chunks of `chunk` bytes; false if the parser reported a protocol error.
bool decode(const std::uint8_t* data, std::size_t size, std::size_t chunk, std::vector<reply>& out) {
  resp_reader r;
  for (std::size_t off = 0; off < size; off += chunk) {
    std::size_t n = size - off < chunk ? size - off : chunk;
    if (!r.feed(reinterpret_cast<const char*>(data + off), n)) return false;
    for (;;) {
      reply rep;
      auto st = r.next(rep);
      if (st == resp_reader::status::incomplete) break;
      if (st == resp_reader::status::error) return false;
      out.push_back(std::move(rep));
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<reply> whole, bytes;
  bool ok_whole = decode(data, size, size == 0 ? 1 : size, whole);
  bool ok_bytes = decode(data, size, 1, bytes);
  // Up to the first error, both ways must agree on every complete reply.
  std::size_t n = whole.size() < bytes.size() ? whole.size() : bytes.size();
  for (std::size_t i = 0; i < n; ++i)
    if (!same(whole[i], bytes[i])) std::abort();
  if (ok_whole && ok_bytes && whole.size() != bytes.size()) std::abort();
  return 0;
}
