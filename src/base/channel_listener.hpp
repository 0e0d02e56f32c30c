// SPDX-License-Identifier: MIT
// What listens to a pub/sub channel: the lock layer's waiters implement it, the connection core's
// subscriber calls it, and neither knows the other. Executor only.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

namespace redlease::detail {

class channel_listener {
 public:
  virtual ~channel_listener() = default;
  /// A message on the channel.
  virtual void on_message(std::string_view channel, std::string_view payload) = 0;
  /// The server confirmed the subscription (first time, and after every reconnect).
  virtual void on_subscribed() {}
  /// The server refused the subscription (an ACL without the channel); `text` is its words.
  virtual void on_refused(std::error_code, const std::string& /*text*/) {}
};

}  // namespace redlease::detail
