// SPDX-License-Identifier: MIT
// A Redis Cluster behind the keyed-request seam (docs/cluster.md): the slot table from CLUSTER
// SLOTS, one node (command connection) per master, each request routed by its key's slot and
// driven through MOVED/ASK/TRYAGAIN/CLUSTERDOWN by cluster_route_fsm, one coalesced and paced
// refresh of the table (refresh_gate). The same topology serves a server that turns out not to be
// a cluster: the first node's CLUSTER SLOTS says so, and from then on every request goes to it as
// in the standalone topology, untouched.
#include <algorithm>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <asio/steady_timer.hpp>

#include "background.hpp"
#include "redlease/error.hpp"
#include "topology/cluster_map.hpp"
#include "topology/cluster_pubsub.hpp"
#include "topology/cluster_route_fsm.hpp"
#include "topology/node.hpp"
#include "topology/topology.hpp"

namespace redlease::detail {
namespace {

// Asked in parallel per refresh: one hung node (SIGSTOP) must not hold the table back.
constexpr std::size_t refresh_fanout = 3;

config node_config(const config& cfg, const node_address& a) {
  config c = cfg;
  c.host = a.host;
  c.port = a.port;
  return c;
}

std::string key_of(const node_address& a) { return to_string(a); }

// Whether a CLUSTER SLOTS refusal says this server is not a cluster (or will not say): it is then
// used as one endpoint.
bool not_a_cluster(const reply& r) {
  if (!r.is_error()) return false;
  auto ec = error_from_reply_text(r.str);
  return r.str.find("cluster support disabled") != std::string::npos || ec == errc::unknown_command ||
         ec == errc::no_permission;
}

class cluster_topology final : public topology {
 public:
  cluster_topology(asio::any_io_executor ex, const config& cfg, io_guard* guard)
      : ex_(ex),
        cfg_(cfg),
        guard_(guard),
        pubsub_(ex, cfg_,
                {[this](std::uint16_t slot) { return route_slot(slot).address; },
                 [this](std::uint16_t slot, const node_address& to) { map_.patch(slot, to); },
                 [this] { want_refresh(); }}),
        refresh_timer_(ex),
        deadline_timer_(ex) {
    gate_ = refresh_gate({std::chrono::milliseconds(200), cfg_.cluster.refresh_interval});
    seeds_.push_back({cfg_.host, cfg_.port});
    for (auto& s : cfg_.cluster.seeds) seeds_.push_back({s.host, s.port});
    for (auto& s : seeds_) node_at(s);
  }

  void start() override {
    started_ = true;
    // The pub/sub connection starts with its first subscription (subscriber::add).
    for (auto& e : entries_) e->n->conn().start();
  }

  void close() override {
    closed_ = true;
    *alive_ = false;
    refresh_timer_.cancel();
    deadline_timer_.cancel();
    // Requests waiting out a backoff end now: their timers' handlers come after the topology.
    auto waiting = std::move(waiting_);
    for (auto& c : waiting) {
      if (c->timer) c->timer->cancel();
      finish(*c, errc::client_closed, reply{});
    }
    pubsub_.close();
    for (auto& e : entries_) e->n->close();
  }

  void exec(keyed_request r) override {
    // Not a cluster: the standalone path, untouched.
    if (mode_ == mode::single) return topology::exec(std::move(r));
    auto c = std::make_shared<call>(std::move(r), clock::now() + cfg_.request_timeout);
    c->slot = key_slot(c->req.key);
    c->req.key = {};  // read during exec only
    // An undo goes right behind the request it undoes, on the node that was sent it, even if the
    // table has moved the slot since: on another node it could delete a hold its owner took there
    // meanwhile (the same owner's field). An undo that could not reach its node pins the slot's
    // undos there (the lock layer sends it again until it is answered): a resend must not follow
    // the owner's next attempt to the new node.
    if (c->req.follows) {
      if (auto p = pinned_.find(c->slot); p != pinned_.end()) return send(c, *p->second, false);
      if (!served_.empty() && served_[c->slot] != nullptr) return send(c, *served_[c->slot], false);
    }
    send(c, route_slot(c->slot), false);
  }

  bool promotes_replicas() const override { return mode_ == mode::cluster; }
  std::uint64_t batch_id(std::string_view key) const override {
    return mode_ == mode::single ? 0 : key_slot(key);
  }
  std::uint64_t batch_count() const override { return mode_ == mode::single ? 1 : cluster_slot_count; }
  subscriber& sub_for(std::string_view) override { return pubsub_.classic(); }
  std::string_view publish_command() const override { return pubsub_.publish_command(); }

  // Every subscription of the lock layer is recorded with where it lives now: a sharded one moves
  // with its slot (and every one moves when the mode is decided).
  subscriber* subscribe(const std::string& channel, channel_listener* l) override {
    return pubsub_.subscribe(channel, l);
  }
  void unsubscribe(subscriber* s, const std::string& channel, channel_listener* l) override {
    if (!pubsub_.unsubscribe(channel, l)) topology::unsubscribe(s, channel, l);
  }

  void for_each_connection(const std::function<void(const connection&, bool)>& f) const override {
    for (auto& e : entries_) f(*e->n->conn_ptr(), false);
    pubsub_.for_each_connection(f);
  }
  void for_each_node(const std::function<void(const node&)>& f) const override {
    for (auto& e : entries_) f(*e->n);
  }
  std::vector<node_redirects> redirects() const override {
    std::lock_guard<std::mutex> g(redirects_mu_);
    return redirects_;
  }

 protected:
  node& route(std::string_view key) override {
    if (mode_ == mode::single) return *single_->n;
    return *route_slot(key_slot(key)).n;
  }

 private:
  enum class mode { unknown, single, cluster };

  // Redirects are rare (a resharding, a failover): a lock is no cost on the hot path.
  void count_redirect(const node_address& from, bool moved) {
    auto name = to_string(from);
    std::lock_guard<std::mutex> g(redirects_mu_);
    auto it = std::find_if(redirects_.begin(), redirects_.end(), [&](const node_redirects& r) { return r.node == name; });
    if (it == redirects_.end()) it = redirects_.insert(redirects_.end(), node_redirects{std::move(name), 0, 0});
    ++(moved ? it->moved : it->ask);
  }
  mutable std::mutex redirects_mu_;
  std::vector<node_redirects> redirects_;

  struct entry {
    node_address address;
    config cfg;  // the node keeps a pointer to it
    std::unique_ptr<node> n;
  };

  struct call {
    call(keyed_request r, clock::time_point deadline) : req(std::move(r)), fsm(deadline) {}
    keyed_request req;
    cluster_route_fsm fsm;
    std::uint16_t slot = 0;
    bool finished = false;
    bool asking = false;  // the last send went after ASKING (a TRYAGAIN retry goes the same way)
    std::unique_ptr<asio::steady_timer> timer;  // a backoff, made at the first
  };
  using call_ptr = std::shared_ptr<call>;

  entry& node_at(const node_address& a) {
    auto k = key_of(a);
    if (auto it = by_address_.find(k); it != by_address_.end()) return *it->second;
    auto e = std::make_unique<entry>();
    e->address = a;
    e->cfg = node_config(cfg_, a);
    e->n = std::make_unique<node>(ex_, e->cfg, "", guard_);
    entry& ref = *e;
    ref.n->conn().set_callbacks({[this, &ref] { on_node_up(ref); }, {}, {}, {}});
    if (mode_ == mode::cluster) ref.n->set_auto_ack(true);
    by_address_.emplace(std::move(k), &ref);
    entries_.push_back(std::move(e));
    if (started_) ref.n->conn().start();
    return ref;
  }

  entry& route_slot(std::uint16_t slot) {
    if (mode_ == mode::cluster)
      if (const auto* owner = map_.owner(slot)) return node_at(owner->address);
    // Not known yet: a seed that is up (the first may be down).
    for (auto& e : entries_)
      if (e->n->conn().is_up()) return *e;
    return *entries_.front();
  }

  void on_node_up(entry& e) {
    e.n->on_up();
    if (events_.on_up) events_.on_up();
    // The first node up decides whether this is a cluster at all (any seed: the first may be down).
    if (mode_ == mode::unknown) want_refresh();
  }

  // ---- one request ----

  void send(const call_ptr& c, entry& to, bool asking) {
    c->asking = asking;
    if (!c->req.follows) {
      if (served_.empty()) served_.assign(cluster_slot_count, nullptr);
      served_[c->slot] = &to;
    }
    auto h = [this, alive = alive_, c, from = to.address](std::error_code ec, reply r) mutable {
      if (!*alive) return complete(*c, ec ? ec : std::error_code(errc::client_closed), std::move(r), nullptr);
      if (closed_) return finish(*c, ec ? ec : std::error_code(errc::client_closed), std::move(r));
      on_answer(c, from, ec, std::move(r));
    };
    const keyed_request& r = c->req;
    if (asking) {
      std::string payload = r.what == keyed_request::kind::command ? r.payload : eval_payload(*r.script, r.args);
      return to.n->exec_asking(std::move(payload), std::move(h), r.idempotent);
    }
    switch (r.what) {
      case keyed_request::kind::command:
        return to.n->exec(r.payload, std::move(h), r.idempotent);
      case keyed_request::kind::script:
        return to.n->exec_script(*r.script, r.args, std::move(h), r.idempotent, r.always_eval);
      case keyed_request::kind::script_acked:
        return to.n->exec_script_acked(*r.script, r.args, std::move(h), r.idempotent, r.always_eval);
    }
  }

  static route_answer classify(const node_address& from, std::error_code ec, const reply& r) {
    // A failed request carries its error's words as an error reply too: the code decides.
    if (r.is_error() && classify_cluster_error(r.str) != cluster_error::none) return route_answer::from_reply(r, from);
    route_answer a;
    a.from = from;
    if (!ec) return a;
    a.ec = ec;
    if (ec == errc::connect_failed || ec == errc::connect_timeout) a.type = route_answer::kind::error_before_write;
    else if (ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::protocol_error)
      a.type = route_answer::kind::error_after_write;
    else a.type = route_answer::kind::other_error;
    return a;
  }

  void on_answer(const call_ptr& c, const node_address& from, std::error_code ec, reply r) {
    using k = route_answer::kind;
    auto a = classify(from, ec, r);
    // An undo that its node answered (anything, even MOVED: it serves the slot no more, and what
    // the attempt did there went with it) unpins the slot; one that could not reach it pins it.
    if (c->req.follows) {
      if (a.type == k::error_before_write || a.type == k::error_after_write) pinned_[c->slot] = &node_at(from);
      else unpin(c->slot, from);
    }
    if (a.type == k::ok || a.type == k::other_error) return finish(*c, ec, std::move(r));
    const bool redirect = a.type == k::moved || a.type == k::ask;
    if (redirect) count_redirect(from, a.type == k::moved);
    // An undo is never re-routed (see exec): it may wait out a TRYAGAIN or LOADING on its node, no
    // more; it fails, and the lock layer re-checks the hold.
    if (c->req.follows && a.type != k::tryagain && a.type != k::loading && a.type != k::masterdown)
      return finish(*c, ec ? ec : std::error_code(errc::server_error), std::move(r));
    // Until a cluster has shown itself, a failure is the standalone topology's: said at once; but
    // a seed that cannot be reached leaves the others to try.
    const bool other_seed = mode_ == mode::unknown && a.type == k::error_before_write && entries_.size() > 1;
    if (mode_ != mode::cluster && !redirect && a.type != k::clusterdown && !other_seed)
      return finish(*c, ec, std::move(r));
    if (redirect && mode_ == mode::unknown) want_refresh();
    auto act = c->fsm.resume(a, clock::now());
    using act_k = route_action::kind;
    switch (act.type) {
      case act_k::done:
        return finish(*c, ec, std::move(r));
      case act_k::fail:
        return finish(*c, act.ec, std::move(r));
      case act_k::send_to: {
        if (act.patch_slot && mode_ == mode::cluster) map_.patch(*act.patch_slot, act.node);
        if (act.refresh) want_refresh();
        entry& to = node_at(act.node);
        if (act.reconnect) to.n->reconnect_now(errc::connection_lost);
        return send(c, to, false);
      }
      case act_k::asking_then_send:
        return send(c, node_at(act.node), true);
      case act_k::retry_after:
      case act_k::refresh_and_retry_after: {
        if (act.type == act_k::refresh_and_retry_after) want_refresh();
        const bool reroute = act.type == act_k::refresh_and_retry_after;
        // TRYAGAIN from the node an ASK sent it to: that node serves the slot only after ASKING.
        const bool asking = !reroute && c->asking && act.node == a.from;
        auto target = act.node;
        return later(c, act.delay, [this, c, reroute, target, asking] {
          send(c, reroute ? route_slot(c->slot) : node_at(target), asking);
        });
      }
    }
  }

  // An undo was answered on `from`: later undos of the slot route as usual again.
  void unpin(std::uint16_t slot, const node_address& from) {
    if (auto p = pinned_.find(slot); p != pinned_.end() && p->second->address == from) pinned_.erase(p);
  }

  template <class F>
  void later(const call_ptr& c, std::chrono::milliseconds delay, F f) {
    if (!c->timer) c->timer = std::make_unique<asio::steady_timer>(ex_);
    c->timer->expires_after(delay);
    waiting_.push_back(c);
    auto it = std::prev(waiting_.end());
    c->timer->async_wait([this, alive = alive_, c, it, f = std::move(f)](std::error_code) mutable {
      if (!*alive || c->finished) return;
      waiting_.erase(it);
      f();
    });
  }

  void finish(call& c, std::error_code ec, reply r) { complete(c, ec, std::move(r), &cfg_); }

  // Completes `c` once. `cfg`: where an exception of the handler is reported (null: the topology
  // is gone, it is dropped).
  static void complete(call& c, std::error_code ec, reply r, const config* cfg) {
    if (c.finished) return;
    c.finished = true;
    auto h = std::move(c.req.handler);
    try {
      h(ec, std::move(r));
    } catch (...) {
      if (cfg != nullptr) report_exception(*cfg, "cluster");
    }
  }

  // ---- the slot table ----

  void want_refresh() {
    if (closed_) return;
    auto d = gate_.want(clock::now());
    using dk = refresh_gate::decision::kind;
    if (d.type == dk::start_now) return refresh();
    if (d.type == dk::at) arm_refresh(d.when);
  }

  void arm_refresh(clock::time_point when) {
    if (closed_) return;
    if (refresh_armed_ && refresh_at_ <= when) return;
    refresh_armed_ = true;
    refresh_at_ = when;
    refresh_timer_.expires_at(when);
    refresh_timer_.async_wait([this, alive = alive_](std::error_code ec) {
      if (ec || !*alive) return;
      refresh_armed_ = false;
      want_refresh();
    });
  }

  // Nodes to ask, those connected first; seeds and masters alike (a master of the table may have
  // gone, a seed may be the one that answers).
  std::vector<entry*> refresh_candidates() {
    std::vector<entry*> up, down;
    const std::size_t n = entries_.size();
    for (std::size_t i = 0; i < n; ++i) {
      entry* e = entries_[(refresh_cursor_ + i) % n].get();
      (e->n->conn().is_up() ? up : down).push_back(e);
    }
    ++refresh_cursor_;
    up.insert(up.end(), down.begin(), down.end());
    if (up.size() > refresh_fanout) up.resize(refresh_fanout);
    return up;
  }

  struct refresh_round {
    std::size_t left = 0;
    bool settled = false;
    std::string failures;
  };

  void refresh() {
    auto round = std::make_shared<refresh_round>();
    auto asked = refresh_candidates();
    round->left = asked.size();
    // A node that takes its time (a stopped process) does not hold the round: the others' answers,
    // or the deadline, end it.
    deadline_timer_.expires_after(std::min(cfg_.request_timeout, std::chrono::milliseconds(1000)));
    deadline_timer_.async_wait([this, alive = alive_, round](std::error_code ec) {
      if (ec || !*alive || round->settled) return;
      settle(*round);
    });
    for (entry* e : asked) {
      std::string cmd;
      encode_command(cmd, {"CLUSTER", "SLOTS"});
      e->n->conn().submit_here(request{
          std::move(cmd),
          [this, alive = alive_, round, from = e->address](std::error_code ec, reply r) {
            if (!*alive || closed_ || round->settled) return;
            --round->left;
            if (!ec && !r.is_error()) {
              auto res = parse_cluster_slots(r, from.host);
              if (!res.ec && res.map.covered() > 0 && (mode_ != mode::cluster || accept_cluster_map(map_, res.map))) {
                apply(std::move(res.map), from);
                return settle(*round);
              }
              round->failures += " " + to_string(from) + ": " + (res.ec ? res.text : "no slot served");
            } else if (mode_ == mode::unknown && not_a_cluster(r)) {
              // One server: every request goes to it, through the standalone path.
              single_ = &node_at(from);
              mode_ = mode::single;
              return settle(*round);
            } else {
              round->failures += " " + to_string(from) + ": " + (r.is_error() ? r.str : ec.message());
            }
            if (round->left == 0) settle(*round);
          },
          true});
    }
    if (asked.empty()) settle(*round);
  }

  void settle(refresh_round& round) {
    round.settled = true;
    deadline_timer_.cancel();
    gate_.done(clock::now());
    // Still unknown (the first node did not answer): ask again later, as a cluster would be.
    if (mode_ != mode::single) arm_refresh(gate_.next_due());
  }

  void apply(cluster_map m, const node_address& from) {
    entry& answered = node_at(from);
    const bool first = mode_ != mode::cluster;
    std::string what;
    if (!first) what = failovers(map_, m);
    map_ = std::move(m);
    if (first) {
      mode_ = mode::cluster;
      for (auto& e : entries_) e->n->set_auto_ack(true);
      pubsub_.on_cluster([this](connection::callbacks::resolved done) { resolve_sub(std::move(done)); });
    }
    // A pinned node the table no longer lists is gone for good: nothing it ran remains to undo.
    for (auto it = pinned_.begin(); it != pinned_.end();)
      it = map_.find(it->second->address) ? std::next(it) : pinned_.erase(it);
    // One command connection per master, open before the first request needs it.
    for (auto& r : map_.ranges()) node_at(map_.nodes()[r.master].address);
    for (auto& e : entries_) e->n->refresh_replicas();
    // Subscriptions follow their slots (and, the first time, leave the classic connection).
    if (first) pubsub_.decide_sharded(answered.n->conn());
    pubsub_.rehome_all();
    if (!what.empty()) {
      report_background(cfg_, "cluster", {}, what);
      if (events_.on_failover) events_.on_failover(what);
    }
  }

  // What moved from one table to the next because a master failed: a slot whose new master was a
  // replica of it, or whose old master has left the table. (Slots moved by a resharding go with
  // their keys: nothing to re-check.)
  static std::string failovers(const cluster_map& old, const cluster_map& now) {
    std::string out;
    for (const auto& r : old.ranges()) {
      const auto& was = old.nodes()[r.master].address;
      const auto* is = now.owner(r.first);
      if (is == nullptr || is->address == was) continue;
      bool promoted = false;
      for (auto i : r.replicas) promoted = promoted || old.nodes()[i].address == is->address;
      const bool gone = !now.find(was).has_value();
      if (!promoted && !gone) continue;
      if (!out.empty()) out += "; ";
      out += "cluster slots " + std::to_string(r.first) + "-" + std::to_string(r.last) + " moved from " +
             to_string(was) + " to " + to_string(is->address) + (promoted ? " (replica promoted)" : " (node gone)");
    }
    return out;
  }

  // Classic pub/sub reaches every node of a cluster: the subscriber may sit on any master, and
  // moves to the next one each time it connects again.
  void resolve_sub(connection::callbacks::resolved done) {
    std::vector<node_address> masters;
    for (auto& r : map_.ranges()) {
      const auto& a = map_.nodes()[r.master].address;
      if (std::find(masters.begin(), masters.end(), a) == masters.end()) masters.push_back(a);
    }
    if (masters.empty()) return done({}, {}, seeds_.front());
    done({}, {}, masters[sub_cursor_++ % masters.size()]);
  }

  asio::any_io_executor ex_;
  config cfg_;
  io_guard* guard_;
  std::vector<node_address> seeds_;
  std::vector<std::unique_ptr<entry>> entries_;  // seeds first; never shrinks (a node may return)
  std::unordered_map<std::string, entry*> by_address_;
  cluster_map map_;
  cluster_pubsub pubsub_;
  refresh_gate gate_;
  asio::steady_timer refresh_timer_;
  asio::steady_timer deadline_timer_;
  bool refresh_armed_ = false;
  clock::time_point refresh_at_{};
  std::size_t refresh_cursor_ = 0;
  std::size_t sub_cursor_ = 0;
  std::list<call_ptr> waiting_;  // requests in a backoff
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // The node each slot's last request (not an undo) was sent to: where an undo must go. Empty until
  // the first routed request (16384 pointers: one client's cost in a cluster).
  std::vector<entry*> served_;
  std::unordered_map<std::uint16_t, entry*> pinned_;  // slots whose undos wait for their node
  mode mode_ = mode::unknown;
  entry* single_ = nullptr;  // mode single: the server that said it is not a cluster
  bool started_ = false;
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<topology> make_cluster(asio::any_io_executor ex, const config& cfg, io_guard* guard) {
  return std::make_unique<cluster_topology>(std::move(ex), cfg, guard);
}

}  // namespace redlease::detail
