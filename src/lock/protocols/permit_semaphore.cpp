// SPDX-License-Identifier: MIT
// Redisson's RPermitExpirableSemaphore: a string `name` holding the available permits and the zset
// `{name}:timeout` of the permits out, each a 16-byte id scored by its expiry in epoch ms. A grant
// of n permits is a hold like a lock's: the watchdog extends every one of its permits' expiries, and
// the hold is lost when one of them is gone. The attempt's id names the permits: 32 hex digits for
// one permit, "<32 hex digits>+<n>" for n, whose i-th id is the first one plus i in its last four
// bytes. Waiters wake by count (the messages carry the count available, as the plain semaphore's)
// and poll within the cap: an expiry is never announced, and Redisson's clients publish deltas.
#include <algorithm>
#include <charconv>
#include <cstdint>

#include "base/hex.hpp"
#include "lock/protocols/common.hpp"

namespace redlease::detail::protocols {
namespace {

class permit_semaphore_protocol final : public lock_protocol {
 public:
  std::string channel(std::string_view name) const override { return tagged("redisson_sc", name); }
  bool fencing() const override { return false; }
  bool reentrant() const override { return false; }  // each acquisition is a hold of its own owner
  bool per_attempt_id() const override { return true; }
  bool keyspace_wake() const override { return false; }
  bool release_needs_hold() const override { return true; }
  std::string_view key_type() const override { return "string"; }
  lost_reason not_held_reason() const override { return lost_reason::deleted; }
  bool poll_capped() const override { return true; }
  std::optional<long long> units_available(std::string_view payload) const override { return count_payload(payload); }

  std::string attempt_id(long long amount) const override {
    std::string id = lock_protocol::attempt_id(amount);
    if (amount > 1) {
      id.push_back('+');
      id += std::to_string(amount);
    }
    return id;
  }

  const lua_script& acquire_script(bool) const override { return lua::permits_acquire; }
  void encode_acquire(arg_list& a, const acquire_request& r) const override {
    keys(a, r.name).add(channel(r.name)).add(r.publish).add(r.lease.count());
    add_ids(a, r.id);
  }
  acquire_result decode_acquire(const reply& r) const override {
    auto out = decode_grant_or_pttl(r);
    if (out.what == acquire_result::kind::granted && out.token != 0) out.what = acquire_result::kind::bad;
    return out;
  }

  const lua_script* release_script(bool allow_oom) const override {
    return allow_oom ? nullptr : &lua::permits_release;
  }
  void encode_release(arg_list& a, const release_request& r) const override {
    keys(a, r.name).add(channel(r.name)).add(r.publish);
    add_ids(a, r.id);
  }
  // An id is removed once: a release sent again after a lost reply finds its permits gone, which the
  // engine reads on a retry as the first sending having run.
  release_result decode_release(const reply& r) const override {
    if (!r.is_integer()) return release_result::bad;
    return r.integer == 1 ? release_result::freed : release_result::not_held;
  }
  void encode_undo(arg_list& a, const release_request& r) const override { encode_release(a, r); }

  const renewal_codec& renewal() const override;
  char renew_letter() const override { return 'p'; }

  void encode_hold_count(std::string& out, std::string_view name, std::string_view,
                         std::string_view token) const override {
    const std::string z = suffixed(name, "timeout");
    const auto ids = permit_ids(token.empty() ? std::string_view("00000000000000000000000000000000") : token);
    std::vector<std::string_view> args{"ZMSCORE", z};
    for (const auto& id : ids) args.push_back(id);
    encode_command(out, args);
  }
  // Held (1) when every permit is there, else 0.
  std::optional<long long> decode_hold_count(const reply& r, std::string_view token) const override {
    if (!r.is_array()) return std::nullopt;
    if (token.empty()) return 0;
    for (const auto& e : r.elements)
      if (e.is_nil()) return 0;
    return 1;
  }

  static arg_list& keys(arg_list& a, std::string_view name) {
    return a.add(2LL).add(name).add(suffixed(name, "timeout"));
  }
};

class permits_renewal final : public renewal_codec {
 public:
  const lua_script& script() const override { return lua::permits_renew; }
  void encode(arg_list& a, std::span<const renew_item> items, ms lease) const override {
    a.add(static_cast<long long>(items.size()));
    for (const auto& i : items) a.add(suffixed(i.name, "timeout"));
    a.add(lease.count());
    for (const auto& i : items) {
      a.add(permit_count(i.id));
      add_ids(a, i.id);
    }
  }
  void decode(const reply& r, std::span<renew_outcome> out) const override { decode_renew_failures(r, out); }
};

const renewal_codec& permit_semaphore_protocol::renewal() const {
  static const permits_renewal c;
  return c;
}

}  // namespace

long long permit_count(std::string_view token) {
  const auto plus = token.find('+');
  if (plus == std::string_view::npos) return 1;
  long long n = 0;
  auto [p, ec] = std::from_chars(token.data() + plus + 1, token.data() + token.size(), n);
  return ec == std::errc{} && p == token.data() + token.size() && n >= 1 ? n : 1;
}

namespace {

// Calls `f` with each permit id of `token` in order (permit_ids): a view of one stack buffer,
// rewritten between calls, so that a renewal's encoding allocates nothing per permit (the watchdog
// encodes every held permit's ids at every renewal).
template <class F>
void for_each_permit_id(std::string_view token, F&& f) {
  const auto n = permit_count(token);
  const std::string_view hex = token.substr(0, std::min<std::size_t>(token.find('+'), token.size()));
  char buf[64] = {};
  std::size_t size = 16;  // an id that does not decode is 16 zero bytes
  std::string heap;       // ids longer than the buffer (no redlease token has them)
  char* id = buf;
  if (hex.size() % 2 == 0) {
    bool ok = true;
    for (char ch : hex) ok = ok && hex_value(ch) >= 0;
    if (ok && hex.size() / 2 > sizeof buf) {
      heap = *from_hex(hex);
      id = heap.data();
      size = heap.size();
    } else if (ok) {
      size = hex.size() / 2;
      for (std::size_t i = 0; i < size; ++i)
        buf[i] = static_cast<char>((hex_value(hex[2 * i]) << 4) | hex_value(hex[2 * i + 1]));
    }
  }
  std::uint32_t first_tail = 0;
  if (size >= 4)
    for (std::size_t b = size - 4; b < size; ++b) first_tail = (first_tail << 8) | static_cast<unsigned char>(id[b]);
  for (long long k = 0; k < n; ++k) {
    if (size >= 4) {
      std::uint32_t tail = first_tail + static_cast<std::uint32_t>(k);
      for (std::size_t b = size; b-- > size - 4;) {
        id[b] = static_cast<char>(tail & 0xff);
        tail >>= 8;
      }
    }
    f(std::string_view(id, size));
  }
}

}  // namespace

std::vector<std::string> permit_ids(std::string_view token) {
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(permit_count(token)));
  for_each_permit_id(token, [&out](std::string_view id) { out.emplace_back(id); });
  return out;
}

void add_ids(arg_list& a, std::string_view token) {
  for_each_permit_id(token, [&a](std::string_view id) { a.add(id); });
}

std::optional<long long> count_payload(std::string_view payload) {
  long long n = 0;
  auto [p, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), n);
  if (ec != std::errc{} || p != payload.data() + payload.size()) return 0;
  return n;
}

const lock_protocol& permit_semaphore() {
  static const permit_semaphore_protocol p;
  return p;
}

}  // namespace redlease::detail::protocols
