// SPDX-License-Identifier: MIT
// The exactly-once keys a client no longer needs. A semaphore's grant mark and its release's
// request latch live a minute so that a resend or an undo of a call whose reply was lost finds
// them; a call whose one sending was answered will never be sent again or undone, so its key is
// dead weight (about 225 bytes each: 1.3 GB held at 50,000 pairs a second). The client keeps such
// keys here by name, and the next script call on that name deletes some of them in passing (they
// share its hash tag, so its slot): no command of their own, no round trip.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace redlease::detail {

/// Settled exactly-once keys, by the name whose scripts delete them. Executor only.
class latch_sweeper {
 public:
  /// Keys one call deletes at most.
  static constexpr std::size_t per_call = 16;
  /// Keys kept per name, and names kept: beyond them, keys are left to their TTL.
  static constexpr std::size_t per_name = 256;
  static constexpr std::size_t max_names = 4096;

  /// `key` (of `name`'s slot) will never be read again.
  void settled(std::string_view name, std::string key) {
    auto it = keys_.find(name);
    if (it == keys_.end()) {
      if (keys_.size() >= max_names) return;
      it = keys_.emplace(std::string(name), std::vector<std::string>{}).first;
    }
    if (it->second.size() < per_name) it->second.push_back(std::move(key));
  }

  /// Up to `per_call` settled keys of `name`, taken out (the newest first); none when there are none.
  std::vector<std::string> take(std::string_view name) {
    std::vector<std::string> out;
    auto it = keys_.find(name);
    if (it == keys_.end()) return out;
    auto& v = it->second;
    const std::size_t n = v.size() < per_call ? v.size() : per_call;
    out.assign(std::make_move_iterator(v.end() - static_cast<std::ptrdiff_t>(n)), std::make_move_iterator(v.end()));
    v.resize(v.size() - n);
    if (v.empty()) keys_.erase(it);
    return out;
  }

  /// How many keys are kept, over every name (tests).
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& [name, v] : keys_) n += v.size();
    return n;
  }

 private:
  std::map<std::string, std::vector<std::string>, std::less<>> keys_;
};

}  // namespace redlease::detail
