// SPDX-License-Identifier: MIT
// The Redis Cluster cases of redlease-bench (`--cluster`). BENCHMARKS.md, "Redis Cluster", says
// what each measures.
//
// B2-async-cluster-N: 256 owners on one client (pointed at the cluster's first node, which it
// detects as a cluster and routes by slot, a connection per master), chaining async_lock ->
// async_unlock on the reentrant lock as B2-async-reentrant does, their names picked so that their
// slots fall on the first N of the 3 masters, evenly. Its ceiling (ceiling-cluster-N-pair-dD) is
// the single-server pair ceiling's method (redlease_bench.cpp, ceiling_pairs) on each of those N
// masters at once, a raw connection and a thread each, 4,096 keys of its own slots per phase, the
// nodes' pair rates summed; the case divides by the best of depths 16, 64 and 256.
//
// B4-cluster-Nk: B4 (the watchdog at scale) on the cluster, N thousand locks of one owner on a
// client pointed at the first node, their names spread over every slot; against
// B4-cluster-single-Nk, the single-server B4 of as many locks on a private server of the section's
// own, run just before.
#include "cluster_bench.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <thread>

#include "local_server.hpp"
#include "redlease/redlease.hpp"
#include "redlease_lua.hpp"
#include "topology/cluster_slot.hpp"
#include "watchdog_support.hpp"

namespace redlease::cli::bench {
namespace {

namespace lua = redlease::detail::lua;
constexpr std::size_t masters = 3;
constexpr std::size_t phase_keys = 4096;
constexpr int owners = 256;

// A redis-server in cluster mode: the cluster bus on a second free port, its nodes.conf in its
// own directory.
class cluster_node final : public local::redis_server {
 public:
  cluster_node() : redis_server(deferred{}, {}) { launch(); }
  std::uint16_t bus_port() const { return bus_port_; }

 private:
  void pick_ports() override {
    redis_server::pick_ports();
    const std::uint16_t plain = port_;
    do redis_server::pick_ports();
    while (port_ == plain);
    bus_port_ = port_;
    port_ = plain;
  }
  std::vector<std::string> arguments() const override {
    auto a = base_arguments();
    a.insert(a.end(), {"--cluster-enabled", "yes", "--cluster-config-file", dir_ + "/nodes.conf", "--cluster-port",
                       std::to_string(bus_port_), "--cluster-node-timeout", "5000"});
    return a;
  }
  std::uint16_t bus_port_ = 0;
};

// Master i owns the slots [first_slot(i), first_slot(i + 1)), as redis-cli --cluster create splits them.
int first_slot(std::size_t i) { return static_cast<int>(std::lround(16384.0 * static_cast<double>(i) / masters)); }

std::size_t master_of(std::string_view key) {
  const int slot = detail::key_slot(key);
  std::size_t m = 0;
  while (m + 1 < masters && slot >= first_slot(m + 1)) ++m;
  return m;
}

std::string field(const std::string& info, std::string_view name) {
  std::string key = std::string(name) + ":";
  auto pos = info.find(key);
  while (pos != std::string::npos && pos != 0 && info[pos - 1] != '\n') pos = info.find(key, pos + 1);
  if (pos == std::string::npos) return {};
  auto start = pos + key.size();
  return info.substr(start, info.find('\r', start) - start);
}

// The private cluster: masters only, a raw connection to each (INFO cpu, SCRIPT LOAD).
struct cluster {
  std::vector<std::unique_ptr<cluster_node>> nodes;
  std::vector<config> cfgs;
  std::vector<std::unique_ptr<raw_conn>> meters;

  cluster() {
    for (std::size_t i = 0; i < masters; ++i) {
      nodes.push_back(std::make_unique<cluster_node>());
      cfgs.push_back(config::from_url(nodes.back()->url()));
      meters.push_back(std::make_unique<raw_conn>(cfgs.back()));
    }
    auto ok = [](const simple_reply& r, const char* what) {
      if (r.type == '-') throw std::runtime_error(std::string("cluster: ") + what + ": " + r.str);
    };
    for (std::size_t i = 0; i < masters; ++i) {
      const std::string first = std::to_string(first_slot(i)), last = std::to_string(first_slot(i + 1) - 1);
      ok(meters[i]->command({"CLUSTER", "ADDSLOTSRANGE", first, last}), "CLUSTER ADDSLOTSRANGE");
      ok(meters[i]->command({"CLUSTER", "SET-CONFIG-EPOCH", std::to_string(i + 1)}), "CLUSTER SET-CONFIG-EPOCH");
    }
    for (std::size_t i = 1; i < masters; ++i)
      ok(meters[0]->command({"CLUSTER", "MEET", "127.0.0.1", std::to_string(nodes[i]->port()),
                             std::to_string(nodes[i]->bus_port())}),
         "CLUSTER MEET");
    // A master reports ok (and takes writes) 2 s after it started at the earliest (redis' own delay).
    auto deadline = steady::now() + std::chrono::seconds(30);
    for (std::string why;;) {
      why.clear();
      for (std::size_t i = 0; i < masters && why.empty(); ++i) {
        auto info = meters[i]->command({"CLUSTER", "INFO"}).str;
        if (field(info, "cluster_state") != "ok" || field(info, "cluster_known_nodes") != std::to_string(masters))
          why = "node " + std::to_string(nodes[i]->port()) + ": cluster_state:" + field(info, "cluster_state") +
                ", known nodes " + field(info, "cluster_known_nodes");
      }
      if (why.empty()) break;
      if (steady::now() > deadline) throw std::runtime_error("cluster: not ready after 30 s: " + why);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto& m : meters)
      for (const auto* s : {&lua::acquire, &lua::release}) {
        auto r = m->command({"SCRIPT", "LOAD", s->body});
        if (r.str != s->sha1) throw std::runtime_error("SCRIPT LOAD " + std::string(s->name) + ": unexpected " + r.str);
      }
  }
  // Each node's CPU seconds, then their sum as the last element.
  std::vector<double> redis_cpu() {
    std::vector<double> v;
    double sum = 0;
    for (auto& m : meters) sum += v.emplace_back(redis_cpu_seconds(*m));
    v.push_back(sum);
    return v;
  }
};

// `count` key names of `tag` whose slots are on the first `k` masters, as many on each.
std::vector<std::string> names_on(const std::string& tag, std::size_t k, std::size_t count) {
  std::vector<std::string> out;
  std::vector<std::size_t> per(masters, 0);
  const std::size_t quota = (count + k - 1) / k;
  for (std::size_t c = 0; out.size() < count; ++c) {
    std::string name = tag + std::to_string(c);
    const std::size_t m = master_of(name);
    if (m < k && per[m] < quota) {
      ++per[m];
      out.push_back(std::move(name));
    }
  }
  return out;
}

// The summed pair ceiling of the first `k` masters at `depth`: each pumps its own keys on a
// connection and thread of its own, all at once.
row ceiling(const section_run& run, cluster& cl, std::size_t k, int depth) {
  std::vector<double> rate(k, 0);
  std::vector<std::string> errors(k);
  std::vector<std::vector<float>> lat_acq(k), lat_rel(k);
  std::barrier sync(static_cast<std::ptrdiff_t>(k) + 1);
  std::vector<std::thread> ts;
  const auto d = static_cast<std::size_t>(depth);
  for (std::size_t m = 0; m < k; ++m)
    ts.emplace_back([&, m] {
      try {
        raw_conn rc(cl.cfgs[m]);
        stream acq, rel;
        std::size_t i = 0;
        const std::string tag = run.prefix + "cceil:" + std::to_string(k) + ":" + std::to_string(depth) + ":";
        for (std::size_t c = 0; acq.size() < phase_keys; ++c) {
          std::string key = tag + std::to_string(c);
          if (master_of(key) == m) add_pair_requests(acq, rel, key, i++, false, false, run.fake_uuid);
        }
        auto loop = [&](double secs, double& t_acq, double& t_rel, bool record) {
          double n = 0;
          for (auto end = steady::now() + std::chrono::duration<double>(secs); steady::now() < end;) {
            pair_round(rc, acq, rel, 2 * d, d, false, t_acq, t_rel, record ? &lat_acq[m] : nullptr,
                       record ? &lat_rel[m] : nullptr);
            n += static_cast<double>(phase_keys);
          }
          return n;
        };
        double wa = 0, wr = 0, ta = 0, tr = 0;
        sync.arrive_and_wait();
        loop(run.warm_s, wa, wr, false);
        sync.arrive_and_wait();
        double n = loop(run.ceiling_s, ta, tr, true);
        rate[m] = n / (ta + tr);
        sync.arrive_and_wait();
      } catch (const std::exception& e) {
        errors[m] = e.what();
        // Leaves the barrier, so that the other threads and the caller do not wait for it.
        sync.arrive_and_drop();
      }
    });
  sync.arrive_and_wait();
  sync.arrive_and_wait();
  const double cpu0 = process_cpu_seconds(), redis0 = cl.redis_cpu().back();
  auto t0 = steady::now();
  sync.arrive_and_wait();
  const double secs = std::chrono::duration<double>(steady::now() - t0).count();
  const double cpu1 = process_cpu_seconds(), redis1 = cl.redis_cpu().back();
  for (auto& t : ts) t.join();
  for (auto& e : errors)
    if (!e.empty()) throw std::runtime_error(e);
  row r;
  r.name = "ceiling-cluster-" + std::to_string(k) + "-pair-d" + std::to_string(depth);
  for (double v : rate) r.ops_per_s += v;
  r.rt_per_op = 2;
  // As the single-server ceiling: a pair waits for one acquire and one release, over every node.
  std::vector<float> all_acq, all_rel;
  for (std::size_t m = 0; m < k; ++m) {
    all_acq.insert(all_acq.end(), lat_acq[m].begin(), lat_acq[m].end());
    all_rel.insert(all_rel.end(), lat_rel[m].begin(), lat_rel[m].end());
  }
  r.p50_us = percentile(all_acq, 0.5) + percentile(all_rel, 0.5);
  r.p99_us = percentile(all_acq, 0.99) + percentile(all_rel, 0.99);
  // CPU per pair over the measured stretch (the nodes' loops end within one round of each other).
  const double pairs = r.ops_per_s * secs;
  r.redis_us_per_op = pairs > 0 ? (redis1 - redis0) * 1e6 / pairs : 0;
  r.client_us_per_op = pairs > 0 ? (cpu1 - cpu0) * 1e6 / pairs : 0;
  r.num("masters", static_cast<double>(k));
  r.num("depth", depth);
  for (std::size_t m = 0; m < k; ++m) r.num("node" + std::to_string(m) + "_ops_per_s", rate[m]);
  r.num("redis_cpu_pct", 100 * (redis1 - redis0) / secs);
  return r;
}

// B2-async-reentrant's chains with the owners' names on the first `k` masters.
row async_case(const section_run& run, cluster& cl, std::size_t k) {
  row r;
  r.name = "B2-async-cluster-" + std::to_string(k);
  // The first node's address and nothing else of --redis's (TLS, AUTH, Sentinel); the run's client
  // settings.
  config cfg = cl.cfgs[0];
  cfg.client_name = run.cfg.client_name;
  cfg.sync_wait = run.cfg.sync_wait;
  cfg.sync_lane = run.cfg.sync_lane;
  client c{cfg};
  c.ping();
  std::vector<decltype(c.lock(""))> locks;
  std::vector<owner_id> ids;
  for (auto& name : names_on(run.prefix + "cluster-" + std::to_string(k) + ":", k, owners)) {
    locks.push_back(c.lock(name));
    ids.push_back(c.new_owner());
  }
  std::unique_ptr<async_chains> chains;
  auto step = [&](std::size_t i) {
    locks[i].async_lock(ids[i], [&, i](std::error_code ec) {
      if (ec) return chains->failed(i, "async_lock: " + ec.message());
      locks[i].async_unlock(ids[i], [&, i](std::error_code ec2) {
        if (ec2) return chains->failed(i, "async_unlock: " + ec2.message());
        chains->pair_done(i);
      });
    });
  };
  chains = std::make_unique<async_chains>(static_cast<std::size_t>(owners), step);
  chains->run(run.warm_s, false, nullptr, nullptr);
  struct mark {
    steady::time_point t;
    double cpu = 0, redis = 0, cmds = 0, writes = 0;
    std::vector<double> nodes;
    long long csw = 0;
  } a, b;
  auto sample = [&](mark& s) {
    s.nodes = cl.redis_cpu();
    s.redis = s.nodes.back();
    auto st = c.stats();
    s.cmds = static_cast<double>(st.commands);
    s.writes = static_cast<double>(st.writes);
    s.cpu = process_cpu_seconds();
    s.csw = process_context_switches();
    s.t = steady::now();
  };
  auto [pairs, lat] = chains->run(run.case_s, true, [&] { sample(a); }, [&] { sample(b); });
  const double secs = std::chrono::duration<double>(b.t - a.t).count();
  r.ops_per_s = pairs / secs;
  r.p50_us = percentile(lat, 0.5);
  r.p99_us = percentile(lat, 0.99);
  r.rt_per_op = pairs > 0 ? (b.cmds - a.cmds) / pairs : 0;
  r.redis_us_per_op = pairs > 0 ? (b.redis - a.redis) * 1e6 / pairs : 0;
  r.client_us_per_op = pairs > 0 ? (b.cpu - a.cpu) * 1e6 / pairs : 0;
  r.num("ops", pairs);
  r.num("seconds", secs);
  r.num("owners", owners);
  r.num("masters", static_cast<double>(k));
  r.num("commands_per_write", b.writes > a.writes ? (b.cmds - a.cmds) / (b.writes - a.writes) : 0);
  r.num("redis_cpu_pct", 100 * (b.redis - a.redis) / secs);
  // The masters without keys work too when the scripts' PUBLISH crosses the cluster bus.
  for (std::size_t m = 0; m < masters; ++m)
    r.num("node" + std::to_string(m) + "_redis_cpu_pct", 100 * (b.nodes[m] - a.nodes[m]) / secs);
  r.num("client_cpu_pct", 100 * (b.cpu - a.cpu) / secs);
  r.num("context_switches_per_op", pairs > 0 ? static_cast<double>(b.csw - a.csw) / pairs : 0);
  return r;
}

std::string thousands(std::size_t n) { return std::to_string(n / 1000) + "k"; }

// B4 on the cluster: the single-server case's acquisition, hold and checks (watchdog_support.hpp),
// each key's PTTL, EXISTS and DEL sent to its own master, the server-side figures per master.
row watchdog_case(const section_run& run, cluster& cl, const std::string& name, std::size_t n) {
  row r;
  r.name = name;
  std::vector<std::string> keys(n);
  std::vector<std::vector<std::string>> on(masters);
  std::vector<bool> slot_used(16384, false);
  std::vector<double> slots(masters, 0);
  for (std::size_t i = 0; i < n; ++i) {
    keys[i] = run.prefix + name + ":" + std::to_string(i);
    const auto m = master_of(keys[i]);
    on[m].push_back(keys[i]);
    const auto slot = static_cast<std::size_t>(detail::key_slot(keys[i]));
    if (!slot_used[slot]) ++slots[m];
    slot_used[slot] = true;
  }
  config cfg = cl.cfgs[0];
  cfg.client_name = run.cfg.client_name;
  cfg.watchdog_timeout = watchdog_lease;
  std::atomic<long long> lost{0};
  std::vector<float> lat;
  struct mark {
    steady::time_point t;
    double cpu = 0;
    std::vector<double> nodes, calls, reads;
    client_stats st;
  } a, b;
  auto sample = [&](mark& s, const client& c) {
    s.nodes = cl.redis_cpu();
    s.calls.clear();
    s.reads.clear();
    for (auto& m : cl.meters) {
      // The renewals are EVALSHA; an EVAL would follow a NOSCRIPT.
      s.calls.push_back(command_calls(*m, "evalsha") + command_calls(*m, "eval"));
      s.reads.push_back(std::strtod(info_field(*m, "stats", "total_reads_processed").c_str(), nullptr));
    }
    s.st = c.stats();
    s.cpu = process_cpu_seconds();
    s.t = steady::now();
  };
  long long min_ttl = -1;
  double acquire_s = 0;
  client_stats end_stats;
  {
    client c{cfg};
    c.ping();
    acquire_s = acquire_all(c, keys, lost, lat);
    std::vector<std::vector<std::string>> probe;
    for (auto& k : on) probe.push_back(spread_sample(k, 64 / masters));
    sample(a, c);
    // Every 200 ms, a PTTL pass over a few keys of each master: the watchdog's margin on each.
    const auto end = a.t + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(run.watchdog_window_s));
    while (steady::now() < end) {
      for (std::size_t m = 0; m < masters; ++m) {
        const auto t = min_pttl(*cl.meters[m], probe[m]);
        if (t && (min_ttl < 0 || *t < min_ttl)) min_ttl = *t;
      }
      std::this_thread::sleep_for(std::min<steady::duration>(std::chrono::milliseconds(200), end - steady::now()));
    }
    sample(b, c);
    end_stats = c.stats();
  }
  double alive = 0;
  for (std::size_t m = 0; m < masters; ++m) alive += static_cast<double>(keys_command(*cl.meters[m], "EXISTS", on[m], 1).int_sum);
  for (std::size_t m = 0; m < masters; ++m) keys_command(*cl.meters[m], "DEL", on[m], 1);

  const double secs = std::chrono::duration<double>(b.t - a.t).count();
  const double intervals = secs / watchdog_interval_s;
  const double nd = static_cast<double>(n);
  const double renewed = static_cast<double>(b.st.renewed_locks - a.st.renewed_locks);
  const double cmds = static_cast<double>(b.st.commands - a.st.commands);
  const double writes = static_cast<double>(b.st.writes - a.st.writes);
  const double redis = b.nodes.back() - a.nodes.back();
  r.ops_per_s = renewed / secs;  // an op here is one lock renewal
  r.rt_per_op = renewed > 0 ? cmds / renewed : 0;
  r.redis_us_per_op = renewed > 0 ? redis * 1e6 / renewed : 0;
  r.client_us_per_op = renewed > 0 ? (b.cpu - a.cpu) * 1e6 / renewed : 0;
  r.p50_us = percentile(lat, 0.5);  // acquisition latency while taking them (1,000 in flight)
  r.p99_us = percentile(lat, 0.99);
  r.num("locks", nd);
  r.num("alive", alive);
  r.num("watched", static_cast<double>(end_stats.watched_locks));
  r.num("lost", static_cast<double>(lost.load()));
  r.num("masters", static_cast<double>(masters));
  r.num("round_trips_per_interval", cmds / intervals);
  r.num("renew_calls_per_interval", static_cast<double>(b.st.renew_calls - a.st.renew_calls) / intervals);
  r.num("writes_per_interval", writes / intervals);
  // client_stats sums its connections: per master, the client's writes divided by the masters.
  r.num("writes_per_node_per_interval", writes / intervals / static_cast<double>(masters));
  // A tick: a watchdog firing that sent renewals (its calls go out together, per connection).
  const double ticks = static_cast<double>(b.st.watchdog_ticks - a.st.watchdog_ticks);
  r.num("ticks_per_interval", ticks / intervals);
  r.num("writes_per_node_per_tick", ticks > 0 ? writes / ticks / static_cast<double>(masters) : 0);
  r.num("renewals_per_lock_per_interval", renewed / nd / intervals);
  r.num("min_ttl_ms", static_cast<double>(min_ttl));
  r.num("acquire_per_s", nd / acquire_s);
  r.num("redis_cpu_pct", 100 * redis / secs);
  r.num("client_cpu_pct", 100 * (b.cpu - a.cpu) / secs);
  r.num("window_s", secs);
  for (std::size_t m = 0; m < masters; ++m) {
    const std::string p = "node" + std::to_string(m) + "_";
    const double share = static_cast<double>(on[m].size()) / nd;
    r.num(p + "locks", static_cast<double>(on[m].size()));
    r.num(p + "slots_with_locks", slots[m]);
    r.num(p + "script_calls_per_interval", (b.calls[m] - a.calls[m]) / intervals);
    // The server's read events (INFO stats), the bench's own PTTL and INFO commands included.
    r.num(p + "server_reads_per_interval", (b.reads[m] - a.reads[m]) / intervals);
    r.num(p + "redis_cpu_pct", 100 * (b.nodes[m] - a.nodes[m]) / secs);
    r.num(p + "redis_us_per_renewal", renewed > 0 ? (b.nodes[m] - a.nodes[m]) * 1e6 / (renewed * share) : 0);
  }
  return r;
}

}  // namespace

std::vector<std::string> cluster_case_names(std::size_t watchdog_locks) {
  std::vector<std::string> names{"B2-async-cluster-1", "B2-async-cluster-2", "B2-async-cluster-3"};
  if (watchdog_locks > 0) {
    names.push_back("B4-cluster-single-" + thousands(watchdog_locks));
    names.push_back("B4-cluster-" + thousands(watchdog_locks));
  }
  return names;
}

void run_cluster_cases(const section_run& run) {
  const auto names = cluster_case_names(run.watchdog_locks);
  if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return run.wanted(n); })) return;
  auto fail_all = [&](const std::string& why) {
    for (auto& n : names)
      if (run.wanted(n)) {
        row r;
        r.name = n;
        r.error = why;
        run.emit(std::move(r));
      }
  };
  std::unique_ptr<cluster> cl;
  try {
    if (!local::redis_server::available()) throw std::runtime_error("redis-server not found on PATH");
    cl = std::make_unique<cluster>();
  } catch (const std::exception& e) {
    return fail_all(e.what());
  }
  if (!run.json)
    std::cout << "\nRedis Cluster: 3 private masters (ports " << cl->nodes[0]->port() << ", " << cl->nodes[1]->port()
              << ", " << cl->nodes[2]->port() << "), the client pointed at the first; ceiling per node, summed\n";
  for (std::size_t k = 1; k <= masters; ++k) {
    const std::string& name = names[k - 1];
    if (!run.wanted(name)) continue;
    row r;
    try {
      row best;
      for (int depth : {16, 64, 256}) {
        row c = ceiling(run, *cl, k, depth);
        if (c.ops_per_s > best.ops_per_s) best = c;
        if (!run.json)
          std::cout << "  " << k << " master(s), depth " << depth << ": reentrant pair ceiling "
                    << num("%.0f", c.ops_per_s) << "/s (redis " << num("%.0f", c.get("redis_cpu_pct"))
                    << " % of a core)\n";
        run.emit(std::move(c));
      }
      r = async_case(run, *cl, k);
      r.has_ceiling = true;
      r.ceiling = best.ops_per_s;
      r.ratio = r.ops_per_s / best.ops_per_s;
      r.note = "vs " + std::to_string(k) + " master(s)' summed pair ceiling (depth " +
               num("%.0f", best.get("depth")) + "); " + num("%.1f", r.get("commands_per_write")) + " cmds/write";
    } catch (const std::exception& e) {
      r = row{};
      r.name = name;
      r.error = e.what();
    }
    run.emit(std::move(r));
  }
  if (run.watchdog_locks == 0) return;
  const std::string single = names[masters], on_cluster = names[masters + 1];
  auto attempt = [&](const std::string& name, auto&& fn) {
    if (run.wanted(name)) run.emit(attempt_row(name, fn));
  };
  // The reference, as many locks on a standalone server of its own (no other keys, a fresh server
  // like the cluster's masters).
  double single_us = 0;
  attempt(single, [&] {
    if (!run.watchdog_single) throw std::runtime_error("no single-server B4 given");
    local::redis_server server;
    auto r = run.watchdog_single(server.url(), single, run.watchdog_locks, run.watchdog_window_s);
    single_us = r.redis_us_per_op;
    return r;
  });
  attempt(on_cluster, [&] {
    auto r = watchdog_case(run, *cl, on_cluster, run.watchdog_locks);
    if (single_us > 0) {
      r.num("single_redis_us_per_renewal", single_us);
      r.num("redis_cpu_vs_single", r.redis_us_per_op / single_us);
    }
    r.note = num("%.0f", r.get("locks")) + " locks: " + num("%.0f", r.get("renew_calls_per_interval")) +
             " script calls/interval (" + num("%.0f", r.get("node0_script_calls_per_interval")) + ", " +
             num("%.0f", r.get("node1_script_calls_per_interval")) + ", " +
             num("%.0f", r.get("node2_script_calls_per_interval")) + " per master), " +
             num("%.1f", r.get("writes_per_node_per_interval")) + " writes/node/interval, " +
             num("%.2f", r.get("writes_per_node_per_tick")) + " per tick; redis " +
             num("%.2f", r.redis_us_per_op) + " us/renewal, " + num("%.2f", r.get("redis_cpu_vs_single")) +
             "x single; min TTL " + num("%.0f", r.get("min_ttl_ms")) + " ms";
    return r;
  });
}

}  // namespace redlease::cli::bench
