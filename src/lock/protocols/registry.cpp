// SPDX-License-Identifier: MIT
// The registry of lock kinds, what every protocol does unless it says otherwise (forced unlock,
// status reads), and the renewal codecs the kinds share.
#include <string>

#include "lock/protocols/common.hpp"
#include "random.hpp"

namespace redlease::detail {
namespace {

class lua_renewal final : public renewal_codec {
 public:
  explicit lua_renewal(const lua_script& s) : script_(s) {}
  const lua_script& script() const override { return script_; }

  void encode(arg_list& a, std::span<const renew_item> items, ms lease) const override {
    std::size_t bytes = 32 + items.size();
    for (const auto& i : items) bytes += i.name.size() + i.id.size() + 24;
    a.buf.reserve(a.buf.size() + bytes);
    a.add(static_cast<long long>(items.size()));
    for (const auto& i : items) a.add(i.name);
    a.add(lease.count());
    std::string letters(items.size(), 'h');
    for (std::size_t k = 0; k < items.size(); ++k) letters[k] = items[k].letter;
    a.add(letters);
    // An empty id repeats the previous one: a run of one owner's holds sends its field once.
    const renew_item* prev = nullptr;
    for (const auto& i : items) {
      if (i.by_owner && prev != nullptr && prev->by_owner && prev->id == i.id) a.add(std::string_view{});
      else a.add(i.id);
      prev = &i;
    }
  }

  void decode(const reply& r, std::span<renew_outcome> out) const override { decode_renew_failures(r, out); }

 private:
  const lua_script& script_;
};

}  // namespace

void decode_renew_failures(const reply& r, std::span<renew_outcome> out) {
  const bool listed = r.is_array();
  for (auto& o : out) o = listed ? renew_outcome::renewed : renew_outcome::unknown;
  if (!listed) return;
  for (std::size_t k = 0; k + 1 < r.elements.size(); k += 2) {
    auto i = r.elements[k].integer;
    if (i < 1 || static_cast<std::size_t>(i) > out.size()) continue;
    auto& o = out[static_cast<std::size_t>(i - 1)];
    switch (r.elements[k + 1].integer) {
      case 0: o = renew_outcome::gone; break;
      case 2: o = renew_outcome::taken; break;
      case 3: o = renew_outcome::wrong_type; break;
      case 4: o = renew_outcome::bad_count; break;
      default: o = renew_outcome::unknown; break;
    }
  }
}

std::string lock_protocol::attempt_id(long long) const { return random_token(); }

const renewal_codec& renew_lua_codec() {
  static const lua_renewal c(lua::renew);
  return c;
}

const renewal_codec& rw_renew_lua_codec() {
  static const lua_renewal c(lua::rw_renew);
  return c;
}

const lua_script& lock_protocol::force_unlock_script() const { return lua::force_unlock; }

void lock_protocol::encode_force_unlock(arg_list& a, std::string_view name, std::string_view publish) const {
  a.add(1LL).add(name).add(channel(name)).add("0").add(publish);
}

void lock_protocol::encode_is_locked(std::string& out, std::string_view name) const {
  encode_command(out, {"EXISTS", name});
}

std::optional<bool> lock_protocol::decode_is_locked(const reply& r) const {
  if (!r.is_integer()) return std::nullopt;
  return r.integer > 0;
}

void lock_protocol::encode_remaining_ttl(std::string& out, std::string_view name) const {
  encode_command(out, {"PTTL", name});
}

std::optional<long long> lock_protocol::decode_remaining_ttl(const reply& r) const {
  if (!r.is_integer()) return std::nullopt;
  return r.integer;
}

const lock_protocol& protocol_of(lock_kind kind) noexcept {
  // Indexed by the public enum's value.
  static const lock_protocol* const table[] = {&protocols::reentrant(), &protocols::mutex(), &protocols::fair(),
                                               &protocols::read(), &protocols::write(),
                                               &protocols::semaphore(), &protocols::latch(),
                                               &protocols::permit_semaphore()};
  return *table[static_cast<std::size_t>(kind)];
}

}  // namespace redlease::detail
