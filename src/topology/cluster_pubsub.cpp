// SPDX-License-Identifier: MIT
#include "topology/cluster_pubsub.hpp"

#include <algorithm>

#include "background.hpp"
#include "base/command.hpp"
#include "redlease/error.hpp"
#include "topology/cluster_map.hpp"
#include "topology/cluster_slot.hpp"

namespace redlease::detail {
namespace {

config node_config(const config& cfg, const node_address& a) {
  config c = cfg;
  c.host = a.host;
  c.port = a.port;
  return c;
}

}  // namespace

cluster_pubsub::cluster_pubsub(asio::any_io_executor ex, const config& cfg, hooks h)
    : ex_(ex), cfg_(cfg), hooks_(std::move(h)), sub_(ex, cfg_), probe_timer_(ex) {}

subscriber* cluster_pubsub::subscribe(const std::string& channel, channel_listener* l) {
  subscriber* s = wanted_sub(channel);
  auto& h = homes_[channel];
  h.s = s;
  h.listeners.push_back(l);
  s->add(channel, l);
  return s;
}

bool cluster_pubsub::unsubscribe(const std::string& channel, channel_listener* l) {
  auto it = homes_.find(channel);
  if (it == homes_.end()) return false;
  auto& ls = it->second.listeners;
  ls.erase(std::remove(ls.begin(), ls.end(), l), ls.end());
  subscriber* at = it->second.s;
  if (ls.empty()) homes_.erase(it);
  at->remove(channel, l);
  return true;
}

void cluster_pubsub::on_cluster(std::function<void(connection::callbacks::resolved)> resolve) {
  cluster_ = true;
  sub_.conn().set_resolver(std::move(resolve));
}

subscriber* cluster_pubsub::wanted_sub(const std::string& channel) {
  if (!cluster_) return &sub_;
  // Keyspace events are published on the node that holds the key only: listen there.
  constexpr std::string_view keyspace = "__keyspace@";
  if (channel.compare(0, keyspace.size(), keyspace) == 0) {
    const auto colon = channel.find("__:");
    if (colon != std::string::npos)
      return &node_sub(hooks_.master_of(key_slot(std::string_view(channel).substr(colon + 3))), false);
  }
  if (!sharded_) return &sub_;
  return &node_sub(hooks_.master_of(key_slot(channel)), true);
}

// The pub/sub connection to one master: sharded (SSUBSCRIBE), or classic for its keyspace events.
subscriber& cluster_pubsub::node_sub(const node_address& a, bool sharded) {
  auto& subs = sharded ? shard_subs_ : keyspace_subs_;
  auto k = to_string(a);
  if (auto it = subs.find(k); it != subs.end()) return *it->second;
  auto s = std::make_unique<subscriber>(ex_, node_config(cfg_, a), sharded ? ":ssub" : ":ksub", sharded);
  s->on_moved([this](const std::string& channel, const std::string& why) { channel_moved(channel, why); });
  s->on_down_hook([this] { hooks_.want_refresh(); });
  return *subs.emplace(std::move(k), std::move(s)).first->second;
}

// A sharded subscription ended or was refused with a redirect: follow a MOVED at once (the
// listeners re-subscribe on the new owner, and their confirmation wakes the waiters to retry:
// unlock messages were lost meanwhile); otherwise the next table says where it went.
void cluster_pubsub::channel_moved(const std::string& channel, const std::string& why) {
  if (closed_) return;
  if (auto r = parse_cluster_redirect(why, {}); r && r->type == cluster_redirect::kind::moved && !r->node.host.empty())
    hooks_.moved(r->slot, r->node);
  hooks_.want_refresh();
  rehome(channel, true);
}

// Moves `channel`'s listeners to the subscriber that should carry it. `retry`: subscribe again
// where it is when that is still the place (the table may not know better yet).
void cluster_pubsub::rehome(const std::string& channel, bool retry) {
  auto it = homes_.find(channel);
  if (it == homes_.end()) return;
  subscriber* want = wanted_sub(channel);
  subscriber* was = it->second.s;
  if (want == was && !(retry && !was->confirmed(channel))) return;
  auto ls = it->second.listeners;
  it->second.s = want;
  for (auto* l : ls) was->remove(channel, l);
  for (auto* l : ls) want->add(channel, l);
}

void cluster_pubsub::rehome_all() {
  std::vector<std::string> names;
  names.reserve(homes_.size());
  for (auto& [name, h] : homes_) names.push_back(name);
  for (auto& n : names) rehome(n, false);
}

// AUTO, as Redisson decides: sharded when a node answers PUBSUB SHARDNUMSUB (Redis 7), within
// the probe timeout (a probe that hung on a managed cluster: Redisson's #6646).
void cluster_pubsub::decide_sharded(connection& at) {
  if (cfg_.cluster.sharded_pubsub == sharded_pubsub_mode::off) return;
  if (cfg_.cluster.sharded_pubsub == sharded_pubsub_mode::on) {
    sharded_ = true;
    return rehome_all();
  }
  probe_timer_.expires_after(cfg_.cluster.probe_timeout);
  probe_timer_.async_wait([this, alive = alive_](std::error_code ec) {
    if (ec || !*alive || probed_) return;
    probed_ = true;
    report_background(cfg_, "cluster", errc::request_timeout,
                      "PUBSUB SHARDNUMSUB did not answer within " + std::to_string(cfg_.cluster.probe_timeout.count()) +
                          " ms: classic pub/sub (set cluster.sharded_pubsub to choose)");
  });
  std::string cmd;
  encode_command(cmd, {"PUBSUB", "SHARDNUMSUB"});
  at.submit_here(request{std::move(cmd), [this, alive = alive_](std::error_code ec, reply r) {
                           if (!*alive || closed_ || probed_) return;
                           probed_ = true;
                           probe_timer_.cancel();
                           if (ec || r.is_error()) return;
                           sharded_ = true;
                           rehome_all();
                         },
                         true});
}

void cluster_pubsub::for_each_connection(const std::function<void(const connection&, bool)>& f) const {
  f(sub_.conn(), true);
  for (auto& [a, s] : shard_subs_) f(s->conn(), true);
  for (auto& [a, s] : keyspace_subs_) f(s->conn(), true);
}

void cluster_pubsub::close() {
  closed_ = true;
  *alive_ = false;
  probe_timer_.cancel();
  sub_.close();
  for (auto& [a, s] : shard_subs_) s->close();
  for (auto& [a, s] : keyspace_subs_) s->close();
}

}  // namespace redlease::detail
