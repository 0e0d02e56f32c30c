// SPDX-License-Identifier: MIT
#include "net/subscriber.hpp"

#include <algorithm>

#include "redlease/error.hpp"

namespace redlease::detail {

subscriber::subscriber(asio::any_io_executor ex, const config& cfg, std::string name_suffix, bool sharded)
    : conn_(std::make_shared<connection>(ex, cfg, std::move(name_suffix))),
      health_(ex),
      interval_(cfg.health_check_interval),
      timeout_(cfg.request_timeout),
      sharded_(sharded),
      sub_verb_(sharded ? "SSUBSCRIBE" : "SUBSCRIBE"),
      unsub_verb_(sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE") {
  conn_->set_callbacks({[this] { on_up(); }, [this] { on_down(); }, [this](reply& r) { on_push(r); }, {}});
}

void subscriber::close() {
  closed_ = true;
  health_.cancel();
  conn_->close();
}

// A pub/sub connection is silent while nothing is published: without a PING, a dead peer or a
// stalled network would go unnoticed and waiters would miss every unlock.
void subscriber::arm_health_check() {
  if (closed_ || interval_.count() <= 0) return;
  health_.expires_after(ping_outstanding_ ? timeout_ : interval_);
  health_.async_wait([this](std::error_code ec) {
    if (ec || closed_ || !conn_->is_up()) return;
    if (ping_outstanding_) {
      ping_outstanding_ = false;
      conn_->drop(errc::request_timeout);  // reconnects; on_up resubscribes and re-arms
      return;
    }
    std::string ping;
    encode_command(ping, {"PING"});
    conn_->send_untracked(std::move(ping));
    owed_.push_back({owed::ping, {}, 1});
    ping_outstanding_ = true;
    arm_health_check();
  });
}

std::vector<std::string> subscriber::channels() const {
  std::vector<std::string> out;
  out.reserve(channels_.size());
  for (auto& [name, st] : channels_) out.push_back(name);
  return out;
}

void subscriber::send(std::string_view verb, const std::vector<std::string_view>& channels) {
  if (!conn_->is_up() || channels.empty()) return;
  // The channels of one sharded command must share a slot: one command each.
  if (sharded_ && channels.size() > 1) {
    for (auto c : channels) send(verb, {c});
    return;
  }
  std::string payload;
  encode_header(payload, channels.size() + 1);
  encode_arg(payload, verb);
  for (auto c : channels) encode_arg(payload, c);
  conn_->send_untracked(std::move(payload));
  owed o{verb == sub_verb_ ? owed::subscribe : owed::unsubscribe, {}, channels.size()};
  for (auto c : channels) o.channels.emplace_back(c);
  owed_.push_back(std::move(o));
  if (verb == sub_verb_)
    for (auto c : channels) ++pending_[std::string(c)];
}

void subscriber::add(const std::string& channel, listener* l) {
  auto [it, fresh] = channels_.try_emplace(channel);
  it->second.listeners.push_back(l);
  if (fresh) {
    conn_->start();
    send(sub_verb_, {channel});
  } else if (it->second.confirmed) {
    l->on_subscribed();
  }
}

void subscriber::remove(const std::string& channel, listener* l) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  auto& ls = it->second.listeners;
  ls.erase(std::remove(ls.begin(), ls.end(), l), ls.end());
  if (!ls.empty()) return;
  channels_.erase(it);
  send(unsub_verb_, {channel});
}

bool subscriber::confirmed(const std::string& channel) const {
  auto it = channels_.find(channel);
  return it != channels_.end() && it->second.confirmed;
}

void subscriber::on_up() {
  pending_.clear();
  owed_.clear();
  ping_outstanding_ = false;
  arm_health_check();
  std::vector<std::string_view> all;
  all.reserve(channels_.size());
  for (auto& [name, st] : channels_) all.push_back(name);
  // One command per 1000 channels keeps a single write small enough for the server's query buffer.
  for (std::size_t i = 0; i < all.size(); i += 1000) {
    std::vector<std::string_view> part(all.begin() + static_cast<std::ptrdiff_t>(i),
                                       all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), i + 1000)));
    send(sub_verb_, part);
  }
}

void subscriber::on_down() {
  pending_.clear();
  owed_.clear();
  ping_outstanding_ = false;
  health_.cancel();
  for (auto& [name, st] : channels_) st.confirmed = false;
  if (down_) down_();
}

bool subscriber::owes_unsubscribe(const std::string& channel) const {
  if (owed_.empty() || owed_.front().verb != owed::unsubscribe) return false;
  const auto& cs = owed_.front().channels;
  return std::find(cs.begin(), cs.end(), channel) != cs.end();
}

bool subscriber::is_cluster_redirect(std::string_view text) {
  for (std::string_view w : {"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN"})
    if (text.substr(0, w.size()) == w) return true;
  return false;
}

void subscriber::answered() {
  if (!owed_.empty() && --owed_.front().left == 0) owed_.pop_front();
}

void subscriber::on_push(reply& r) {
  if (r.is_error()) {
    // A refused command: the one owed the next answer. A refused SUBSCRIBE is told to the channel's
    // listeners (they fall back to polling, or fail); the channel is not subscribed.
    if (owed_.empty()) return;
    owed o = std::move(owed_.front());
    owed_.pop_front();
    if (o.verb == owed::ping) {
      ping_outstanding_ = false;  // an answer all the same: the connection is alive
      arm_health_check();
      return;
    }
    if (o.verb != owed::subscribe) return;
    // A cluster redirect is no refusal: the channel's slot is served elsewhere.
    if (sharded_ && moved_ && is_cluster_redirect(r.str)) {
      for (auto& ch : o.channels) {
        auto p = pending_.find(ch);
        if (p != pending_.end() && --p->second <= 0) pending_.erase(p);
        if (channels_.count(ch) != 0) moved_(ch, r.str);
      }
      return;
    }
    auto ec = error_from_reply_text(r.str);
    for (auto& ch : o.channels) {
      auto p = pending_.find(ch);
      if (p != pending_.end() && --p->second <= 0) pending_.erase(p);
      auto it = channels_.find(ch);
      if (it == channels_.end()) continue;
      auto copy = it->second.listeners;
      for (auto* l : copy) {
        auto cur = channels_.find(ch);
        if (cur == channels_.end()) break;
        auto& ls = cur->second.listeners;
        if (std::find(ls.begin(), ls.end(), l) != ls.end()) l->on_refused(ec, r.str);
      }
    }
    return;
  }
  // PING answers ["pong", ""] while subscribed, +PONG when no channel is.
  bool pong = (r.is_string() && r.str == "PONG") || (r.is_array() && !r.elements.empty() && r.elements[0].str == "pong");
  if (pong) {
    answered();
    ping_outstanding_ = false;
    arm_health_check();
    return;
  }
  if (!r.is_array() || r.elements.size() < 2) return;
  auto& kind = r.elements[0].str;
  if ((kind == "message" || kind == "smessage") && r.elements.size() >= 3) {
    auto it = channels_.find(r.elements[1].str);
    if (it == channels_.end()) return;
    // Listeners may remove themselves (or others) while being called: iterate over a copy and skip
    // any that are gone.
    auto copy = it->second.listeners;
    for (auto* l : copy) {
      auto cur = channels_.find(r.elements[1].str);
      if (cur == channels_.end()) return;
      auto& ls = cur->second.listeners;
      if (std::find(ls.begin(), ls.end(), l) != ls.end()) l->on_message(r.elements[1].str, r.elements[2].str);
    }
  } else if (kind == "sunsubscribe" && sharded_ && !owes_unsubscribe(r.elements[1].str)) {
    // Unasked: the server dropped the subscription (the slot moved away from this node).
    auto it = channels_.find(r.elements[1].str);
    if (it == channels_.end()) return;
    it->second.confirmed = false;
    if (moved_) moved_(r.elements[1].str, "the server ended the sharded subscription (its slot moved)");
  } else if (kind == "unsubscribe" || kind == "sunsubscribe") {
    answered();
  } else if (kind == "subscribe" || kind == "ssubscribe") {
    answered();
    auto& ch = r.elements[1].str;
    auto p = pending_.find(ch);
    if (p != pending_.end() && --p->second <= 0) pending_.erase(p);
    if (pending_.count(ch) != 0) return;
    auto it = channels_.find(ch);
    if (it == channels_.end() || it->second.confirmed) return;
    it->second.confirmed = true;
    auto copy = it->second.listeners;
    for (auto* l : copy) {
      auto cur = channels_.find(ch);
      if (cur == channels_.end()) return;
      auto& ls = cur->second.listeners;
      if (std::find(ls.begin(), ls.end(), l) != ls.end()) l->on_subscribed();
    }
  }
}

}  // namespace redlease::detail
