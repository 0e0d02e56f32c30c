// SPDX-License-Identifier: MIT
// The RedLock cases of redlease-bench (issue 38). BENCHMARKS.md, "RedLock", says what each measures.
//
// R1-*: one thread, one acquisition at a time. R1-single is `client::mutex(name).try_lock()` +
// `unlock()` on one server; R1-redlock-3 and -5 are `redlock::try_lock()` + `unlock()` over 3 and 5
// servers, and R1-redlock-1 the same over the first server alone (the handle's own cost). Their
// p50/p99 are those of the acquisition (try_lock alone). Next to them, in the same slices, a raw
// blocking client does what a perfect RedLock client does on the wire: `SET NX PX` to each of N
// servers in one go, then the compare-and-delete to each (rows ceiling-redlock-seq-N, p50 until a
// majority answered). The cases take turns, a slice each, forwards and backwards, so that the
// VM's moods fall on all of them alike.
//
// B2-async-redlock-3: 256 handles over 3 servers chaining async_try_lock(0ms) -> async_unlock, against
// the 3 servers' pair ceiling of the same run: a `SET NX PX` and a compare-and-delete per pair on
// every server, pipelined on a raw connection per server (a thread each), 4,096 keys per phase, as
// the single-server pair ceilings are measured (redlease_bench.cpp, ceiling_pairs).
#include "redlock_bench.hpp"

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <thread>

#include "local_server.hpp"
#include "redlease/redlease.hpp"
#include "redlease/redlock.hpp"
#include "redlease_lua.hpp"

namespace redlease::cli::bench {
namespace {

using namespace std::chrono_literals;
namespace lua = redlease::detail::lua;

const std::string ttl_ms = "30000";  // the keys' TTL in the raw rows (the handles' default TTL too)
constexpr std::size_t phase_keys = 4096;

// The private servers, a raw connection to each (INFO cpu, SCRIPT LOAD) and a client config each.
struct servers {
  std::vector<std::unique_ptr<local::redis_server>> procs;
  std::vector<config> cfgs;
  std::vector<std::unique_ptr<raw_conn>> meters;

  servers(const config& base, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      procs.push_back(std::make_unique<local::redis_server>());
      // The server's address and nothing else of --redis's (TLS, AUTH, Sentinel); the run's client
      // settings (--sync-wait, --no-sync-lane, the client name).
      config c = config::from_url(procs.back()->url());
      c.client_name = base.client_name;
      c.sync_wait = base.sync_wait;
      c.sync_lane = base.sync_lane;
      cfgs.push_back(c);
      meters.push_back(std::make_unique<raw_conn>(c));
      auto r = meters.back()->command({"SCRIPT", "LOAD", lua::redlock_release.body});
      if (r.str != lua::redlock_release.sha1) throw std::runtime_error("SCRIPT LOAD redlock_release: " + r.str);
    }
  }
  double redis_cpu(std::size_t n) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += redis_cpu_seconds(*meters[i]);
    return s;
  }
};

// Process and servers before and after a measured stretch, for the row's costs per op.
struct meter {
  steady::time_point t;
  double cpu = 0, redis = 0;
  long long csw = 0;
  double cmds = 0, writes = 0;
};

meter sample(servers& ss, std::size_t n, const std::vector<client*>& cs) {
  meter m;
  m.redis = ss.redis_cpu(n);
  for (auto* c : cs) {
    auto st = c->stats();
    m.cmds += static_cast<double>(st.commands);
    m.writes += static_cast<double>(st.writes);
  }
  m.cpu = process_cpu_seconds();
  m.csw = process_context_switches();
  m.t = steady::now();
  return m;
}

// Sums of the measured stretches of one case (several slices for the R1 ones).
struct totals {
  double secs = 0, ops = 0, cpu = 0, redis = 0, csw = 0, cmds = 0, writes = 0;
  void add(const meter& a, const meter& b, double n) {
    secs += seconds(a.t, b.t);
    ops += n;
    cpu += b.cpu - a.cpu;
    redis += b.redis - a.redis;
    csw += static_cast<double>(b.csw - a.csw);
    cmds += b.cmds - a.cmds;
    writes += b.writes - a.writes;
  }
  // rt: commands per op when no client counts them (the raw rows).
  void fill(row& r, std::size_t n_servers, double rt = 0) const {
    r.ops_per_s = ops / secs;
    r.rt_per_op = rt > 0 ? rt : (ops > 0 ? cmds / ops : 0);
    r.redis_us_per_op = ops > 0 ? redis * 1e6 / ops : 0;
    r.client_us_per_op = ops > 0 ? cpu * 1e6 / ops : 0;
    r.num("ops", ops);
    r.num("seconds", secs);
    r.num("servers", static_cast<double>(n_servers));
    r.num("redis_cpu_pct", 100 * redis / secs);  // summed over the servers
    r.num("client_cpu_pct", 100 * cpu / secs);
    r.num("context_switches_per_op", ops > 0 ? csw / ops : 0);
    if (writes > 0) r.num("commands_per_write", cmds / writes);  // the clients' (none: raw)
  }
};

// ---- R1: one acquisition at a time ------------------------------------------------------------

struct seq_case {
  std::string name;
  std::size_t n = 1;                // servers
  std::vector<client*> clients;     // whose commands count (none: raw)
  // When the acquisition counts as done (a raw row: a majority answered); time_point{}: refused.
  std::function<steady::time_point()> acquire;
  std::function<void()> release;
  const float* all_answered_us = nullptr;  // raw rows: the last acquisition's time to every answer
  double rt = 0;                    // commands per pair when no client counts them
  std::vector<float> lat, unlock_lat, all_lat;  // all_lat: raw rows, until every server answered
  totals sum;
  std::string error;
};

// The raw client of ceiling-redlock-seq-N: blocking connections, one per server, a pair's requests
// written to every server before any reply is read; the acquisition's latency is taken when a
// majority (in the order of the servers) has answered.
struct raw_redlock {
  std::vector<std::unique_ptr<raw_conn>> conns;
  std::string acq, rel;
  float all_answered_us = 0;  // the last acquisition's, until every server answered

  raw_redlock(servers& ss, std::size_t n, const std::string& key) {
    for (std::size_t i = 0; i < n; ++i) conns.push_back(std::make_unique<raw_conn>(ss.cfgs[i]));
    const std::string value = "0123456789abcdef0123456789abcdef";
    encode(acq, {"SET", key, value, "NX", "PX", ttl_ms});
    encode(rel, {"EVALSHA", lua::redlock_release.sha1, "1", key, value});
  }
  // Returns the time of the majority's answer; checks every reply.
  steady::time_point round(const std::string& req, bool is_acquire, steady::time_point t0) {
    for (auto& c : conns) c->send(req);
    steady::time_point quorum{};
    for (std::size_t i = 0; i < conns.size(); ++i) {
      auto t = conns[i]->read(1);
      if (is_acquire ? t.status != 1 : (t.integer != 1 || t.int_sum != 1))
        throw std::runtime_error("raw RedLock: a node refused: " + t.first_error);
      if (i + 1 == conns.size() / 2 + 1) quorum = steady::now();
    }
    if (is_acquire) all_answered_us = us(steady::now() - t0);
    return quorum;
  }
};

void run_slice(seq_case& c, servers& ss, double secs, bool record) {
  auto a = sample(ss, c.n, c.clients);
  auto end = a.t + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(secs));
  double n = 0;
  for (auto t0 = steady::now(); t0 < end; t0 = steady::now()) {
    auto got = c.acquire();
    if (got == steady::time_point{}) throw std::runtime_error(c.name + ": try_lock refused a free lock");
    auto t1 = steady::now();
    c.release();
    if (record) {
      c.lat.push_back(us(got - t0));
      c.unlock_lat.push_back(us(steady::now() - t1));
      if (c.all_answered_us) c.all_lat.push_back(*c.all_answered_us);
    }
    ++n;
  }
  auto b = sample(ss, c.n, c.clients);
  if (record) c.sum.add(a, b, n);
}

// One io_context on one thread, for clients made on a supplied executor: a RedLock's hops between
// its clients are then posts on one thread, with no thread to wake.
struct one_thread_io {
  asio::io_context ctx;
  asio::executor_work_guard<asio::io_context::executor_type> guard{ctx.get_executor()};
  std::thread thread{[this] { ctx.run(); }};
  one_thread_io() = default;
  one_thread_io(const one_thread_io&) = delete;
  one_thread_io& operator=(const one_thread_io&) = delete;
  ~one_thread_io() {
    guard.reset();
    ctx.stop();
    thread.join();
  }
};

// Runs the R1 cases and their raw rows in turns: a warm-up slice of each, then 4 slices of each,
// the turns alternately forwards and backwards.
std::vector<row> r1_cases(const redlock_run& run, servers& ss, const std::vector<std::size_t>& sizes) {
  std::vector<std::unique_ptr<client>> clients;
  for (std::size_t i = 0; i < ss.cfgs.size(); ++i) {
    clients.push_back(std::make_unique<client>(ss.cfgs[i]));
    clients.back()->ping();
  }
  // R1-redlock-3-one-thread: the same RedLock over 3 clients that share one I/O thread.
  one_thread_io io;
  std::vector<std::unique_ptr<client>> shared_clients;
  if (run.wanted("R1-redlock-3-one-thread"))
    for (std::size_t i = 0; i < 3 && i < ss.cfgs.size(); ++i) {
      shared_clients.push_back(std::make_unique<client>(io.ctx.get_executor(), ss.cfgs[i]));
      shared_clients.back()->ping();
    }
  std::vector<std::unique_ptr<redlock>> locks;
  std::vector<std::unique_ptr<raw_redlock>> raws;
  std::vector<std::unique_ptr<mutex>> single;
  std::vector<std::unique_ptr<seq_case>> cases;
  for (std::size_t n : sizes) {
    const std::string raw_name = "ceiling-redlock-seq-" + std::to_string(n);
    auto raw = std::make_unique<seq_case>();
    raw->name = raw_name;
    raw->n = n;
    raw->rt = 2.0 * static_cast<double>(n);
    raws.push_back(std::make_unique<raw_redlock>(ss, n, run.prefix + raw_name));
    auto* rr = raws.back().get();
    raw->all_answered_us = &rr->all_answered_us;
    raw->acquire = [rr] { return rr->round(rr->acq, true, steady::now()); };
    raw->release = [rr] { rr->round(rr->rel, false, steady::now()); };
    cases.push_back(std::move(raw));
    // Over one server: the mutex, and a RedLock of one node (the handle's own cost, with no second
    // server to wait for).
    if (n == 1) {
      auto lib = std::make_unique<seq_case>();
      lib->name = "R1-single";
      lib->clients = {clients[0].get()};
      single.push_back(std::make_unique<mutex>(clients[0]->mutex(run.prefix + lib->name)));
      auto* m = single.back().get();
      lib->acquire = [m] { return m->try_lock() ? steady::now() : steady::time_point{}; };
      lib->release = [m] { m->unlock(); };
      cases.push_back(std::move(lib));
    }
    auto lib = std::make_unique<seq_case>();
    lib->name = "R1-redlock-" + std::to_string(n);
    lib->n = n;
    std::vector<std::reference_wrapper<client>> refs;
    for (std::size_t i = 0; i < n; ++i) {
      refs.emplace_back(*clients[i]);
      lib->clients.push_back(clients[i].get());
    }
    locks.push_back(std::make_unique<redlock>(refs, run.prefix + lib->name));
    auto* l = locks.back().get();
    lib->acquire = [l] { return l->try_lock() ? steady::now() : steady::time_point{}; };
    lib->release = [l] { l->unlock(); };
    cases.push_back(std::move(lib));
    if (n == 3 && shared_clients.size() == 3) {
      auto one = std::make_unique<seq_case>();
      one->name = "R1-redlock-3-one-thread";
      one->n = n;
      std::vector<std::reference_wrapper<client>> srefs;
      for (auto& c : shared_clients) {
        srefs.emplace_back(*c);
        one->clients.push_back(c.get());
      }
      locks.push_back(std::make_unique<redlock>(srefs, run.prefix + one->name));
      auto* sl = locks.back().get();
      one->acquire = [sl] { return sl->try_lock() ? steady::now() : steady::time_point{}; };
      one->release = [sl] { sl->unlock(); };
      cases.push_back(std::move(one));
    }
  }
  // One slice of each case, forwards or backwards: no case always runs first or after the same one.
  auto turn = [&](double secs, bool record, bool backwards) {
    for (std::size_t k = 0; k < cases.size(); ++k) {
      auto& c = *cases[backwards ? cases.size() - 1 - k : k];
      if (!c.error.empty()) continue;
      try {
        run_slice(c, ss, secs, record);
      } catch (const std::exception& e) {
        c.error = e.what();
      }
    }
  };
  const int slices = 4;
  turn(run.warm_s, false, false);
  for (int s = 0; s < slices; ++s) turn(run.case_s / slices, true, s % 2 == 1);

  // The raw rows' majority latency: their p50 is the time to a majority, as the library's is.
  std::vector<row> out;
  double single_p50 = 0, single_p99 = 0;
  std::vector<double> raw_p50(6, 0);
  for (auto& c : cases) {
    row r;
    r.name = c->name;
    if (!c->error.empty()) {
      r.error = c->error;
      out.push_back(std::move(r));
      continue;
    }
    c->sum.fill(r, c->n, c->rt);
    r.p50_us = percentile(c->lat, 0.5);
    r.p99_us = percentile(c->lat, 0.99);
    r.num("release_p50_us", percentile(c->unlock_lat, 0.5));
    r.num("release_p99_us", percentile(c->unlock_lat, 0.99));
    if (!c->all_lat.empty()) {
      r.num("all_answered_p50_us", percentile(c->all_lat, 0.5));
      r.num("all_answered_p99_us", percentile(c->all_lat, 0.99));
      raw_p50[c->n] = r.p50_us;
    } else if (c->name == "R1-single") {
      single_p50 = r.p50_us;
      single_p99 = r.p99_us;
      r.num("p50_vs_raw", r.p50_us / raw_p50[1]);
      r.note = "try_lock p50/p99; unlock p50 " + num("%.0f", r.get("release_p50_us")) + " us; raw SET NX PX p50 " +
               num("%.0f", raw_p50[1]) + " us";
    } else {
      r.num("p50_vs_single", single_p50 > 0 ? r.p50_us / single_p50 : 0);
      r.num("p99_vs_single", single_p99 > 0 ? r.p99_us / single_p99 : 0);
      r.num("p50_vs_raw", r.p50_us / raw_p50[c->n]);
      r.num("raw_p50_vs_raw_single", raw_p50[c->n] / raw_p50[1]);
      const bool met = single_p50 > 0 && r.p50_us <= 1.3 * single_p50;
      r.note = "p50 " + num("%.2f", r.get("p50_vs_single")) + "x R1-single" +
               (c->n == 1 ? std::string(" (one node: the handle's own cost)")
                          : std::string(" (target <= 1.3: ") + (met ? "met" : "missed") + ")") +
               ", p99 " + num("%.2f", r.get("p99_vs_single")) + "x; " +
               num("%.2f", r.get("p50_vs_raw")) + "x the raw " + std::to_string(c->n) + "-server p50 (" +
               num("%.0f", raw_p50[c->n]) + " us, " + num("%.2f", r.get("raw_p50_vs_raw_single")) + "x raw 1)";
    }
    out.push_back(std::move(r));
  }
  return out;
}

// ---- B2-async-redlock-3 and its ceiling -------------------------------------------------------

// The N servers' pair ceiling at one depth: every server gets, on a raw connection of its own (one
// thread each), a phase of 4,096 `SET NX PX` and then a phase of their 4,096 compare-and-deletes,
// pipelined `depth` per write with two writes out. A phase lasts until every server finished it.
row ceiling_pairs_n(const redlock_run& run, servers& ss, std::size_t n, int depth) {
  std::vector<std::string> acq(n), rel(n);
  std::vector<std::vector<std::size_t>> acq_off(n, {0}), rel_off(n, {0});
  for (std::size_t s = 0; s < n; ++s)
    for (std::size_t i = 0; i < phase_keys; ++i) {
      std::string key = run.prefix + "ceil-redlock:" + std::to_string(depth) + ":" + std::to_string(i);
      char value[40];
      std::snprintf(value, sizeof value, "%016llx%016llx", static_cast<unsigned long long>(i) * 0x9e3779b97f4a7c15ULL,
                    static_cast<unsigned long long>(i) + 1);
      encode(acq[s], {"SET", key, value, "NX", "PX", ttl_ms});
      acq_off[s].push_back(acq[s].size());
      encode(rel[s], {"EVALSHA", lua::redlock_release.sha1, "1", key, value});
      rel_off[s].push_back(rel[s].size());
    }
  const auto d = static_cast<std::size_t>(depth);
  std::barrier sync(static_cast<std::ptrdiff_t>(n + 1));
  std::atomic<bool> stop{false}, record{false};
  std::vector<std::vector<float>> lat_a(n), lat_r(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> ts;
  for (std::size_t s = 0; s < n; ++s)
    ts.emplace_back([&, s] {
      std::unique_ptr<raw_conn> rc;
      try {
        rc = std::make_unique<raw_conn>(ss.cfgs[s]);
      } catch (const std::exception& e) {
        errors[s] = e.what();
      }
      for (;;) {
        sync.arrive_and_wait();
        if (stop) return;
        bool rec = record;
        if (rc && errors[s].empty()) try {
            auto ta = pump(*rc, acq[s], acq_off[s], 2 * d, d, rec ? &lat_a[s] : nullptr);
            if (ta.status != phase_keys) errors[s] = "SET NX PX refused: " + ta.first_error;
          } catch (const std::exception& e) {
            errors[s] = e.what();
          }
        sync.arrive_and_wait();
        if (rc && errors[s].empty()) try {
            auto tr = pump(*rc, rel[s], rel_off[s], 2 * d, d, rec ? &lat_r[s] : nullptr);
            if (tr.integer != phase_keys || tr.int_sum != static_cast<long long>(phase_keys))
              errors[s] = "compare-and-delete did not free: " + tr.first_error;
          } catch (const std::exception& e) {
            errors[s] = e.what();
          }
        sync.arrive_and_wait();
      }
    });
  double t_acq = 0, t_rel = 0;
  auto phases = [&](double secs, bool rec) {
    record = rec;
    double pairs = 0;
    auto end = steady::now() + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(secs));
    while (steady::now() < end) {
      sync.arrive_and_wait();
      auto t0 = steady::now();
      sync.arrive_and_wait();
      auto t1 = steady::now();
      sync.arrive_and_wait();
      auto t2 = steady::now();
      if (rec) {
        t_acq += seconds(t0, t1);
        t_rel += seconds(t1, t2);
      }
      pairs += static_cast<double>(phase_keys);
    }
    return pairs;
  };
  phases(run.warm_s, false);
  auto a = sample(ss, n, {});
  double pairs = phases(run.ceiling_s, true);
  auto b = sample(ss, n, {});
  stop = true;
  sync.arrive_and_wait();
  for (auto& t : ts) t.join();
  for (auto& e : errors)
    if (!e.empty()) throw std::runtime_error("RedLock ceiling: " + e);
  std::vector<float> all_a, all_r;
  for (std::size_t s = 0; s < n; ++s) {
    all_a.insert(all_a.end(), lat_a[s].begin(), lat_a[s].end());
    all_r.insert(all_r.end(), lat_r[s].begin(), lat_r[s].end());
  }
  row r;
  r.name = "ceiling-redlock" + std::to_string(n) + "-pair-d" + std::to_string(depth);
  totals t;
  t.add(a, b, pairs);  // CPU per pair: over the whole stretch
  t.fill(r, n, 2.0 * static_cast<double>(n));
  fill_pair_rates(r, depth, pairs, t_acq, t_rel, all_a, all_r);
  return r;
}

row async_redlock(const redlock_run& run, servers& ss, const std::string& name, std::size_t n, int handles,
                  double ceiling) {
  std::vector<std::unique_ptr<client>> clients;
  std::vector<std::reference_wrapper<client>> refs;
  std::vector<client*> counted;
  for (std::size_t i = 0; i < n; ++i) {
    clients.push_back(std::make_unique<client>(ss.cfgs[i]));
    clients.back()->ping();
    refs.emplace_back(*clients.back());
    counted.push_back(clients.back().get());
  }
  std::vector<std::unique_ptr<redlock>> locks;
  for (int i = 0; i < handles; ++i) locks.push_back(std::make_unique<redlock>(refs, run.prefix + name + ":" + std::to_string(i)));
  // The handlers run on the first client's I/O thread (the handles' home): no lock needed below.
  std::unique_ptr<async_chains> chains;
  double refused = 0;
  auto step = [&](std::size_t i) {
    locks[i]->async_try_lock(0ms, [&, i](std::error_code ec, bool ok) {
      if (ec) return chains->failed(i, "async_try_lock: " + ec.message());
      if (!ok) {  // a node too slow (node_timeout) or a free key refused: counted, not an error
        refused += 1;
        return chains->retry(i);
      }
      locks[i]->async_unlock([&, i](std::error_code ec2) {
        if (ec2) return chains->failed(i, "async_unlock: " + ec2.message());
        chains->pair_done(i);
      });
    });
  };
  chains = std::make_unique<async_chains>(static_cast<std::size_t>(handles), step);
  chains->run(run.warm_s, false, nullptr, nullptr);
  meter a, b;
  refused = 0;
  auto [pairs, lat] = chains->run(run.case_s, true, [&] { a = sample(ss, n, counted); },
                                  [&] { b = sample(ss, n, counted); });
  totals sum;
  sum.add(a, b, pairs);
  row r;
  r.name = name;
  sum.fill(r, n);
  r.p50_us = percentile(lat, 0.5);
  r.p99_us = percentile(lat, 0.99);
  r.num("handles", handles);
  r.num("refused", refused);
  if (ceiling > 0) {
    r.has_ceiling = true;
    r.ceiling = ceiling;
    r.ratio = r.ops_per_s / ceiling;
  }
  r.note = "vs the " + std::to_string(n) + " servers' pair ceiling (SET NX PX + compare-and-delete on each); " +
           num("%.1f", r.get("commands_per_write")) + " cmds/write; " + num("%.0f", refused) + " refused";
  return r;
}

}  // namespace

const std::vector<std::string>& redlock_case_names() {
  static const std::vector<std::string> names{"R1-single", "R1-redlock-1", "R1-redlock-3",
                                              "R1-redlock-3-one-thread", "R1-redlock-5", "B2-async-redlock-3"};
  return names;
}

void run_redlock_cases(const redlock_run& run) {
  std::vector<std::string> wanted;
  for (auto& n : redlock_case_names())
    if (run.wanted(n)) wanted.push_back(n);
  if (wanted.empty()) return;
  auto fail_all = [&](const std::string& why) {
    for (auto& n : wanted) {
      row r;
      r.name = n;
      r.error = why;
      run.emit(std::move(r));
    }
  };
  if (!local::redis_server::available()) return fail_all("the RedLock cases need redis-server on PATH");
  const bool r1 = run.wanted("R1-single") || run.wanted("R1-redlock-1") || run.wanted("R1-redlock-3") ||
                  run.wanted("R1-redlock-3-one-thread") || run.wanted("R1-redlock-5");
  const bool five = run.wanted("R1-redlock-5");
  std::unique_ptr<servers> ss;
  try {
    ss = std::make_unique<servers>(run.cfg, five ? 5 : 3);
  } catch (const std::exception& e) {
    return fail_all(std::string("starting the RedLock servers: ") + e.what());
  }
  if (!run.json) {
    std::cout << "\nRedLock: " << ss->procs.size() << " private redis-servers (ports";
    for (auto& p : ss->procs) std::cout << " " << p->port();
    std::cout << ")" << std::endl;
  }
  if (r1) {
    std::vector<std::size_t> sizes{1, 3};
    if (five) sizes.push_back(5);
    std::vector<row> rows;
    try {
      rows = r1_cases(run, *ss, sizes);
    } catch (const std::exception& e) {
      for (auto& n : {"R1-single", "R1-redlock-1", "R1-redlock-3", "R1-redlock-3-one-thread", "R1-redlock-5"}) {
        row r;
        r.name = n;
        r.error = e.what();
        rows.push_back(std::move(r));
      }
    }
    if (!run.json)
      for (auto& r : rows)
        if (r.name.rfind("ceiling", 0) == 0 && r.error.empty())
          std::cout << "  raw blocking client, SET NX PX to " << r.get("servers") << " server(s) at once: p50 "
                    << num("%.1f", r.p50_us) << " us to a majority (" << num("%.1f", r.get("all_answered_p50_us"))
                    << " to all), p99 " << num("%.1f", r.p99_us) << " us" << std::endl;
    for (auto& r : rows)
      if (r.name.rfind("ceiling", 0) == 0 || run.wanted(r.name)) run.emit(std::move(r));
  }
  if (run.wanted("B2-async-redlock-3")) {
    double best = 0;
    std::string error;
    std::vector<row> ceil;
    try {
      for (int depth : {16, 64, 128, 256}) {
        ceil.push_back(ceiling_pairs_n(run, *ss, 3, depth));
        best = std::max(best, ceil.back().ops_per_s);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!run.json) {
      std::cout << "  3-server pair ceiling (SET NX PX + compare-and-delete on each, a raw connection per server):";
      for (auto& r : ceil) std::cout << " depth " << r.get("depth") << " " << num("%.0f", r.ops_per_s) << "/s;";
      std::cout << " best " << num("%.0f", best) << " pairs/s" << std::endl;
    }
    for (auto& r : ceil) run.emit(std::move(r));
    row r;
    try {
      if (!error.empty()) throw std::runtime_error(error);
      r = async_redlock(run, *ss, "B2-async-redlock-3", 3, 256, best);
    } catch (const std::exception& e) {
      r = row{};
      r.name = "B2-async-redlock-3";
      r.error = e.what();
    }
    run.emit(std::move(r));
  }
}

}  // namespace redlease::cli::bench
