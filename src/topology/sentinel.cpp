// SPDX-License-Identifier: MIT
// A master found through Sentinels (topologies.md §2.1): the Sentinels are asked in turn, with
// short timeouts, before every connection to the master; the master is checked with ROLE once
// connected; a switch is seen on `+switch-master` and by polling, and closes every connection to
// the old master at once (Sentinel leaves it writable for about ten seconds after the switch).
#include <asio/steady_timer.hpp>

#include "background.hpp"
#include "redlease/error.hpp"
#include "topology/sentinel_fsm.hpp"
#include "net/subscriber.hpp"
#include "topology/node.hpp"
#include "topology/topology.hpp"

namespace redlease::detail {
namespace {

constexpr std::string_view switch_channel = "+switch-master";

// The config of a connection to a Sentinel: its own credentials, no database, short timeouts.
config sentinel_config(const config& cfg) {
  config s = cfg;
  s.unix_socket.clear();
  s.username = cfg.sentinel.username;
  s.password = cfg.sentinel.password;
  s.database = 0;
  s.connect_timeout = cfg.sentinel.timeout;
  s.request_timeout = cfg.sentinel.timeout;
  s.reconnect_max_delay = std::max(cfg.sentinel.timeout, s.reconnect_min_delay);
  s.tls = cfg.sentinel.tls;
  s.sentinel.nodes.clear();
  return s;
}

std::vector<node_address> addresses(const config& cfg) {
  std::vector<node_address> out;
  for (auto& n : cfg.sentinel.nodes) out.push_back({n.host, n.port});
  return out;
}

class sentinel_topology final : public topology, private subscriber::listener {
 public:
  sentinel_topology(asio::any_io_executor ex, const config& cfg, io_guard* guard)
      : cfg_(cfg),
        scfg_(sentinel_config(cfg)),
        dir_(addresses(cfg)),
        query_(std::make_shared<connection>(ex, scfg_, ":sentinel")),
        watch_(ex, scfg_, ":sentinel-sub"),
        master_(ex, cfg_, "", guard),
        sub_(ex, cfg_),
        poll_(ex) {
    // The two connections to Sentinels each rotate through them: a Sentinel that fails to connect
    // or to answer in time is left for the next.
    query_->set_callbacks({[this] { on_query_up(); },
                           [this] {
                             // A Sentinel whose answer was no use has been passed over already.
                             if (passing_over_) return;
                             auto ec = query_->last_error();
                             // The Sentinel's own words when it gave some (WRONGPASS, NOPERM).
                             const auto& words = query_->last_error_text();
                             dir_.failed(query_at_, !ec ? "connection lost" : words.empty() ? ec.message() : words);
                           },
                           {},
                           {}});
    query_->set_resolver([this](connection::callbacks::resolved done) { done({}, {}, dir_.current(query_at_)); });
    watch_.conn().set_resolver([this](connection::callbacks::resolved done) {
      // The watcher has its own cursor, and takes the next Sentinel at every attempt.
      done({}, {}, dir_.current(watch_at_++));
    });
    master_.set_auto_ack(true);
    master_.conn().set_callbacks({[this] {
                                    master_.on_up();
                                    if (events_.on_up) events_.on_up();
                                  },
                                  {},
                                  {},
                           {}});
    master_.conn().require_master();
    master_.conn().set_resolver([this](connection::callbacks::resolved done) { resolve_master(std::move(done)); });
    sub_.conn().require_master();
    sub_.conn().share_role_report(master_.conn());
    sub_.conn().set_resolver([this](connection::callbacks::resolved done) { resolve_master(std::move(done)); });
  }

  void start() override {
    query_->start();
    watch_.add(std::string(switch_channel), this);
    watch_.start();
    master_.conn().start();
    arm_poll();
  }

  void close() override {
    closed_ = true;
    poll_.cancel();
    watch_.remove(std::string(switch_channel), this);
    watch_.close();
    sub_.close();
    master_.close();
    query_->close();
  }

  bool promotes_replicas() const override { return true; }
  subscriber& sub_for(std::string_view) override { return sub_; }
  void for_each_connection(const std::function<void(const connection&, bool)>& f) const override {
    f(*master_.conn_ptr(), false);
    f(sub_.conn(), true);
  }
  void for_each_node(const std::function<void(const node&)>& f) const override { f(master_); }

 protected:
  node& route(std::string_view) override { return master_; }

 private:
  void on_query_up() {
    dir_.answered(query_at_);
    refresh_sentinels();
  }

  // Learn the other Sentinels of this master, so that losing the configured ones is survivable, and
  // forget the learnt ones that have gone, so that a failover does not wait on each of them. The
  // answer comes from the Sentinel the query cursor names: a request is never answered by another.
  void refresh_sentinels() {
    std::string cmd;
    encode_command(cmd, {"SENTINEL", "SENTINELS", cfg_.sentinel.master_name});
    query_->submit_here(request{std::move(cmd), [this](std::error_code ec, reply r) {
                                  if (!ec && !closed_) dir_.learn(r, query_at_);
                                }});
  }

  // Before every connection to the master (the first one, and after a failover or a loss): the
  // directory is brought up to date when it matters, at no cost in between.
  void resolve_master(connection::callbacks::resolved done) {
    ask_master(std::move(done));
    refresh_sentinels();
  }

  // Asks the Sentinel of the query connection for the master's address. A failure moves the query
  // connection to the next Sentinel, and the question goes there, until each known Sentinel has
  // been asked once: only then does this resolution fail (and the data connection retry later). A
  // first Sentinel that is down must not fail a one-shot caller (`redlease status`) while the
  // second one answers.
  void ask_master(connection::callbacks::resolved done) { ask_master(std::move(done), dir_.size()); }
  void ask_master(connection::callbacks::resolved done, std::size_t tries) {
    std::string cmd;
    // SENTINEL MASTER rather than GET-MASTER-ADDR-BY-NAME: its config-epoch tells a lagging
    // Sentinel's answer (the old master) from a current one.
    encode_command(cmd, {"SENTINEL", "MASTER", cfg_.sentinel.master_name});
    query_->submit_here(request{std::move(cmd), [this, done = std::move(done), tries](std::error_code ec, reply r) mutable {
                                  if (closed_) return done(errc::client_closed, {}, {});
                                  auto who = to_string(dir_.current(query_at_));
                                  if (ec) {
                                    std::string why = r.is_error() ? r.str : ec.message();
                                    if (ec == errc::request_timeout) query_->reconnect_now(ec);
                                    if (tries > 1 && ec != errc::client_closed) return ask_master(std::move(done), tries - 1);
                                    return done(errc::no_sentinel, "no Sentinel answered: " + dir_.failures() +
                                                                       (dir_.failures().empty() ? who + ": " + why : ""),
                                                {});
                                  }
                                  auto a = parse_master_info(r, who, cfg_.sentinel.master_name);
                                  if (a.ec) {
                                    // This Sentinel does not know the master (or refuses): ask another.
                                    dir_.failed(query_at_, a.text);
                                    passing_over_ = true;
                                    query_->reconnect_now(errc::no_sentinel);
                                    passing_over_ = false;
                                    if (tries > 1) return ask_master(std::move(done), tries - 1);
                                    return done(a.ec, a.text, {});
                                  }
                                  auto v = tracker_.answer(a.address, a.epoch);
                                  if (v == master_tracker::verdict::switched) switched("Sentinel " + who + " answered");
                                  // A stale answer: the master already known is the newer one.
                                  done({}, {}, *tracker_.current());
                                }});
  }

  // The master changed: every connection to the old one goes at once (it stays writable for
  // about ten seconds), and the lock layer re-checks its holds.
  void switched(const std::string& source) {
    const auto& old = *tracker_.previous();
    const auto& now = *tracker_.current();
    std::string what = "master '" + cfg_.sentinel.master_name + "' switched from " + to_string(old) + " to " +
                       to_string(now) + " (" + source + ")";
    report_background(cfg_, "sentinel", {}, what);
    if (!(master_.conn().is_up() && master_.conn().address() == now)) master_.reconnect_now(errc::connection_lost);
    if (!(sub_.conn().is_up() && sub_.conn().address() == now)) sub_.conn().reconnect_now(errc::connection_lost);
    if (events_.on_failover) events_.on_failover(what);
  }

  // The watch connection (re)subscribed: a +switch-master published while it was down is lost, so
  // ask once (with sentinel.poll_interval = 0 nothing else would).
  void on_subscribed() override {
    if (!closed_) ask_master([](std::error_code, std::string, node_address) {});
  }

  void on_message(std::string_view, std::string_view payload) override {
    auto a = parse_switch_master(payload, cfg_.sentinel.master_name);
    if (a && tracker_.switch_message(*a) == master_tracker::verdict::switched) switched("+switch-master");
  }

  // The poll also refreshes the Sentinels: one that went while the master stayed put would
  // otherwise be tried, at a connect timeout each, at the next failover, when time matters most.
  // And it asks the master for its replicas (auto replica acknowledgement): after a failover the
  // old master rejoins as a replica seconds after the client has connected to the new one.
  void arm_poll() {
    if (closed_ || cfg_.sentinel.poll_interval.count() <= 0) return;
    poll_.expires_after(cfg_.sentinel.poll_interval);
    poll_.async_wait([this](std::error_code ec) {
      if (ec || closed_) return;
      ask_master([this](std::error_code, std::string, node_address) { arm_poll(); });
      refresh_sentinels();
      master_.refresh_replicas();
    });
  }

  config cfg_;
  config scfg_;
  sentinel_directory dir_;
  std::size_t query_at_ = 0;
  std::size_t watch_at_ = 0;
  std::shared_ptr<connection> query_;
  subscriber watch_;
  node master_;
  subscriber sub_;
  asio::steady_timer poll_;
  master_tracker tracker_;
  bool closed_ = false;
  bool passing_over_ = false;  // the query connection leaves a Sentinel already marked failed
};

}  // namespace

std::unique_ptr<topology> make_sentinel(asio::any_io_executor ex, const config& cfg, io_guard* guard) {
  return std::make_unique<sentinel_topology>(std::move(ex), cfg, guard);
}

}  // namespace redlease::detail
