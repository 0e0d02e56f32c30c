// SPDX-License-Identifier: MIT
// redlease-bench (formerly `redlease bench`): lock throughput, latency and cost, each against what
// the Redis server itself can do on one connection (the ceiling, measured first in the same run and
// process). Without --redis it runs against a private redis-server it starts itself. See
// BENCHMARKS.md for the method. Not installed: it sends the library's embedded scripts itself for
// the ceiling (src/, generated/).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <type_traits>
#include <vector>

#include "bench_support.hpp"
#include "cluster_bench.hpp"
#include "commands.hpp"
#include "local_server.hpp"
#include "redlease/redlease.hpp"
#include "redlease/version.hpp"
#include "redlease_lua.hpp"
#include "redlock_bench.hpp"
#include "scan_bench.hpp"
#include "semaphore_bench.hpp"
#include "watchdog_support.hpp"

namespace redlease::cli {
namespace {

using namespace std::chrono_literals;
using bench::steady;
namespace lua = redlease::detail::lua;

// ---- options and results -----------------------------------------------------------------------

struct options {
  std::string url;
  bool json = false;
  bool quick = false;
  bool check = false;
  std::string only;      // comma-separated case names (or prefixes) to run; empty: all
  double seconds = 0;    // per-case measuring time; 0: the mode's default
  bool no_ceiling = false;  // profiling aid (hidden): skip the ceiling; no ratios then
  std::string sync_wait = "latency";  // config::sync_wait for the sync cases: latency | cpu
  bool no_sync_lane = false;          // config::sync_lane = false
  bool cluster = false;               // also the Redis Cluster cases (cluster_bench.cpp)
};

using bench::row;  // bench_support.hpp: one case's results (redlock_bench.cpp makes them too)

std::string jnum(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  if (std::fabs(v) >= 1e15) {
    std::snprintf(buf, sizeof buf, "%.6e", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.4f", v);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string to_json(const row& r) {
  std::string o = "{\"case\":\"";
  json_escape_to(o, r.name);
  o += "\",\"ops_per_s\":" + jnum(r.ops_per_s) + ",\"p50_us\":" + jnum(r.p50_us) + ",\"p99_us\":" + jnum(r.p99_us) +
       ",\"round_trips_per_op\":" + jnum(r.rt_per_op) + ",\"redis_cpu_us_per_op\":" + jnum(r.redis_us_per_op) +
       ",\"client_cpu_us_per_op\":" + jnum(r.client_us_per_op);
  if (r.has_ceiling) o += ",\"ceiling_ops_per_s\":" + jnum(r.ceiling) + ",\"ratio\":" + jnum(r.ratio);
  for (auto& [k, v] : r.nums) o += ",\"" + k + "\":" + jnum(v);
  for (auto& [k, v] : r.strs) {
    o += ",\"" + k + "\":\"";
    json_escape_to(o, v);
    o += "\"";
  }
  if (!r.error.empty()) {
    o += ",\"error\":\"";
    json_escape_to(o, r.error);
    o += "\"";
  }
  o += "}";
  return o;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// 1234567 -> "1,234,567"
std::string grouped(double v) {
  if (!std::isfinite(v)) return "-";
  auto n = static_cast<long long>(std::llround(v));
  std::string d = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i != 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string pad(std::string s, std::size_t w, bool left = false) {
  if (s.size() >= w) return s;
  return left ? s + std::string(w - s.size(), ' ') : std::string(w - s.size(), ' ') + s;
}

// ---- the run's shared state --------------------------------------------------------------------

struct bench_ctx {
  options opt;
  config cfg;                              // for the library's clients
  std::unique_ptr<bench::raw_conn> meter;  // INFO, EXISTS, cleanup: never used by a case itself
  std::string prefix;                      // every key of this run starts with it
  std::string fake_uuid;                   // 36 characters, like a client id
  double case_s = 3, warm_s = 0.3, ceiling_s = 1;
  // from the ceiling
  double floor_rt_per_s = 0, floor_rtt_us = 0;
  double spin_floor_rt_per_s = 0;  // the same with a busy-polling client
  double pair_ceiling = 0, mutex_pair_ceiling = 0;
  double pair_ceiling_d16 = 0, mutex_pair_ceiling_d16 = 0;  // 16 per write (16 to 32 unanswered)
  // 8 per write (8 to 16 unanswered): the most that 16 blocking callers can have out
  double pair_ceiling_d8 = 0, mutex_pair_ceiling_d8 = 0;
  std::vector<row> rows;
  bool table_header = false;

  bool wanted(std::string_view name) const {
    if (opt.only.empty()) return true;
    std::stringstream ss(opt.only);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty() && name.substr(0, item.size()) == item) return true;
    return false;
  }
};

struct snap {
  steady::time_point t;
  double cpu = 0;
  double redis = 0;
  long long csw = 0;
  client_stats st;
};

snap take(bench_ctx& x, const client* c) {
  snap s;
  s.redis = bench::redis_cpu_seconds(*x.meter);
  if (c) s.st = c->stats();
  s.cpu = bench::process_cpu_seconds();
  s.csw = bench::process_context_switches();
  s.t = steady::now();
  return s;
}

double secs_between(steady::time_point a, steady::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// ops counted over [a, b]: throughput, round trips (commands on both connections), CPU per op.
void fill_common(row& r, const snap& a, const snap& b, double ops) {
  double secs = secs_between(a.t, b.t);
  double lane = static_cast<double>(b.st.lane_requests - a.st.lane_requests);
  double cmds = static_cast<double>(b.st.commands - a.st.commands);
  double pubsub = static_cast<double>(b.st.pubsub_commands - a.st.pubsub_commands);
  double writes = static_cast<double>(b.st.writes - a.st.writes);
  r.ops_per_s = ops / secs;
  r.rt_per_op = ops > 0 ? (cmds + pubsub) / ops : 0;
  r.redis_us_per_op = ops > 0 ? (b.redis - a.redis) * 1e6 / ops : 0;
  r.client_us_per_op = ops > 0 ? (b.cpu - a.cpu) * 1e6 / ops : 0;
  r.num("ops", ops);
  r.num("seconds", secs);
  r.num("cmd_per_op", ops > 0 ? cmds / ops : 0);
  r.num("pubsub_cmd_per_op", ops > 0 ? pubsub / ops : 0);
  r.num("commands_per_write", writes > 0 ? cmds / writes : 0);
  r.num("direct_write_share", writes > 0 ? static_cast<double>(b.st.direct_writes - a.st.direct_writes) / writes : 0);
  r.num("lane_share", cmds > 0 ? lane / cmds : 0);
  r.num("redis_cpu_pct", 100 * (b.redis - a.redis) / secs);
  r.num("client_cpu_pct", 100 * (b.cpu - a.cpu) / secs);
  r.num("context_switches_per_op", ops > 0 ? static_cast<double>(b.csw - a.csw) / ops : 0);
}

void fill_latency(row& r, std::vector<float>& us) {
  r.p50_us = bench::percentile(us, 0.5);
  r.p99_us = bench::percentile(us, 0.99);
}

// ---- output ------------------------------------------------------------------------------------

void print_table_header() {
  std::cout << "\n"
            << pad("case", 26, true) << pad("ops/s", 11) << pad("p50 us", 9) << pad("p99 us", 9) << pad("RT/op", 7)
            << pad("redis us/op", 12) << pad("client us/op", 13) << pad("ceiling/s", 11) << pad("ratio", 7)
            << "  notes\n";
}

void emit(bench_ctx& x, row r) {
  if (x.opt.json) {
    std::cout << to_json(r) << std::endl;
  } else if (r.name.rfind("ceiling", 0) == 0) {
    // the ceiling section is printed by measure_ceiling
  } else {
    if (!x.table_header) {
      print_table_header();
      x.table_header = true;
    }
    if (!r.error.empty()) {
      std::cout << pad(r.name, 26, true) << "  ERROR: " << r.error << std::endl;
    } else {
      std::cout << pad(r.name, 26, true) << pad(grouped(r.ops_per_s), 11) << pad(fmt("%.0f", r.p50_us), 9)
                << pad(fmt("%.0f", r.p99_us), 9) << pad(fmt(r.rt_per_op < 0.1 ? "%.4f" : "%.2f", r.rt_per_op), 7)
                << pad(fmt("%.1f", r.redis_us_per_op), 12) << pad(fmt("%.1f", r.client_us_per_op), 13)
                << pad(r.has_ceiling ? grouped(r.ceiling) : "-", 11)
                << pad(r.has_ceiling ? fmt("%.2f", r.ratio) : "-", 7) << "  " << r.note << std::endl;
    }
  }
  x.rows.push_back(std::move(r));
}

// ---- the ceiling: raw pipelined commands, one connection, no lock logic ------------------------

// Sequential PING round trips.
row ceiling_ping_seq(bench_ctx& x, bench::raw_conn& rc) {
  std::string ping;
  bench::encode(ping, {"PING"});
  std::vector<float> lat;
  lat.reserve(200000);
  auto run = [&](double secs, bool record) {
    auto end = steady::now() + std::chrono::duration<double>(secs);
    long long n = 0;
    for (;;) {
      auto t0 = steady::now();
      if (t0 >= end) break;
      rc.send(ping);
      rc.read(1);
      if (record) lat.push_back(std::chrono::duration<float, std::micro>(steady::now() - t0).count());
      ++n;
    }
    return n;
  };
  run(x.warm_s, false);
  auto a = take(x, nullptr);
  auto n = run(x.ceiling_s, true);
  auto b = take(x, nullptr);
  row r;
  r.name = "ceiling-ping-seq";
  fill_common(r, a, b, static_cast<double>(n));
  r.rt_per_op = 1;
  fill_latency(r, lat);
  return r;
}

using bench::stream;

constexpr std::size_t ceiling_keys = 4096;  // commands per phase of a ceiling run

// Depth N: the commands go out N per write, and two writes are in flight (the next N are written as
// soon as the previous N are all answered), so the server always has a full batch waiting while it
// works on another: between N and 2N commands unanswered, never an idle round trip.
// (Callers copy it into plain variables: their lambdas capture them, which clang before 16 cannot
// do with a structured binding.)
std::pair<std::size_t, std::size_t> window_of(int depth) {
  auto d = static_cast<std::size_t>(depth);
  return {2 * d, d};
}

// PINGs, pipelined `depth` deep (see window_of), one connection.
row ceiling_ping_depth(bench_ctx& x, bench::raw_conn& rc, int depth) {
  stream s;
  for (std::size_t i = 0; i < ceiling_keys; ++i) s.add({"PING"});
  std::vector<float> lat;
  const std::size_t W = window_of(depth).first, C = window_of(depth).second;  // captured below
  auto run = [&](double secs, bool record) {
    auto end = steady::now() + std::chrono::duration<double>(secs);
    long long n = 0;
    while (steady::now() < end) {
      auto t = bench::pump(rc, s.payload, s.offsets, W, C, record ? &lat : nullptr);
      if (t.status != s.size()) throw std::runtime_error("ceiling: PING did not answer PONG");
      n += static_cast<long long>(s.size());
    }
    return n;
  };
  run(x.warm_s, false);
  auto a = take(x, nullptr);
  auto n = run(x.ceiling_s, true);
  auto b = take(x, nullptr);
  row r;
  r.name = "ceiling-ping-d" + std::to_string(depth);
  fill_common(r, a, b, static_cast<double>(n));
  r.rt_per_op = 1;
  fill_latency(r, lat);
  r.num("depth", depth);
  return r;
}

struct pair_rows {
  row acquire, release, pair;
};

// The exact scripts redlease sends (same arguments, same sizes), pipelined `depth` deep (see
// window_of), on 4,096 distinct keys: a phase of 4,096 acquisitions (every one succeeds: the keys are free),
// then a phase of the 4,096 releases (every one frees its key), and again. Each phase is timed from
// its first write to its last reply (the window drains between phases: one round trip per 4,096
// commands). Acquire rate = acquisitions / time in acquire phases, release rate likewise, pair rate
// = pairs / (both times) = 1 / (1/acquire + 1/release).
pair_rows ceiling_pairs(bench_ctx& x, bench::raw_conn& rc, int depth, bool mutex, bool fenced = false) {
  stream acq, rel;
  for (std::size_t i = 0; i < ceiling_keys; ++i) {
    std::string key = x.prefix + (mutex ? "ceil-mutex:" : "ceil:") + std::to_string(depth) + ":" + std::to_string(i);
    bench::add_pair_requests(acq, rel, key, i, mutex, fenced, x.fake_uuid);
  }
  const std::size_t k = acq.size();
  const std::size_t W = window_of(depth).first, C = window_of(depth).second;  // captured below
  std::vector<float> lat_a, lat_r;
  double t_acq = 0, t_rel = 0;
  auto run = [&](double secs, bool record) {
    auto end = steady::now() + std::chrono::duration<double>(secs);
    long long n = 0;
    double ignored_a = 0, ignored_r = 0;
    while (steady::now() < end) {
      bench::pair_round(rc, acq, rel, W, C, fenced, record ? t_acq : ignored_a, record ? t_rel : ignored_r,
                        record ? &lat_a : nullptr, record ? &lat_r : nullptr);
      n += static_cast<long long>(k);
    }
    return n;
  };
  run(x.warm_s, false);
  auto a = take(x, nullptr);
  auto n = static_cast<double>(run(x.ceiling_s, true));
  auto b = take(x, nullptr);
  std::string base = std::string("ceiling-") + (mutex ? "mutex-" : "") + (fenced ? "fenced-" : "");
  std::string sfx = "-d" + std::to_string(depth);
  pair_rows out;
  out.pair.name = base + "pair" + sfx;
  fill_common(out.pair, a, b, n);  // CPU per pair: over the whole run
  out.pair.ops_per_s = n / (t_acq + t_rel);
  out.pair.rt_per_op = 2;
  // pair latency: a pair costs one acquire and one release, each waiting behind depth-1 others
  out.pair.p50_us = bench::percentile(lat_a, 0.5) + bench::percentile(lat_r, 0.5);
  out.pair.p99_us = bench::percentile(lat_a, 0.99) + bench::percentile(lat_r, 0.99);
  out.pair.num("depth", depth);
  out.acquire.name = base + "acquire" + sfx;
  out.acquire.ops_per_s = n / t_acq;
  out.acquire.rt_per_op = 1;
  fill_latency(out.acquire, lat_a);
  out.acquire.num("depth", depth);
  out.release.name = base + "release" + sfx;
  out.release.ops_per_s = n / t_rel;
  out.release.rt_per_op = 1;
  fill_latency(out.release, lat_r);
  out.release.num("depth", depth);
  return out;
}

void measure_ceiling(bench_ctx& x) {
  bench::raw_conn rc(x.cfg);
  // The library sends EVALSHA: load the scripts first, and check the hashes match.
  for (const auto* s : {&lua::acquire, &lua::release, &lua::mutex_acquire, &lua::mutex_release, &lua::renew,
                        &lua::fenced_acquire, &lua::mutex_fenced_acquire}) {
    auto r = rc.command({"SCRIPT", "LOAD", s->body});
    if (r.str != s->sha1) throw std::runtime_error("SCRIPT LOAD " + std::string(s->name) + ": unexpected " + r.str);
  }
  auto seq = ceiling_ping_seq(x, rc);
  x.floor_rt_per_s = seq.ops_per_s;
  x.floor_rtt_us = 1e6 / seq.ops_per_s;
  auto p16 = ceiling_ping_depth(x, rc, 16);
  auto p64 = ceiling_ping_depth(x, rc, 64);
  auto p256 = ceiling_ping_depth(x, rc, 256);
  // The same with a busy-polling client (no sleep in recv): on a VM, waking a sleeping vCPU can
  // cost more than the round trip itself; the ceiling is the best of both.
  rc.set_spin(true);
  auto seq_spin = ceiling_ping_seq(x, rc);
  seq_spin.name += "-spin";
  rc.set_spin(false);
  // Depth 8 keeps at most 16 unanswered, as 16 blocking callers do (B2-sync's second ratio).
  auto r8 = ceiling_pairs(x, rc, 8, false);
  auto m8 = ceiling_pairs(x, rc, 8, true);
  auto r16 = ceiling_pairs(x, rc, 16, false);
  auto r64 = ceiling_pairs(x, rc, 64, false);
  auto r256 = ceiling_pairs(x, rc, 256, false);
  auto m16 = ceiling_pairs(x, rc, 16, true);
  auto m64 = ceiling_pairs(x, rc, 64, true);
  auto m256 = ceiling_pairs(x, rc, 256, true);
  rc.set_spin(true);
  auto r256s = ceiling_pairs(x, rc, 256, false);
  auto m256s = ceiling_pairs(x, rc, 256, true);
  rc.set_spin(false);
  for (auto* p : {&r256s, &m256s})
    for (auto* r : {&p->acquire, &p->release, &p->pair}) r->name += "-spin";
  // Depths 8 and 16 are B2-sync's yardsticks, and one pass of a blocking client swings with the
  // VM's wake-up latency (the depth-16 pair ceiling gave 43k to 74k pairs/s in six runs of one
  // sitting, while B2-sync moved 27k to 35k): a second pass, later, and the better of the two.
  auto better = [](pair_rows& kept, pair_rows again) {
    if (again.pair.ops_per_s > kept.pair.ops_per_s) kept = std::move(again);
  };
  better(r8, ceiling_pairs(x, rc, 8, false));
  better(m8, ceiling_pairs(x, rc, 8, true));
  better(r16, ceiling_pairs(x, rc, 16, false));
  better(m16, ceiling_pairs(x, rc, 16, true));
  x.spin_floor_rt_per_s = seq_spin.ops_per_s;
  x.pair_ceiling_d16 = r16.pair.ops_per_s;
  x.mutex_pair_ceiling_d16 = m16.pair.ops_per_s;
  x.pair_ceiling_d8 = r8.pair.ops_per_s;
  x.mutex_pair_ceiling_d8 = m8.pair.ops_per_s;
  x.pair_ceiling = std::max({r16.pair.ops_per_s, r64.pair.ops_per_s, r256.pair.ops_per_s, r256s.pair.ops_per_s});
  x.mutex_pair_ceiling =
      std::max({m16.pair.ops_per_s, m64.pair.ops_per_s, m256.pair.ops_per_s, m256s.pair.ops_per_s});
  if (!x.opt.json) {
    std::cout << "\nCeiling: raw commands on one connection, no lock logic; depth N = N per write, 2 writes in flight\n"
                 "(requests/s, per-command latency p50)\n";
    std::cout << "  sequential PING round trip (floor): " << grouped(seq.ops_per_s) << " round trips/s, p50 "
              << fmt("%.1f", seq.p50_us) << " us, p99 " << fmt("%.1f", seq.p99_us) << " us\n";
    auto line = [](const std::string& what, const row& a, const row& b, const row& c) {
      std::cout << "  " << pad(what, 20, true);
      for (auto* r : {&a, &b, &c})
        std::cout << pad(grouped(r->ops_per_s), 11) << "/s (" << pad(fmt("%.0f", r->p50_us), 4) << " us)";
      std::cout << "\n";
    };
    std::cout << "  " << pad("", 20) << pad("depth 16", 20) << pad("depth 64", 20) << pad("depth 256", 20) << "\n";
    line("PING", p16, p64, p256);
    line("acquire.lua", r16.acquire, r64.acquire, r256.acquire);
    line("release.lua", r16.release, r64.release, r256.release);
    line("reentrant pair", r16.pair, r64.pair, r256.pair);
    line("mutex_acquire.lua", m16.acquire, m64.acquire, m256.acquire);
    line("mutex_release.lua", m16.release, m64.release, m256.release);
    line("mutex pair", m16.pair, m64.pair, m256.pair);
    std::cout << "  busy-polling client: sequential PING " << grouped(seq_spin.ops_per_s) << " round trips/s (p50 "
              << fmt("%.1f", seq_spin.p50_us) << " us); depth 256 reentrant pair " << grouped(r256s.pair.ops_per_s)
              << "/s, mutex pair " << grouped(m256s.pair.ops_per_s) << "/s\n";
    std::cout << "  depth 8 (at most 16 unanswered, as with 16 blocking callers): reentrant pair "
              << grouped(r8.pair.ops_per_s) << "/s, mutex pair " << grouped(m8.pair.ops_per_s) << "/s\n";
    std::cout << "  pair ceilings used below (best depth): reentrant " << grouped(x.pair_ceiling) << "/s, mutex "
              << grouped(x.mutex_pair_ceiling) << "/s; sequential floor " << grouped(x.floor_rt_per_s / 2)
              << " pairs/s" << std::endl;
  }
  for (auto* r : {&seq, &p16, &p64, &p256, &r16.acquire, &r16.release, &r16.pair, &r64.acquire, &r64.release,
                  &r64.pair, &r256.acquire, &r256.release, &r256.pair, &m16.acquire, &m16.release, &m16.pair,
                  &m64.acquire, &m64.release, &m64.pair, &m256.acquire, &m256.release, &m256.pair, &seq_spin,
                  &r256s.acquire, &r256s.release, &r256s.pair, &m256s.acquire, &m256s.release, &m256s.pair,
                  &r8.pair, &m8.pair})
    emit(x, std::move(*r));
}

// ---- B1, B2-sync: threads calling lock()/unlock() ----------------------------------------------

using bench::thread_results;
using bench::run_threads;

// Runs `body` on `threads` threads, a warm-up and then the measured run, and fills the row: rate,
// CPU and round trips (counted on `c`, when there is a client), latency of each op, thread count.
template <class Body>
void measure_threads(bench_ctx& x, row& r, int threads, Body body, const client* c) {
  run_threads(threads, x.warm_s, body, nullptr, nullptr);
  snap a, b;
  auto res = run_threads(threads, x.case_s, body, [&] { a = take(x, c); }, [&] { b = take(x, c); });
  std::vector<float> lat;
  double ops = 0;
  for (auto& t : res) {
    ops += static_cast<double>(t.ops);
    lat.insert(lat.end(), t.lat.begin(), t.lat.end());
  }
  fill_common(r, a, b, ops);
  fill_latency(r, lat);
  r.num("threads", threads);
}

template <lock_kind K>
auto make_kind(client& c, const std::string& name) {
  if constexpr (K == lock_kind::mutex) return c.mutex(name);
  else if constexpr (K == lock_kind::read) return c.read_lock(name);
  else if constexpr (K == lock_kind::fair) return c.fair_lock(name);
  else return c.lock(name);
}

template <bool Mutex>
auto make_lock(client& c, const std::string& name) {
  return make_kind<Mutex ? lock_kind::mutex : lock_kind::reentrant>(c, name);
}

template <bool Mutex, lock_kind K = Mutex ? lock_kind::mutex : lock_kind::reentrant, bool Fenced = false>
row sync_pairs(bench_ctx& x, const std::string& name, int threads, bool one_key) {
  row r;
  r.name = name;
  client c{x.cfg};
  c.ping();
  auto body = [&](int t, std::atomic<bool>& stop, thread_results& out) {
    auto l = make_kind<K>(c, x.prefix + name + ":" + (one_key ? std::string("k") : std::to_string(t)));
    out.lat.reserve(1 << 18);
    while (!stop.load(std::memory_order_relaxed)) {
      auto t0 = steady::now();
      if constexpr (Fenced) (void)l.lock_and_get_token();
      else l.lock();
      l.unlock();
      out.lat.push_back(std::chrono::duration<float, std::micro>(steady::now() - t0).count());
      ++out.ops;
    }
  };
  measure_threads(x, r, threads, body, &c);
  return r;
}

// ---- B2-sync-raw: what any blocking client can reach on this machine ----------------------------
// The same 16 threads as B2-sync, each with a connection of its own, sending the library's own
// scripts one pair at a time and sleeping in recv() for each reply: no library, no I/O thread, no
// hand-off between threads. It is the design of a blocking client that does its I/O on the calling
// thread (redis-plus-plus with a pool), with none of a client's own costs: a bound for B2-sync's
// ratio to the depth-16 ceiling, measured against the same ceilings in the same run.
// Thread t's acquire and release requests of a raw row: the library's own scripts and arguments,
// on a key of its own, with a 30 s lease.
std::pair<stream, stream> raw_pair_requests(const bench_ctx& x, const std::string& name, int t, bool mutex) {
  const std::string lease = "30000";
  std::string key = x.prefix + name + ":" + std::to_string(t);
  stream acq, rel;
  const auto l = describe(mutex ? lock_kind::mutex : lock_kind::reentrant, key);
  if (mutex) {
    std::string token = "0123456789abcdef0123456789abcd" + std::to_string(10 + t);
    acq.add({"EVALSHA", lua::mutex_acquire.sha1, "1", key, token, lease});
    rel.add({"EVALSHA", lua::mutex_release.sha1, "1", key, l.channel(), token});
  } else {
    std::string field = x.fake_uuid + ":" + std::to_string(t);
    std::string latch = l.latch_key(std::to_string(t) + "0123456789abcdef");
    acq.add({"EVALSHA", lua::acquire.sha1, "1", key, lease, field});
    rel.add({"EVALSHA", lua::release.sha1, "2", key, latch, l.channel(), "0", lease, field, "1", "0",
             "60000"});
  }
  return {std::move(acq), std::move(rel)};
}

row sync_raw_pairs(bench_ctx& x, const std::string& name, int threads, bool mutex) {
  row r;
  r.name = name;
  auto body = [&](int t, std::atomic<bool>& stop, thread_results& out) {
    bench::raw_conn rc(x.cfg);
    auto [acq, rel] = raw_pair_requests(x, name, t, mutex);
    out.lat.reserve(1 << 18);
    while (!stop.load(std::memory_order_relaxed)) {
      auto t0 = steady::now();
      rc.send(acq.payload);
      auto ta = rc.read(1);
      rc.send(rel.payload);
      auto tr = rc.read(1);
      if (ta.nil != 1 || tr.integer != 1 || tr.int_sum != 1)
        throw std::runtime_error(name + ": a pair did not acquire and free: " + ta.first_error + tr.first_error);
      out.lat.push_back(std::chrono::duration<float, std::micro>(steady::now() - t0).count());
      ++out.ops;
    }
  };
  measure_threads(x, r, threads, body, nullptr);
  r.rt_per_op = 2;  // no client to count them
  return r;
}

// ---- B2-sync-shared: what sharing one connection can reach here ---------------------------------
// The same 16 threads and scripts on bench::shared_conn: the library's blocking design with none of
// the library. With one connection its ratio_d16 bounds what the library's B2-sync rows can reach,
// as the raw rows bound a connection per thread; with two (threads alternating), each with its own
// reader thread, it shows what a second reply path would buy.
row sync_shared_pairs(bench_ctx& x, const std::string& name, int threads, bool mutex, int conns) {
  row r;
  r.name = name;
  std::vector<std::unique_ptr<bench::shared_conn>> scs;
  for (int i = 0; i < conns; ++i) scs.push_back(std::make_unique<bench::shared_conn>(x.cfg));
  std::atomic<long long> pairs{0};
  auto body = [&](int t, std::atomic<bool>& stop, thread_results& out) {
    auto& sc = *scs[static_cast<std::size_t>(t % conns)];
    auto [acq, rel] = raw_pair_requests(x, name, t, mutex);
    out.lat.reserve(1 << 18);
    while (!stop.load(std::memory_order_relaxed)) {
      auto t0 = steady::now();
      sc.call(acq.payload);
      sc.call(rel.payload);
      out.lat.push_back(std::chrono::duration<float, std::micro>(steady::now() - t0).count());
      ++out.ops;
      pairs.fetch_add(1, std::memory_order_relaxed);
    }
  };
  measure_threads(x, r, threads, body, nullptr);
  std::size_t nil = 0, ints = 0, errors = 0;
  long long sum = 0;
  std::string first_error;
  for (auto& sc : scs) {
    auto got = sc->close();
    nil += got.nil;
    ints += got.integer;
    sum += got.int_sum;
    errors += got.error;
    if (first_error.empty()) first_error = got.first_error;
  }
  const auto n = static_cast<std::size_t>(pairs.load());
  if (errors != 0 || nil != n || ints != n || sum != pairs.load())
    throw std::runtime_error(name + ": not every pair acquired and freed: " + first_error);
  r.rt_per_op = 2;  // no client to count them
  r.num("connections", conns);
  return r;
}

// ---- B2-async: many owners on the client's own I/O thread --------------------------------------

template <bool Mutex, bool Fenced = false>
row async_pairs(bench_ctx& x, const std::string& name, int owners) {
  row r;
  r.name = name;
  client c{x.cfg};
  c.ping();
  using lock_t = decltype(make_lock<Mutex>(c, ""));
  std::vector<lock_t> locks;
  std::vector<owner_id> ids;
  for (int i = 0; i < owners; ++i) {
    locks.push_back(make_lock<Mutex>(c, x.prefix + name + ":" + std::to_string(i)));
    ids.push_back(c.new_owner());
  }
  // Everything below but the launch runs on the client's I/O thread (the handlers' executor).
  std::unique_ptr<bench::async_chains> chains;
  auto step = [&](std::size_t i) {
    auto locked = [&, i](std::error_code ec) {
      if (ec) return chains->failed(i, "async_lock: " + ec.message());
      locks[i].async_unlock(ids[i], [&, i](std::error_code ec2) {
        if (ec2) return chains->failed(i, "async_unlock: " + ec2.message());
        chains->pair_done(i);
      });
    };
    if constexpr (Fenced) {
      locks[i].async_lock_and_get_token(ids[i], [locked](std::error_code ec, std::uint64_t) { locked(ec); });
    } else {
      locks[i].async_lock(ids[i], locked);
    }
  };
  chains = std::make_unique<bench::async_chains>(static_cast<std::size_t>(owners), step);
  chains->run(x.warm_s, false, nullptr, nullptr);
  snap a, b;
  auto [pairs, lat] = chains->run(x.case_s, true, [&] { a = take(x, &c); }, [&] { b = take(x, &c); });
  fill_common(r, a, b, pairs);
  fill_latency(r, lat);
  r.num("owners", owners);
  return r;
}

// ---- B3, B3t: contention on one key ------------------------------------------------------------

row contended(bench_ctx& x, const std::string& name, int owners, std::chrono::microseconds hold,
              std::chrono::milliseconds pause, bool fair = false) {
  row r;
  r.name = name;
  client c{x.cfg};
  c.ping();
  const std::string key = x.prefix + name;
  struct per_owner {
    long long acquisitions = 0;
    long long to_other = 0;  // acquisitions whose previous holder was another owner
    long long overtakes = 0;  // grants while an owner that came more than 1 ms earlier still waited
    double hold_s = 0;
    std::vector<float> gaps;
  };
  std::atomic<long long> last_release_ns{0};
  std::atomic<int> last_owner{-1};
  std::vector<per_owner> po;
  // When each owner started waiting (steady ns; 0: not waiting), to count FIFO violations.
  std::vector<std::atomic<long long>> waiting_since(static_cast<std::size_t>(owners));
  std::mutex err_mu;
  std::string error;
  auto run = [&](double secs, snap* a, snap* b) {
    po.assign(static_cast<std::size_t>(owners), {});
    last_release_ns = 0;
    last_owner = -1;
    std::atomic<bool> stop{false};
    std::latch ready(owners + 1);
    std::vector<std::thread> ts;
    for (int t = 0; t < owners; ++t) {
      ts.emplace_back([&, t] {
        auto& me = po[static_cast<std::size_t>(t)];
        me.gaps.reserve(1 << 16);
        auto l = fair ? detail::lock_handle(c.fair_lock(key)) : detail::lock_handle(c.lock(key));
        ready.arrive_and_wait();
        try {
          auto& my_wait = waiting_since[static_cast<std::size_t>(t)];
          while (!stop.load(std::memory_order_relaxed)) {
            long long since = steady::now().time_since_epoch().count();
            my_wait.store(since);
            l.lock();
            auto got = steady::now();
            my_wait.store(0);
            // Overtaking: another owner had started waiting more than 1 ms (a dozen round trips)
            // before this one and still waits. Closer arrivals may reach Redis in either order.
            for (auto& w : waiting_since) {
              long long other_since = w.load();
              if (other_since != 0 && other_since + 1'000'000 < since) {
                ++me.overtakes;
                break;
              }
            }
            long long rel = last_release_ns.load();
            int prev = last_owner.load();
            if (rel != 0) me.gaps.push_back(static_cast<float>((got.time_since_epoch().count() - rel) / 1000.0));
            if (prev >= 0 && prev != t) ++me.to_other;
            ++me.acquisitions;
            std::this_thread::sleep_for(hold);
            auto released = steady::now();
            me.hold_s += secs_between(got, released);
            last_owner.store(t);
            last_release_ns.store(released.time_since_epoch().count());
            l.unlock();
            if (pause.count() > 0) std::this_thread::sleep_for(pause);
          }
        } catch (const std::exception& e) {
          std::lock_guard g(err_mu);
          if (error.empty()) error = e.what();
          stop = true;
        }
      });
    }
    if (a) *a = take(x, &c);
    ready.arrive_and_wait();
    std::this_thread::sleep_for(std::chrono::duration<double>(secs));
    stop = true;
    for (auto& t : ts) t.join();
    if (b) *b = take(x, &c);
    if (!error.empty()) throw std::runtime_error(error);
  };
  run(x.warm_s, nullptr, nullptr);
  snap a, b;
  run(x.case_s, &a, &b);
  double acq = 0, other = 0, hold_s = 0;
  long long mn = -1, mx = 0, overtakes = 0;
  std::vector<float> gaps;
  for (auto& p : po) {
    acq += static_cast<double>(p.acquisitions);
    other += static_cast<double>(p.to_other);
    overtakes += p.overtakes;
    hold_s += p.hold_s;
    mn = mn < 0 ? p.acquisitions : std::min(mn, p.acquisitions);
    mx = std::max(mx, p.acquisitions);
    gaps.insert(gaps.end(), p.gaps.begin(), p.gaps.end());
  }
  fill_common(r, a, b, acq);
  r.num("gap_p90_us", bench::percentile(gaps, 0.9));
  r.num("gap_max_us", gaps.empty() ? 0.0 : *std::max_element(gaps.begin(), gaps.end()));
  fill_latency(r, gaps);  // p50/p99 of the hand-off gap: release call -> next acquire returns
  double hold_mean_us = acq > 0 ? hold_s * 1e6 / acq : 0;
  double handoffs = std::max(1.0, acq - 1);
  r.num("owners", owners);
  r.num("hold_us", hold_mean_us);
  r.num("pause_ms", static_cast<double>(pause.count()));
  r.num("gap_p50_rtt", r.p50_us / x.floor_rtt_us);
  r.num("gap_p99_rtt", r.p99_us / x.floor_rtt_us);
  if (x.spin_floor_rt_per_s > 0) r.num("gap_p50_rtt_spin_floor", r.p50_us * x.spin_floor_rt_per_s / 1e6);
  r.num("handoff_to_other_share", other / handoffs);
  r.num("acq_per_owner_min", static_cast<double>(mn));
  r.num("acq_per_owner_max", static_cast<double>(mx));
  r.num("fifo_violations", static_cast<double>(overtakes));
  r.note = "gap p50 " + fmt("%.1f", r.p50_us / x.floor_rtt_us) + " RT; to other " +
           fmt("%.0f%%", 100 * other / handoffs) + "; per owner " + std::to_string(mn) + ".." + std::to_string(mx) +
           "; hold " + fmt("%.0f", hold_mean_us) + " us; overtakes " + std::to_string(overtakes);
  if (pause.count() > 0) {
    // The best a hand-off can do: the release goes out (1/2 RT), the server publishes (1/2 RT), the
    // woken waiter's acquire makes one round trip: 2 sequential round trips per hand-off.
    r.has_ceiling = true;
    r.ceiling = 1e6 / (hold_mean_us + 2 * x.floor_rtt_us);
    r.ratio = r.ops_per_s / r.ceiling;
    r.num("bound_gap_us", 2 * x.floor_rtt_us);
  }
  return r;
}

// ---- B4: the watchdog at scale -----------------------------------------------------------------

row watchdog_scale(bench_ctx& x, const std::string& name, std::size_t n, double window_s, double idle_redis_pct) {
  row r;
  r.name = name;
  auto cfg = x.cfg;
  cfg.watchdog_timeout = bench::watchdog_lease;
  const double interval_s = bench::watchdog_interval_s;
  std::vector<std::string> keys(n);  // before the memory baseline: not the client's
  for (std::size_t i = 0; i < n; ++i) keys[i] = x.prefix + name + ":" + std::to_string(i);
  std::atomic<long long> lost{0};
  std::size_t heap0 = 0, rss0 = 0, heap1 = 0, rss1 = 0;
  std::vector<float> acq_lat;
  double acquire_s = 0;
  snap a, b;
  client_stats end_stats;
  long long min_ttl = -1;
  {
    client c{cfg};
    c.ping();
    { // warm the client's paths (and allocator) before the memory baseline
      auto l = c.lock(x.prefix + name + ":warm");
      l.lock();
      l.unlock();
    }
    heap0 = bench::heap_in_use();
    rss0 = bench::rss_bytes();
    acquire_s = bench::acquire_all(c, keys, lost, acq_lat);

    // Hold them: the watchdog alone talks to the server. Sample a few keys' TTL meanwhile.
    a = take(x, &c);
    auto end = a.t + std::chrono::duration<double>(window_s);
    // One PTTL pass over 64 spread keys every 200 ms; the minimum is the watchdog's safety margin.
    const auto sample = bench::spread_sample(keys, 64);
    while (steady::now() < end) {
      const auto t = bench::min_pttl(*x.meter, sample);
      if (t && (min_ttl < 0 || *t < min_ttl)) min_ttl = *t;
      std::this_thread::sleep_for(std::min<steady::duration>(200ms, std::chrono::duration_cast<steady::duration>(end - steady::now())));
    }
    b = take(x, &c);
    heap1 = bench::heap_in_use();
    rss1 = bench::rss_bytes();
    end_stats = c.stats();
  }  // the client closes: no more renewals

  // Every key still there? EXISTS over all of them, 1,000 keys per command, all in one write.
  auto alive = bench::keys_command(*x.meter, "EXISTS", keys, 1000).int_sum;
  // The server's own floor for this case, in the same run: one plain PEXPIRE per lock (no owner
  // check, no script), pipelined on one connection. Renewing every lock once per interval cannot
  // cost Redis less than this.
  const std::string lease_ms = std::to_string(bench::watchdog_lease.count());
  double floor_cpu_s = 0;
  for (int pass = 0; pass < 3; ++pass) {
    double c0 = bench::redis_cpu_seconds(*x.meter);
    bench::keys_command(*x.meter, "PEXPIRE", keys, 1, {lease_ms});
    double used = bench::redis_cpu_seconds(*x.meter) - c0;
    floor_cpu_s = pass == 0 ? used : std::min(floor_cpu_s, used);
  }
  // Clean up.
  keys.push_back(x.prefix + name + ":warm");
  bench::keys_command(*x.meter, "DEL", keys, 1000);
  keys.pop_back();

  double secs = secs_between(a.t, b.t);
  double renewed = static_cast<double>(b.st.renewed_locks - a.st.renewed_locks);
  fill_common(r, a, b, renewed);  // an op here is one lock renewal
  fill_latency(r, acq_lat);       // p50/p99: acquisition latency while taking them (1,000 in flight)
  double nd = static_cast<double>(n);
  const auto grew = [](std::size_t from, std::size_t to) { return static_cast<double>(to) - static_cast<double>(from); };
  bench::fill_held(r, {nd, static_cast<double>(alive), static_cast<double>(end_stats.watched_locks),
                       static_cast<double>(lost.load()), grew(heap0, heap1), grew(rss0, rss1),
                       static_cast<double>(min_ttl), acquire_s}, a.st, b.st, secs);
  r.num("redis_idle_cpu_pct", idle_redis_pct);
  r.num("redis_floor_cpu_pct", 100 * floor_cpu_s / interval_s);
  if (floor_cpu_s > 0) r.num("redis_cpu_to_floor", r.get("redis_cpu_pct") / (100 * floor_cpu_s / interval_s));
  r.num("window_s", secs);
  r.note = grouped(nd) + " locks: " + fmt("%.0f", r.get("round_trips_per_interval")) + " RT/interval, redis " +
           fmt("%.1f%%", r.get("redis_cpu_pct")) + " (idle " + fmt("%.1f%%", idle_redis_pct) + ", floor " +
           fmt("%.1f%%", r.get("redis_floor_cpu_pct")) + "), client " +
           fmt("%.1f%%", r.get("client_cpu_pct")) + ", " + fmt("%.0f", r.get("bytes_per_lock")) + " B/lock heap (" +
           fmt("%.0f", r.get("rss_bytes_per_lock")) + " RSS), alive " + grouped(static_cast<double>(alive)) +
           ", min TTL " + std::to_string(min_ttl) + " ms";
  return r;
}

double idle_redis_cpu_pct(bench_ctx& x, double secs) {
  auto a = take(x, nullptr);
  std::this_thread::sleep_for(std::chrono::duration<double>(secs));
  auto b = take(x, nullptr);
  return 100 * (b.redis - a.redis) / secs_between(a.t, b.t);
}

// ---- validation (--check): shape and sanity, never timing --------------------------------------

bool check_rows(const bench_ctx& x, std::vector<std::string> expected, std::string& why) {
  std::ostringstream out;
  for (auto& r : x.rows) {
    if (!r.error.empty()) out << r.name << ": error " << r.error << "; ";
    if (!(r.ops_per_s > 0)) out << r.name << ": ops_per_s " << r.ops_per_s << "; ";
    if (!(r.p50_us > 0) || !(r.p99_us >= r.p50_us)) out << r.name << ": p50/p99 " << r.p50_us << "/" << r.p99_us << "; ";
    if (!(r.rt_per_op > 0)) out << r.name << ": round_trips_per_op " << r.rt_per_op << "; ";
    if (r.has_ceiling && !(r.ceiling > 0 && r.ratio > 0)) out << r.name << ": ceiling/ratio; ";
    if (r.name.rfind("B4", 0) == 0 || r.name.rfind("B5-permits", 0) == 0) {
      double locks = r.get("locks");
      if (r.get("alive") != locks) out << r.name << ": alive " << r.get("alive") << " of " << locks << "; ";
      if (r.get("watched") != locks) out << r.name << ": watched " << r.get("watched") << " of " << locks << "; ";
      if (r.get("lost") != 0) out << r.name << ": lost " << r.get("lost") << "; ";
      if (!(r.get("round_trips_per_interval") > 0)) out << r.name << ": no renewals; ";
      if (!(r.get("min_ttl_ms") > 0)) out << r.name << ": min TTL " << r.get("min_ttl_ms") << "; ";
    }
    if (r.name.rfind("B3", 0) == 0 && !(r.get("handoff_to_other_share") >= 0)) out << r.name << ": hand-offs; ";
  }
  for (auto& e : expected) {
    bool found = std::any_of(x.rows.begin(), x.rows.end(), [&](const row& r) { return r.name == e; });
    if (!found) out << e << ": missing; ";
  }
  why = out.str();
  return why.empty();
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "unknown";
}

std::string hex_id() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

int run_bench(options opt) {
  std::unique_ptr<local::redis_server> server;
  std::string url = opt.url;
  if (url.empty()) {
    if (!local::redis_server::available()) {
      std::cerr << "redlease-bench: redis-server not found on PATH (install redis-server, or pass --redis URL)\n";
      return exit_code::unavailable;
    }
    server = std::make_unique<local::redis_server>();
    url = server->url();
  }
  bench_ctx x;
  x.opt = opt;
  x.cfg = make_config(url);
  x.cfg.client_name = "redlease-bench";
  x.cfg.sync_wait = opt.sync_wait == "cpu" ? sync_wait_policy::cpu_first : sync_wait_policy::latency_first;
  x.cfg.sync_lane = !opt.no_sync_lane;
  if (opt.quick) {
    x.case_s = 1;
    x.warm_s = 0.1;
    x.ceiling_s = 0.3;
  }
  if (opt.seconds > 0) x.case_s = opt.seconds;
  auto id = hex_id();
  x.prefix = "redlease-bench:" + id + ":";
  x.fake_uuid = id.substr(0, 8) + "-0000-4000-8000-" + id.substr(4, 12);
  x.meter = std::make_unique<bench::raw_conn>(x.cfg);
  std::string version = bench::info_field(*x.meter, "server", "redis_version");
  {
    client probe{x.cfg};
    probe.ping();
  }
  if (!opt.json) {
    std::cout << "redlease-bench" << (opt.quick ? " --quick" : "") << ": redis " << version << " at "
              << x.cfg.redacted_url() << (server ? " (private, no persistence)" : "") << "; "
              << std::thread::hardware_concurrency() << " CPUs (" << cpu_model() << "); " << x.case_s
              << " s per case\n";
  }

  if (!opt.no_ceiling) {
    measure_ceiling(x);
  } else {
    x.floor_rtt_us = 50;  // placeholder for the RT-unit figures
    x.floor_rt_per_s = x.pair_ceiling = x.mutex_pair_ceiling = 1;
    if (!opt.json) std::cout << "(ceiling skipped: ratios are meaningless)\npair ceilings used below: none" << std::endl;
  }
  for (auto& r : x.rows)
    if (r.name == "ceiling-ping-seq") {
      r.strs.emplace_back("redis_version", version);
      r.num("nproc", std::thread::hardware_concurrency());
    }

  auto attempt = [&](const std::string& name, auto&& fn) {
    if (x.wanted(name)) emit(x, bench::attempt_row(name, fn));
  };
  std::vector<std::string> expected;
  auto want = [&](const std::string& name) {
    if (x.wanted(name)) expected.push_back(name);
  };

  want("B1");
  attempt("B1", [&] {
    auto r = sync_pairs<false>(x, "B1", 1, true);
    r.has_ceiling = true;
    r.ceiling = x.floor_rt_per_s / 2;
    r.ratio = r.ops_per_s / r.ceiling;
    if (x.spin_floor_rt_per_s > 0) r.num("ratio_vs_spin_floor", r.ops_per_s / (x.spin_floor_rt_per_s / 2));
    r.note = "vs sequential floor (2 RT per pair); " + fmt("%.2f", r.get("ratio_vs_spin_floor")) +
             " vs a busy-polling floor; " + fmt("%.1f", r.get("context_switches_per_op")) + " cs/pair; client at " +
             fmt("%.2f", r.get("client_cpu_pct") / 100) + " cores; " +
             fmt("%.0f", 100 * r.get("direct_write_share")) + " % of writes by the caller (" +
             fmt("%.0f", 100 * r.get("lane_share")) + " % of requests on its lane)";
    return r;
  });
  auto vs = [&](row r, double ceiling, const char* what) {
    r.has_ceiling = true;
    r.ceiling = ceiling;
    r.ratio = r.ops_per_s / ceiling;
    r.note = std::string("vs ") + what + "; " + fmt("%.1f", r.get("commands_per_write")) + " cmds/write";
    return r;
  };
  for (const char* n : {"B2-sync-reentrant", "B2-sync-fenced-reentrant", "B2-async-reentrant", "B2-sync-mutex",
                        "B2-sync-fenced-mutex", "B2-async-mutex", "B2-sync-raw-reentrant", "B2-sync-raw-mutex",
                        "B2-sync-shared-reentrant", "B2-sync-shared-mutex", "B2-sync-shared2-reentrant",
                        "B2-sync-shared2-mutex"})
    want(n);
  // What a blocking caller pays, next to the rate: context switches and client CPU per pair, and the
  // rate against the ceiling at depth 16 (16 per write, 16 to 32 unanswered: issue 18's yardstick)
  // and at depth 8 (at most 16 unanswered: all that 16 blocking callers can have out).
  auto sync_vs = [&](row r, double ceiling, double ceiling_d16, double ceiling_d8, const char* what) {
    r = vs(std::move(r), ceiling, what);
    if (ceiling_d16 > 0) r.num("ratio_d16", r.ops_per_s / ceiling_d16);
    if (ceiling_d8 > 0) r.num("ratio_d8", r.ops_per_s / ceiling_d8);
    r.note += "; " + fmt("%.2f", r.get("ratio_d16")) + " of depth 16, " + fmt("%.2f", r.get("ratio_d8")) +
              " of depth 8; " + fmt("%.1f", r.get("context_switches_per_op")) + " cs/pair";
    return r;
  };
  // Fencing's cost: a case whose grants take tokens, against its ceiling and, as Redis CPU per pair,
  // against its plain case (the blocking ones run just before, so that the server is in the same
  // state).
  auto fenced_vs_plain = [&](row r, const char* plain, double ceiling, const char* what) {
    r = vs(std::move(r), ceiling, what);
    for (auto& other : x.rows)
      if (other.name == plain && other.redis_us_per_op > 0) {
        r.num("redis_cpu_ratio", r.redis_us_per_op / other.redis_us_per_op);
        r.note += "; redis CPU " + fmt("%.2f", r.redis_us_per_op / other.redis_us_per_op) + "x " + plain;
      }
    return r;
  };
  attempt("B2-sync-reentrant", [&] {
    return sync_vs(sync_pairs<false>(x, "B2-sync-reentrant", 16, false), x.pair_ceiling, x.pair_ceiling_d16,
                   x.pair_ceiling_d8, "pair ceiling");
  });
  attempt("B2-sync-fenced-reentrant", [&] {
    return fenced_vs_plain(sync_pairs<false, lock_kind::reentrant, true>(x, "B2-sync-fenced-reentrant", 16, false),
                           "B2-sync-reentrant", x.pair_ceiling, "pair ceiling");
  });
  attempt("B2-async-reentrant", [&] { return vs(async_pairs<false>(x, "B2-async-reentrant", 256), x.pair_ceiling, "pair ceiling"); });
  // Issue 41: what the lock metrics cost. The same case with config::metrics on and off, alternating
  // three times each in this run (a drift of the VM touches both alike); the medians' ratio.
  auto metrics_cost = [&](const std::string& name, auto run) {
    std::vector<double> on, off;
    row last;
    for (int round = 0; round < 3; ++round) {
      for (bool counting : {true, false}) {
        x.cfg.metrics = counting;
        row r = run(name + (counting ? "-on" : "-off"));
        (counting ? on : off).push_back(r.ops_per_s);
        if (counting) last = r;
      }
    }
    x.cfg.metrics = true;
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    last.name = name;
    last.ops_per_s = median(on);
    last.num("metrics_off_ops_per_s", median(off));
    last.num("on_vs_off", median(on) / median(off));
    last.note = "metrics on vs off (medians of 3 alternating runs): " + fmt("%.3f", median(on) / median(off));
    return last;
  };
  for (const char* n : {"B1-metrics", "B2-async-metrics"}) want(n);
  attempt("B1-metrics", [&] {
    return metrics_cost("B1-metrics", [&](const std::string& n) { return sync_pairs<false>(x, n, 1, true); });
  });
  attempt("B2-async-metrics", [&] {
    return metrics_cost("B2-async-metrics", [&](const std::string& n) { return async_pairs<false>(x, n, 256); });
  });
  attempt("B2-sync-mutex", [&] {
    return sync_vs(sync_pairs<true>(x, "B2-sync-mutex", 16, false), x.mutex_pair_ceiling, x.mutex_pair_ceiling_d16,
                   x.mutex_pair_ceiling_d8, "mutex ceiling");
  });
  attempt("B2-sync-fenced-mutex", [&] {
    return fenced_vs_plain(sync_pairs<true, lock_kind::mutex, true>(x, "B2-sync-fenced-mutex", 16, false),
                           "B2-sync-mutex", x.mutex_pair_ceiling, "mutex ceiling");
  });
  attempt("B2-async-mutex", [&] { return vs(async_pairs<true>(x, "B2-async-mutex", 256), x.mutex_pair_ceiling, "mutex ceiling"); });
  // The raw rows have no client, hence no commands per write: the note says what they are instead,
  // and how much of their rate the library's row of the same run reached (`library_share`).
  auto raw_vs = [&](row r, double ceiling, double ceiling_d16, double ceiling_d8, const char* what,
                    const char* library) {
    r = sync_vs(std::move(r), ceiling, ceiling_d16, ceiling_d8, what);
    auto cut = r.note.find("; ");
    auto rest = r.note.find("; ", cut + 2);
    const char* design = r.name.find("-shared-") != std::string::npos    ? "; no library, one connection shared"
                         : r.name.find("-shared2-") != std::string::npos ? "; no library, two connections shared"
                                                                         : "; no library, a connection per thread";
    if (cut != std::string::npos && rest != std::string::npos)
      r.note = r.note.substr(0, cut) + design + r.note.substr(rest);
    for (auto& other : x.rows)
      if (other.name == library && other.ops_per_s > 0 && r.ops_per_s > 0) {
        r.num("library_share", other.ops_per_s / r.ops_per_s);
        r.note += "; " + std::string(library) + " " + fmt("%.2f", other.ops_per_s / r.ops_per_s) + "x this";
      }
    return r;
  };
  attempt("B2-sync-raw-reentrant", [&] {
    return raw_vs(sync_raw_pairs(x, "B2-sync-raw-reentrant", 16, false), x.pair_ceiling, x.pair_ceiling_d16,
                  x.pair_ceiling_d8, "pair ceiling", "B2-sync-reentrant");
  });
  attempt("B2-sync-raw-mutex", [&] {
    return raw_vs(sync_raw_pairs(x, "B2-sync-raw-mutex", 16, true), x.mutex_pair_ceiling, x.mutex_pair_ceiling_d16,
                  x.mutex_pair_ceiling_d8, "mutex ceiling", "B2-sync-mutex");
  });
  for (int conns : {1, 2}) {
    const std::string tag = conns == 1 ? "B2-sync-shared-" : "B2-sync-shared2-";
    attempt(tag + "reentrant", [&] {
      return raw_vs(sync_shared_pairs(x, tag + "reentrant", 16, false, conns), x.pair_ceiling, x.pair_ceiling_d16,
                    x.pair_ceiling_d8, "pair ceiling", "B2-sync-reentrant");
    });
    attempt(tag + "mutex", [&] {
      return raw_vs(sync_shared_pairs(x, tag + "mutex", 16, true, conns), x.mutex_pair_ceiling,
                    x.mutex_pair_ceiling_d16, x.mutex_pair_ceiling_d8, "mutex ceiling", "B2-sync-mutex");
    });
  }
  // The async ones: the library's runs batch differently (commands per write), which moves Redis's
  // CPU per command, so the scripts' own cost is also compared raw: both pairs pipelined 256 deep,
  // back to back.
  auto fenced_vs = [&](row r, const char* plain, double ceiling, const char* what, bool mutex) {
    r = fenced_vs_plain(std::move(r), plain, ceiling, what);
    if (!opt.no_ceiling) {
      bench::raw_conn rc(x.cfg);
      double plain_us = 0, fenced_us = 0;
      for (int i = 0; i < 2; ++i) {  // interleaved, the best of two each
        auto p = ceiling_pairs(x, rc, 256, mutex).pair.redis_us_per_op;
        auto f = ceiling_pairs(x, rc, 256, mutex, true).pair.redis_us_per_op;
        plain_us = i ? std::min(plain_us, p) : p;
        fenced_us = i ? std::min(fenced_us, f) : f;
      }
      if (plain_us > 0) {
        r.num("raw_redis_cpu_ratio", fenced_us / plain_us);
        r.note += "; raw scripts " + fmt("%.2f", fenced_us / plain_us) + "x";
      }
    }
    return r;
  };
  for (const char* n : {"B2-async-fenced-reentrant", "B2-async-fenced-mutex"}) want(n);
  attempt("B2-async-fenced-reentrant", [&] {
    return fenced_vs(async_pairs<false, true>(x, "B2-async-fenced-reentrant", 256), "B2-async-reentrant", x.pair_ceiling,
                     "pair ceiling", false);
  });
  attempt("B2-async-fenced-mutex", [&] {
    return fenced_vs(async_pairs<true, true>(x, "B2-async-fenced-mutex", 256), "B2-async-mutex", x.mutex_pair_ceiling,
                     "mutex ceiling", true);
  });
  want("B3");
  want("B3t");
  attempt("B3", [&] { return contended(x, "B3", 16, 1000us, 0ms); });
  attempt("B3t", [&] { return contended(x, "B3t", 16, 1000us, 10ms); });
  // The same hand-off on the fair lock: the lock goes to the head of the queue only.
  want("B3t-fair");
  attempt("B3t-fair", [&] { return contended(x, "B3t-fair", 16, 1000us, 10ms, true); });
  // 16 readers on one read-write lock, each taking and releasing a read hold back to back.
  want("B2-sync-read16");
  attempt("B2-sync-read16", [&] {
    auto r = vs(sync_pairs<false, lock_kind::read>(x, "B2-sync-read16", 16, true), x.pair_ceiling, "pair ceiling");
    for (auto& other : x.rows)
      if (other.name == "B2-sync-reentrant" && other.ops_per_s > 0) {
        r.num("ratio_vs_sync_reentrant", r.ops_per_s / other.ops_per_s);
        r.note += "; " + fmt("%.2f", r.ops_per_s / other.ops_per_s) + "x B2-sync-reentrant";
      }
    return r;
  });

  std::vector<std::pair<std::string, std::size_t>> b4;
  if (opt.quick) b4 = {{"B4-1k", 1000}, {"B4-10k", 10000}};
  else b4 = {{"B4-1k", 1000}, {"B4-100k", 100000}};
  double window = opt.quick ? 3 : 10;
  bool any_b4 = std::any_of(b4.begin(), b4.end(), [&](auto& p) { return x.wanted(p.first); });
  double idle = any_b4 ? idle_redis_cpu_pct(x, opt.quick ? 0.5 : 1.0) : 0;
  for (auto& [name, n] : b4) {
    want(name);
    attempt(name, [&, name = name, n = n] { return watchdog_scale(x, name, n, window, idle); });
  }

  // Semaphores (issue 40, bench/semaphore_bench.cpp): this run's server, a pair ceiling of their own;
  // B5-permits-watchdog holds 10,000 permits for B4's window.
  for (auto& n : bench::semaphore_case_names()) want(n);
  bench::run_semaphore_cases({x.cfg, x.prefix, x.case_s, x.warm_s, x.ceiling_s, opt.json,
                              [&](std::string_view n) { return x.wanted(n); }, [&](row r) { emit(x, std::move(r)); },
                              x.fake_uuid, 10000, window, {}},
                             x.floor_rtt_us);

  // The scan pass of top and the exporter (issue 41, bench/scan_bench.cpp): this run's server.
  {
    const std::string name = opt.quick ? "T1-scan-10k" : "T1-scan-100k";
    want(name);
    attempt(name, [&, name] {
      return bench::scan_pass({x.cfg, x.prefix, x.case_s, x.warm_s, x.ceiling_s, opt.json, {}, {}, x.fake_uuid, 0, 0, {}},
                              name, opt.quick ? 10000 : 100000);
    });
  }

  // RedLock (issue 38, bench/redlock_bench.cpp): private servers of its own, ceilings of its own.
  for (auto& n : bench::redlock_case_names()) want(n);
  bench::run_redlock_cases({x.cfg, x.prefix, x.case_s, x.warm_s, x.ceiling_s, opt.json,
                            [&](std::string_view n) { return x.wanted(n); }, [&](row r) { emit(x, std::move(r)); },
                            x.fake_uuid, 0, 0, {}});

  // Redis Cluster (bench/cluster_bench.cpp): a private cluster of its own, only with --cluster.
  if (opt.cluster) {
    const std::size_t b4_locks = opt.quick ? 10000 : 100000;
    for (auto& n : bench::cluster_case_names(b4_locks)) want(n);
    // Its B4 compares with the single-server B4 of the same locks, on a server of the section's own.
    auto single_b4 = [&](const std::string& server_url, const std::string& name, std::size_t n, double secs) {
      bench_ctx y;
      y.opt = opt;
      y.cfg = make_config(server_url);
      y.cfg.client_name = x.cfg.client_name;
      y.cfg.sync_wait = x.cfg.sync_wait;
      y.cfg.sync_lane = x.cfg.sync_lane;
      y.meter = std::make_unique<bench::raw_conn>(y.cfg);
      y.prefix = x.prefix;
      return watchdog_scale(y, name, n, secs, idle_redis_cpu_pct(y, opt.quick ? 0.5 : 1.0));
    };
    bench::run_cluster_cases({x.cfg, x.prefix, x.case_s, x.warm_s, x.ceiling_s, opt.json,
                              [&](std::string_view n) { return x.wanted(n); }, [&](row r) { emit(x, std::move(r)); },
                              x.fake_uuid, b4_locks, window, single_b4});
  }

  if (!opt.json) std::cout << "\nRT = commands sent by the client (both connections) per op. CPU per op: process "
                              "(all threads) and redis-server (INFO cpu), over the measured run.\n";
  if (opt.check) {
    std::string why;
    if (!check_rows(x, expected, why)) {
      std::cerr << "redlease-bench --check: FAILED: " << why << "\n";
      return 1;
    }
    std::cerr << "redlease-bench --check: ok (" << x.rows.size() << " rows)\n";
  }
  return exit_code::ok;
}

// The options, on the program itself (they were those of `redlease bench`).
void setup_bench(CLI::App& cmd, action_t& action) {
  auto opt = std::make_shared<options>();
  cmd.footer(
      "Exit status: 0 done (with --check: the results are valid); 1 --check found a problem; 64 usage;\n"
      "69 no redis-server on PATH (without --redis), or Redis unavailable; 78 the server refuses a\n"
      "command the bench sends (an ACL permission, a renamed command); 70 an unexpected error.");
  add_connection_flags(&cmd, opt->url, "Run against this server instead of a private one (keys: redlease-bench:*)");
  cmd.add_flag("--json", opt->json, "One JSON object per line per case");
  cmd.add_flag("--quick", opt->quick, "Short runs (smoke test): 1 s per case, B4 with 1k and 10k locks for 3 s");
  cmd.add_flag("--check", opt->check, "Validate the results (every case present, sane numbers, every B4 lock "
                                      "alive); exit 1 otherwise. Asserts no timing");
  cmd.add_option("--only", opt->only, "Run only these cases (comma-separated names or prefixes, e.g. B2,B3t; "
                                      "RedLock: R1-single, R1-redlock-1, -3, -3-one-thread, -5, B2-async-redlock-3; semaphores: "
                                      "B5-sem-sync, B5-sem-sync-raw, B5-sem-async, B5-sem-handoff, B5-permits-watchdog; the metrics' "
                                      "cost: B1-metrics, B2-async-metrics; top's and the exporter's scan: T1-scan); "
                                      "the ceiling always runs");
  cmd.add_option("--seconds", opt->seconds, "Measuring time per case (default 3, --quick 1)")->check(CLI::PositiveNumber);
  cmd.add_flag("--no-sync-lane", opt->no_sync_lane,
               "No second connection for a lone blocking caller (config::sync_lane = false)");
  cmd.add_option("--sync-wait", opt->sync_wait, "How blocking calls wait (config::sync_wait): latency or cpu")
      ->check(CLI::IsMember({"latency", "cpu"}));
  cmd.add_flag("--cluster", opt->cluster,
               "Also the Redis Cluster cases B2-async-cluster-1, -2, -3 and B4-cluster-100k (10k with "
               "--quick) with its single-server reference B4-cluster-single-100k (a private 3-master cluster "
               "and a private server; --only B2-async-cluster or B4-cluster for them alone)");
  cmd.add_flag("--no-ceiling", opt->no_ceiling, "Skip the ceiling (profiling aid; no ratios)")->group("");
  cmd.callback([&action, opt] { action = [opt] { return run_bench(*opt); }; });
}

}  // namespace
}  // namespace redlease::cli

int main(int argc, char** argv) {
  using namespace redlease::cli;
  CLI::App app{"redlease-bench: lock throughput, latency and cost against the Redis server's own ceiling "
               "(starts a private redis-server unless --redis)"};
  app.set_version_flag("--version", "redlease-bench " REDLEASE_VERSION_STRING);
  action_t action;
  setup_bench(app, action);
  return parse_and_run(app, argc, argv, action, "redlease-bench");
}
