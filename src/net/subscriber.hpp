// SPDX-License-Identifier: MIT
// The dedicated pub/sub connection: reference-counted channel subscriptions, resubscribed after a
// reconnect. Executor-only, except construction.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <asio/steady_timer.hpp>

#include "base/channel_listener.hpp"
#include "net/connection.hpp"

namespace redlease::detail {

class subscriber {
 public:
  /// Receives the messages of the channels it was added to (base/channel_listener.hpp). Called on
  /// the executor. on_subscribed: the subscription is active on the server, first confirmation or
  /// again after a reconnect (messages published while it was not may have been missed).
  /// on_refused: the server refused to subscribe (NOPERM); the listener stays added until it
  /// removes itself, and no message will come.
  using listener = channel_listener;

  /// `sharded`: SSUBSCRIBE/SUNSUBSCRIBE and `smessage` (Redis 7 sharded pub/sub, one command per
  /// channel: a command's channels must share a slot) instead of SUBSCRIBE.
  subscriber(asio::any_io_executor ex, const config& cfg, std::string name_suffix = ":sub", bool sharded = false);
  /// Sharded only: told (on the executor) when the server ends a subscription by itself (its slot
  /// moved: an unsolicited `sunsubscribe`) or refuses one with a cluster redirect (`MOVED`, ...):
  /// the channel's listeners stay added here, unconfirmed, until the owner moves them.
  void on_moved(std::function<void(const std::string& channel, const std::string& why)> f) { moved_ = std::move(f); }
  /// Told (on the executor) when the connection drops.
  void on_down_hook(std::function<void()> f) { down_ = std::move(f); }
  /// The channels with listeners here.
  std::vector<std::string> channels() const;
  void start() { conn_->start(); }
  /// Adds a listener; the first one of a channel sends SUBSCRIBE. The listener must be removed
  /// before it is destroyed.
  void add(const std::string& channel, listener* l);
  /// Removes a listener; the last one of a channel sends UNSUBSCRIBE.
  void remove(const std::string& channel, listener* l);
  /// True while the channel's subscription is confirmed on the current connection.
  bool confirmed(const std::string& channel) const;
  std::size_t channel_count() const { return channels_.size(); }
  void close();
  const conn_stats& stats() const { return conn_->stats(); }
  /// Its connection (to point it at a resolver before start(), or move it to another node).
  connection& conn() { return *conn_; }
  const connection& conn() const { return *conn_; }

 private:
  struct channel_state {
    std::vector<listener*> listeners;
    bool confirmed = false;
  };
  void on_up();
  void on_down();
  void on_push(reply& r);
  void answered();  // one answer of the oldest command owed
  // Whether the oldest command owed is an unsubscribe of `channel` (its answer, not the server's own).
  bool owes_unsubscribe(const std::string& channel) const;
  static bool is_cluster_redirect(std::string_view text);
  void send(std::string_view verb, const std::vector<std::string_view>& channels);
  void arm_health_check();


  std::shared_ptr<connection> conn_;
  std::unordered_map<std::string, channel_state> channels_;
  // SUBSCRIBEs sent and not yet confirmed, per channel: a channel counts as subscribed only when
  // the latest of them is confirmed (an UNSUBSCRIBE may sit between two of them).
  std::unordered_map<std::string, int> pending_;
  // The answers still owed by the commands sent on this connection, in order: a refusal (an error
  // reply) names no channel, so it is matched to its command by position.
  struct owed {
    enum { subscribe, unsubscribe, ping } verb;
    std::vector<std::string> channels;
    std::size_t left;  // answers still to come (one per channel; one for PING)
  };
  std::deque<owed> owed_;
  asio::steady_timer health_;
  std::chrono::milliseconds interval_;
  std::chrono::milliseconds timeout_;
  bool ping_outstanding_ = false;
  bool closed_ = false;
  const bool sharded_;
  const std::string_view sub_verb_;
  const std::string_view unsub_verb_;
  std::function<void(const std::string&, const std::string&)> moved_;
  std::function<void()> down_;
};

}  // namespace redlease::detail
