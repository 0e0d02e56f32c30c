// SPDX-License-Identifier: MIT
// The library's own access to a lock handle, for compositions above the lock engine (the multi
// lock): the handle's client, a fresh handle on the same lock, and fresh owner ids.
#pragma once

#include <memory>

#include "redlease/lock.hpp"

namespace redlease::detail {

class client_impl;

struct handle_access {
  /// The client the handle's lock lives on.
  static const std::shared_ptr<client_impl>& client(const lock_handle& h) noexcept { return h.client_; }
  /// A handle on the same client, name and kind, with the same wait strategy, and an `on_lost` slot
  /// of its own: copies of a handle share one slot, so a callback set on the fresh one neither
  /// replaces nor is replaced by the user's.
  static lock_handle fresh(const lock_handle& h) {
    lock_handle f(h.client_, h.name_, h.kind_);
    f.wait_ = h.wait_;
    return f;
  }
  /// A fresh owner id, as `client::new_owner()` gives (defined in lock_handle.cpp).
  static owner_id new_owner() noexcept;
};

}  // namespace redlease::detail
