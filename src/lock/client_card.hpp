// SPDX-License-Identifier: MIT
// The client's card (redlease/client_card.hpp): what the lock engine writes of its client, when, and
// how little it costs. Executor only.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/handlers.hpp"
#include "redlease/lock.hpp"

namespace redlease::detail {

class lock_runtime;

/// Keeps the client's card: one script call (HSET + PEXPIRE) before the first acquisition attempt,
/// and again at an attempt or a watchdog tick once it is older than half its TTL (so never more
/// than one call per tick, and none per lock); an HSET and an HDEL around each write-lock wait that
/// lasts past its first refusal; a DEL (or a PEXPIRE as long as the holds left) at close. Nothing
/// is awaited; a refusal of the key (ACL, a renamed command, a foreign key there) turns the card off
/// for good, silently: a lock never fails or warns because of it.
class card_keeper {
 public:
  explicit card_keeper(lock_runtime& c);
  /// The shortest TTL of a card (client_card_ttl): a minute. Tests shorten it, before making a client.
  static ms ttl_floor;
  /// An acquisition attempt or a watchdog renewal is about to go out: writes the card if it was
  /// never written, or was written half its TTL ago or more. `now`: the caller's reading of the
  /// clock (the attempt's send time), so that the common case reads none.
  void touch(clock::time_point now);
  /// A wait has outlived its first refusal: records it if it is for a write lock (the first such
  /// wait of the client on `name`). True if recorded: `wait_ended` must follow.
  bool wait_started(const std::string& name, lock_kind kind);
  /// The end of a wait that `wait_started` recorded: its field goes with the client's last such wait.
  void wait_ended(const std::string& name);
  /// The master may have changed (a failover): the next touch writes the card again.
  void forget() { written_ = false; }
  /// The client closes: deletes the card, or with `keep` > 0 (holds still valid that long) lets it
  /// expire with them.
  void close(ms keep);

 private:
  void write(std::string_view extra_field = {}, std::string_view extra_value = {});
  reply_handler on_reply();

  lock_runtime& c_;
  bool on_;
  std::shared_ptr<bool> refused_ = std::make_shared<bool>(false);  // set by a reply, which may come late
  std::string key_;
  std::vector<std::string> fields_;  // field, value, ...
  ms ttl_;
  bool written_ = false;
  clock::time_point written_at_{};
  std::unordered_map<std::string, int> waits_;  // write-lock name -> waits of this client on it
};


}  // namespace redlease::detail
