// SPDX-License-Identifier: MIT
// The semaphore cases of redlease-bench (issue 40). BENCHMARKS.md, "B5: semaphores", says what each
// measures.
//
// B5-sem-sync and B5-sem-async take acquire(1) and release(1) pairs on one semaphore holding far
// more permits than are ever out, so no acquisition waits: the cost of the two script calls through
// the library. Their ceiling is the same two scripts (semaphore_acquire.lua, semaphore_release.lua)
// with the library's keys and arguments, pipelined raw on one connection as the lock pair ceilings
// are (redlease_bench.cpp, ceiling_pairs): 4,096 acquisitions, then their 4,096 releases, N per
// write with two writes out. Every request carries a fresh id, as the library's do: a grant mark or
// a release latch that is already there would make the script take or add nothing.
//
// B5-sem-handoff: 16 threads, 2 permits; each acquires one (waiting on pub/sub), holds it 1 ms,
// releases it and pauses, as B3t does with a lock.
#include "semaphore_bench.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "redlease/redlease.hpp"
#include "permit_bench.hpp"
#include "redlease_lua.hpp"
#include "watchdog_support.hpp"

namespace redlease::cli::bench {
namespace {

using namespace std::chrono_literals;
namespace lua = redlease::detail::lua;

constexpr int sync_threads = 16;   // B2-sync's
constexpr int async_owners = 256;  // B2-async's
constexpr std::size_t phase_pairs = 4096;
constexpr long long ample = 1'000'000'000;
// What the library sends with its defaults: the grant mark lives max(lease, 60 s) with the 30 s
// watchdog lease; a release's latch max(1 min, 10 request timeouts of 5 s).
const std::string mark_ms = "60000";
const std::string latch_ms = "60000";

// 32 hex characters, as random_token() makes the library's ids; `tag` keeps the grant marks of the
// acquisitions apart from the latches of the releases (one key space) and the threads apart.
std::string id32(std::uint32_t tag, std::uint64_t n) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x%08x%016llx", tag, 0x5e3a40u, static_cast<unsigned long long>(n));
  return buf;
}

// Redisson's own RSemaphore scripts (tryAcquire, release), with no grant mark and no latch: what
// the pairs would cost without the library's exactly-once keys (a yardstick, not the ceiling).
constexpr std::string_view bare_acquire =
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "redis.call('decrby', KEYS[1], ARGV[1]); return 1; end; return 0;";
constexpr std::string_view bare_release =
    "local value = redis.call('incrby', KEYS[1], ARGV[1]); redis.call(ARGV[2], KEYS[2], value);";

// The requests the library sends for one semaphore (src/lock/protocols/semaphore.cpp, encode_acquire
// and encode_release; src/facade/semaphore.cpp, send_add), or with `bare_sha` (the SHA1s of
// bare_acquire, bare_release) Redisson's.
struct sem_requests {
  std::string name, channel, latch_prefix;
  std::optional<std::pair<std::string, std::string>> bare_sha;
  explicit sem_requests(std::string n) : name(std::move(n)) {
    auto l = describe(lock_kind::semaphore, name);
    channel = l.channel();
    latch_prefix = l.latch_key("");
  }
  // `swept`: the id of the settled key the library's call deletes in passing (src/lock/latch_sweeper.hpp).
  // In a loop of pairs an acquisition carries the previous release's latch and a release its own
  // acquisition's grant mark, as the library's calls do.
  void acquire(stream& s, const std::string& id, const std::string& swept) const {
    if (bare_sha) return s.add({"EVALSHA", bare_sha->first, "1", name, "1"});
    s.add({"EVALSHA", lua::semaphore_acquire.sha1, "3", name, latch_prefix + id, latch_prefix + swept, "1", mark_ms});
  }
  void release(stream& s, const std::string& id, const std::string& swept) const {
    if (bare_sha) return s.add({"EVALSHA", bare_sha->second, "2", name, channel, "1", "publish"});
    s.add({"EVALSHA", lua::semaphore_release.sha1, "3", name, latch_prefix + id, latch_prefix + swept, channel, "1",
           latch_ms, "publish"});
  }
};

// One step of deleting the keys a glob matches: SCAN from cursor ARGV[1] over ARGV[2], UNLINK what it
// found, return the next cursor.
constexpr std::string_view unlink_step =
    "local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', 1000) "
    "for _, k in ipairs(r[2]) do redis.call('UNLINK', k) end return r[1]";

// Deletes the semaphore `key` and every grant mark and release latch of it. After each measured
// stretch: the pairs leave two keys each for a minute, and a stretch that ran with a million of
// them left by the ones before would pay for a keyspace they grew (the table doublings, colder
// caches) that its ceiling did not.
void drop(raw_conn& meter, const std::string& key) {
  meter.command({"DEL", key});
  const std::string pattern = describe(lock_kind::semaphore, key).latch_key("*");
  std::string cursor = "0";
  do {
    auto r = meter.command({"EVAL", unlink_step, "0", cursor, pattern});
    if (r.type != '$') throw std::runtime_error("deleting the semaphore's latches: " + r.str);
    cursor = r.str;
  } while (cursor != "0");
}

// `ops` over [a, b]; round trips are the client's commands on all its connections (none: raw rows,
// which set them themselves).
void fill(row& r, const snap& a, const snap& b, double ops, std::vector<float>& lat) {
  const double secs = seconds(a.t, b.t);
  const double cmds = static_cast<double>(b.st.commands - a.st.commands);
  const double pubsub = static_cast<double>(b.st.pubsub_commands - a.st.pubsub_commands);
  const double writes = static_cast<double>(b.st.writes - a.st.writes);
  r.ops_per_s = ops / secs;
  r.rt_per_op = ops > 0 ? (cmds + pubsub) / ops : 0;
  r.redis_us_per_op = ops > 0 ? (b.redis - a.redis) * 1e6 / ops : 0;
  r.client_us_per_op = ops > 0 ? (b.cpu - a.cpu) * 1e6 / ops : 0;
  r.p50_us = percentile(lat, 0.5);
  r.p99_us = percentile(lat, 0.99);
  r.num("ops", ops);
  r.num("seconds", secs);
  r.num("pubsub_cmd_per_op", ops > 0 ? pubsub / ops : 0);
  r.num("commands_per_write", writes > 0 ? cmds / writes : 0);
  r.num("redis_cpu_pct", 100 * (b.redis - a.redis) / secs);
  r.num("client_cpu_pct", 100 * (b.cpu - a.cpu) / secs);
  r.num("context_switches_per_op", ops > 0 ? static_cast<double>(b.csw - a.csw) / ops : 0);
  // The grant marks and release latches the pairs leave behind for a minute.
  r.num("redis_bytes_per_op", ops > 0 ? (b.mem - a.mem) / ops : 0);
}

// Threads running `body` (run_threads), a warm-up and then the measured run.
template <class Body>
void measure_threads(raw_conn& meter, row& r, int threads, double warm_s, double secs, Body body, const client* c) {
  run_threads(threads, warm_s, body, nullptr, nullptr);
  snap a, b;
  auto res = run_threads(threads, secs, body, [&] { a = take(meter, c); }, [&] { b = take(meter, c); });
  std::vector<float> lat;
  double ops = 0;
  for (auto& t : res) {
    ops += static_cast<double>(t.ops);
    lat.insert(lat.end(), t.lat.begin(), t.lat.end());
  }
  fill(r, a, b, ops, lat);
  r.num("threads", threads);
}

// ---- the ceiling ------------------------------------------------------------------------------

struct ceilings {
  double best = 0, d16 = 0, d8 = 0;  // pairs/s: best of depths 16, 64, 256 and busy-polling 256
};

// Rounds of 4,096 acquisitions pipelined `depth` per write (two writes out), then their 4,096
// releases; every acquisition must be granted. Pair rate = pairs / (time in both phases).
row ceiling_pairs(const section_run& run, raw_conn& meter, raw_conn& rc, const sem_requests& rq, int depth,
                  std::uint64_t& serial) {
  row r;
  r.name = "ceiling-sem-pair-d" + std::to_string(depth);
  const auto d = static_cast<std::size_t>(depth);
  std::vector<float> lat_a, lat_r;
  double t_acq = 0, t_rel = 0;
  const pair_check check = [](const tally& ta, const tally& tr) {
    if (ta.integer != phase_pairs || ta.int_sum != static_cast<long long>(phase_pairs))
      throw std::runtime_error("semaphore ceiling: not every acquisition was granted: " + ta.first_error);
    if (tr.error != 0 || tr.integer + tr.nil != phase_pairs)  // Redisson's release returns nothing
      throw std::runtime_error("semaphore ceiling: a release failed: " + tr.first_error);
  };
  auto rounds = [&](double secs, bool record) {
    double n = 0, ignored_a = 0, ignored_r = 0;
    auto end = steady::now() + std::chrono::duration<double>(secs);
    while (steady::now() < end) {
      stream acq, rel;
      for (std::size_t i = 0; i < phase_pairs; ++i, ++serial) {
        // The release latch of the same place in the round before (all of a round's releases
        // follow its acquisitions): every latch is deleted, one round later.
        rq.acquire(acq, id32(1, serial), id32(2, serial - phase_pairs));
        rq.release(rel, id32(2, serial), id32(1, serial));
      }
      pair_round(rc, acq, rel, 2 * d, d, check, record ? t_acq : ignored_a, record ? t_rel : ignored_r,
                 record ? &lat_a : nullptr, record ? &lat_r : nullptr);
      n += static_cast<double>(phase_pairs);
    }
    return n;
  };
  rounds(run.warm_s, false);
  auto a = take(meter, nullptr);
  double n = rounds(run.ceiling_s, true);
  auto b = take(meter, nullptr);
  drop(meter, rq.name);
  meter.command({"SET", rq.name, std::to_string(ample)});
  std::vector<float> none;
  fill(r, a, b, n, none);
  fill_pair_rates(r, depth, n, t_acq, t_rel, lat_a, lat_r);
  r.rt_per_op = 2;
  return r;
}

ceilings measure_ceiling(const section_run& run, raw_conn& meter, const std::string& key) {
  for (const auto* s : {&lua::semaphore_acquire, &lua::semaphore_release}) {
    auto r = meter.command({"SCRIPT", "LOAD", s->body});
    if (r.str != s->sha1) throw std::runtime_error("SCRIPT LOAD " + std::string(s->name) + ": unexpected " + r.str);
  }
  meter.command({"SET", key, std::to_string(ample)});
  const sem_requests rq(key);
  raw_conn rc(run.cfg);
  std::uint64_t serial = 0;
  std::vector<row> rows;
  // Two passes over every depth, the better one of each kept: one pass swings with the VM's
  // wake-up latency and with the other work on its two vCPUs (a single pass of depth 256 gave 28k
  // pairs/s against 76k at depth 64 a second earlier), and a low ceiling would flatter the cases.
  for (int pass = 0; pass < 2; ++pass) {
    std::size_t i = 0;
    for (int depth : {8, 16, 64, 256, -256}) {  // -256: depth 256, the client busy-polling
      rc.set_spin(depth < 0);
      auto r = ceiling_pairs(run, meter, rc, rq, std::abs(depth), serial);
      if (depth < 0) r.name += "-spin";
      if (pass == 0) rows.push_back(std::move(r));
      else if (r.ops_per_s > rows[i].ops_per_s) rows[i] = std::move(r);
      ++i;
    }
  }
  rc.set_spin(false);
  // Redisson's scripts at depth 64, the better of two passes, against the library's of depth 64.
  sem_requests bare(key);
  bare.bare_sha.emplace(meter.command({"SCRIPT", "LOAD", bare_acquire}).str,
                        meter.command({"SCRIPT", "LOAD", bare_release}).str);
  row plain = ceiling_pairs(run, meter, rc, bare, 64, serial);
  if (auto again = ceiling_pairs(run, meter, rc, bare, 64, serial); again.ops_per_s > plain.ops_per_s)
    plain = std::move(again);
  plain.name = "ceiling-sem-redisson-pair-d64";
  plain.num("library_scripts_share", rows[2].ops_per_s / plain.ops_per_s);
  plain.num("library_scripts_redis_cpu_ratio", rows[2].redis_us_per_op / plain.redis_us_per_op);
  drop(meter, key);
  ceilings c;
  c.d8 = rows[0].ops_per_s;
  c.d16 = rows[1].ops_per_s;
  for (std::size_t i = 1; i < rows.size(); ++i) c.best = std::max(c.best, rows[i].ops_per_s);
  if (!run.json) {
    std::cout << "\nSemaphore pair ceiling: semaphore_acquire.lua + semaphore_release.lua as the library sends them, "
                 "one key,\nraw on one connection (pairs/s, pair latency p50):";
    for (auto& r : rows)
      std::cout << (&r == &rows[0] ? " " : ", ") << r.name.substr(std::string("ceiling-sem-pair-").size()) << " "
                << num("%.0f", r.ops_per_s) << " (" << num("%.0f", r.p50_us) << " us)";
    std::cout << "\n  used below: best " << num("%.0f", c.best) << "/s; redis " << num("%.1f", rows[2].redis_us_per_op)
              << " us and " << num("%.0f", rows[2].get("redis_bytes_per_op")) << " bytes per pair at depth 64"
              << "\n  Redisson's scripts (no grant mark, no latch), depth 64: " << num("%.0f", plain.ops_per_s)
              << "/s, redis " << num("%.1f", plain.redis_us_per_op) << " us per pair; the library's scripts reach "
              << num("%.2f", plain.get("library_scripts_share")) << " of its rate at "
              << num("%.2f", plain.get("library_scripts_redis_cpu_ratio")) << "x its redis CPU" << std::endl;
  }
  rows.push_back(std::move(plain));
  for (auto& r : rows) run.emit(std::move(r));
  return c;
}

void against(row& r, double ceiling, const ceilings& c, bool sync) {
  r.has_ceiling = true;
  r.ceiling = ceiling;
  r.ratio = r.ops_per_s / ceiling;
  r.note = "vs semaphore pair ceiling; " + num("%.1f", r.get("commands_per_write")) + " cmds/write; redis " +
           num("%.0f", r.get("redis_bytes_per_op")) + " B/pair";
  if (!sync) return;
  r.num("ratio_d16", r.ops_per_s / c.d16);
  r.num("ratio_d8", r.ops_per_s / c.d8);
  r.note += "; " + num("%.2f", r.get("ratio_d16")) + " of depth 16, " + num("%.2f", r.get("ratio_d8")) +
            " of depth 8; " + num("%.1f", r.get("context_switches_per_op")) + " cs/pair";
}

// ---- B5-sem-sync, B5-sem-sync-raw, B5-sem-async -----------------------------------------------

// A case's row, a client with the run's settings, and a new semaphore of `permits` on it.
struct sem_case {
  row r;
  client c;
  semaphore sem;
  sem_case(const section_run& run, std::string name, const std::string& key, long long permits)
      : c(run.cfg), sem(c.semaphore(key)) {
    r.name = std::move(name);
    if (!sem.try_set_permits(permits)) throw std::runtime_error(r.name + ": the semaphore " + key + " was already set");
  }
};

row sync_pairs(const section_run& run, raw_conn& meter, const std::string& key) {
  sem_case k(run, "B5-sem-sync", key, ample);
  auto& r = k.r;
  auto body = [&](int, std::atomic<bool>& stop, thread_results& out) {
    auto s = k.sem;
    out.lat.reserve(1 << 18);
    while (!stop.load(std::memory_order_relaxed)) {
      auto t0 = steady::now();
      s.acquire(1);
      s.release(1);
      out.lat.push_back(us(steady::now() - t0));
      ++out.ops;
    }
  };
  measure_threads(meter, r, sync_threads, run.warm_s, run.case_s, body, &k.c);
  return std::move(r);
}

// The same 16 threads with a blocking connection each and no library: what any blocking client
// with a connection per thread can reach here (B2-sync-raw's yardstick, for the semaphore).
row sync_raw_pairs(const section_run& run, raw_conn& meter, const std::string& key) {
  row r;
  r.name = "B5-sem-sync-raw";
  meter.command({"SET", key, std::to_string(ample)});
  const sem_requests rq(key);
  std::atomic<std::uint32_t> next_tag{16};
  auto body = [&](int, std::atomic<bool>& stop, thread_results& out) {
    raw_conn rc(run.cfg);
    const std::uint32_t tag = next_tag.fetch_add(2);
    std::uint64_t serial = 0;
    out.lat.reserve(1 << 18);
    while (!stop.load(std::memory_order_relaxed)) {
      stream acq, rel;
      rq.acquire(acq, id32(tag, serial), id32(tag + 1, serial - 1));
      rq.release(rel, id32(tag + 1, serial), id32(tag, serial));
      ++serial;
      auto t0 = steady::now();
      rc.send(acq.payload);
      auto ta = rc.read(1);
      rc.send(rel.payload);
      auto tr = rc.read(1);
      if (ta.int_sum != 1 || tr.integer != 1)
        throw std::runtime_error("B5-sem-sync-raw: a pair did not take and give back: " + ta.first_error +
                                 tr.first_error);
      out.lat.push_back(us(steady::now() - t0));
      ++out.ops;
    }
  };
  measure_threads(meter, r, sync_threads, run.warm_s, run.case_s, body, nullptr);
  r.rt_per_op = 2;  // no client to count them
  return r;
}

row async_pairs(const section_run& run, raw_conn& meter, const std::string& key) {
  sem_case k(run, "B5-sem-async", key, ample);
  auto& r = k.r;
  // Everything below but the launch runs on the client's I/O thread (the handlers' executor).
  std::unique_ptr<async_chains> chains;
  auto step = [&](std::size_t i) {
    k.sem.async_try_acquire(1, std::nullopt, [&, i](std::error_code ec, bool got) {
      if (ec || !got) return chains->failed(i, "async_try_acquire: " + (ec ? ec.message() : "not granted"));
      k.sem.async_release(1, [&, i](std::error_code ec2) {
        if (ec2) return chains->failed(i, "async_release: " + ec2.message());
        chains->pair_done(i);
      });
    });
  };
  chains = std::make_unique<async_chains>(static_cast<std::size_t>(async_owners), step);
  chains->run(run.warm_s, false, nullptr, nullptr);
  snap a, b;
  auto [pairs, lat] = chains->run(run.case_s, true, [&] { a = take(meter, &k.c); }, [&] { b = take(meter, &k.c); });
  fill(r, a, b, pairs, lat);
  r.num("owners", async_owners);
  return std::move(r);
}

// ---- B5-sem-handoff ----------------------------------------------------------------------------

// 16 threads contend for 2 permits: acquire(1) (waiting), hold 1 ms, release(1), pause. The pause is
// 5 ms where B3t's is 10 ms: with two permits B3t's pause would leave them idle part of the time
// (16 / 11 ms = 1,450 acquisitions/s wanted, about 1,700/s possible), and a grant that finds a
// permit free is no hand-off. With 5 ms, 16 / 6 ms = 2,700/s are wanted: a waiter is always there.
//
// Hand-off latency, B3t's gap generalized to several permits: each release is stamped just before
// release() is called, into a queue of free permits; each grant takes the oldest stamp, and its gap
// is grant time - stamp: how long a permit stayed free after its release call. With one permit it is
// B3t's gap exactly.
row handoff(const section_run& run, raw_conn& meter, const std::string& key, double floor_rtt_us) {
  constexpr int owners = 16;
  constexpr long long permits = 2;
  constexpr auto hold = 1000us;
  constexpr auto pause = 5ms;
  sem_case k(run, "B5-sem-handoff", key, permits);
  auto& r = k.r;
  std::mutex free_mu;
  std::deque<long long> free_since;  // steady ns of each release not yet taken; 0: an initial permit
  std::vector<double> hold_s(owners);
  // Grants that found a permit free when their caller began (no hand-off: the caller may have
  // overtaken a woken waiter, which then tries once more), and releases made while another
  // released permit was still free: the second message's count includes the first one's permit,
  // whose waiter is still trying and is not counted off (lock_service_wait.cpp, wake_units), so
  // one more waiter than there are permits is woken and one attempt finds none.
  long long found_free = 0, overlapping = 0;
  auto body = [&](int t, std::atomic<bool>& stop, thread_results& out) {
    auto s = k.sem;
    out.lat.reserve(1 << 16);
    while (!stop.load(std::memory_order_relaxed)) {
      auto since = steady::now();
      s.acquire(1);
      auto got = steady::now();
      long long stamp = 0;
      {
        std::lock_guard g(free_mu);
        if (!free_since.empty()) {
          stamp = free_since.front();
          free_since.pop_front();
        }
        if (stamp < since.time_since_epoch().count()) ++found_free;
      }
      if (stamp != 0) out.lat.push_back(static_cast<float>((got.time_since_epoch().count() - stamp) / 1000.0));
      ++out.ops;
      std::this_thread::sleep_for(hold);
      auto released = steady::now();
      hold_s[static_cast<std::size_t>(t)] += seconds(got, released);
      {
        std::lock_guard g(free_mu);
        if (!free_since.empty()) ++overlapping;
        free_since.push_back(released.time_since_epoch().count());
      }
      s.release(1);
      std::this_thread::sleep_for(pause);
    }
  };
  auto reset = [&] {
    free_since.assign(static_cast<std::size_t>(permits), 0);
    std::fill(hold_s.begin(), hold_s.end(), 0.0);
    found_free = overlapping = 0;
  };
  reset();
  run_threads(owners, run.warm_s, body, nullptr, nullptr);
  reset();
  snap a, b;
  auto res = run_threads(owners, run.case_s, body, [&] { a = take(meter, &k.c); }, [&] { b = take(meter, &k.c); });
  std::vector<float> gaps;
  double acq = 0, held = 0;
  long long mn = -1, mx = 0;
  for (std::size_t t = 0; t < res.size(); ++t) {
    acq += static_cast<double>(res[t].ops);
    gaps.insert(gaps.end(), res[t].lat.begin(), res[t].lat.end());
    held += hold_s[t];
    mn = mn < 0 ? res[t].ops : std::min(mn, res[t].ops);
    mx = std::max(mx, res[t].ops);
  }
  fill(r, a, b, acq, gaps);  // p50/p99: the hand-off gap
  const double hold_us = acq > 0 ? held * 1e6 / acq : 0;
  r.num("gap_p90_us", percentile(gaps, 0.9));
  r.num("gap_max_us", gaps.empty() ? 0.0 : *std::max_element(gaps.begin(), gaps.end()));
  r.num("gap_p50_rtt", r.p50_us / floor_rtt_us);
  r.num("gap_p99_rtt", r.p99_us / floor_rtt_us);
  r.num("owners", owners);
  r.num("permits", static_cast<double>(permits));
  r.num("hold_us", hold_us);
  r.num("pause_ms", static_cast<double>(pause.count()));
  r.num("found_free_share", acq > 0 ? static_cast<double>(found_free) / acq : 0);
  r.num("overlapping_release_share", acq > 0 ? static_cast<double>(overlapping) / acq : 0);
  // Each acquisition: one release and one granted attempt; the rest of the commands were attempts
  // that found no permit (the pub/sub ones aside).
  r.num("busy_attempts_per_op", r.rt_per_op - r.get("pubsub_cmd_per_op") - 2);
  r.num("acq_per_owner_min", static_cast<double>(mn));
  r.num("acq_per_owner_max", static_cast<double>(mx));
  // The best a hand-off can do is B3t's: the release's round trip, then the woken waiter's
  // acquisition (2 sequential round trips), per permit.
  r.has_ceiling = true;
  r.ceiling = static_cast<double>(permits) * 1e6 / (hold_us + 2 * floor_rtt_us);
  r.ratio = r.ops_per_s / r.ceiling;
  r.num("bound_gap_us", 2 * floor_rtt_us);
  r.note = "gap p50 " + num("%.1f", r.p50_us / floor_rtt_us) + " RT; found a free permit " +
           num("%.0f%%", 100 * r.get("found_free_share")) + "; overlapping releases " +
           num("%.0f%%", 100 * r.get("overlapping_release_share")) +
           "; per owner " + std::to_string(mn) + ".." + std::to_string(mx) + "; hold " + num("%.0f", hold_us) +
           " us; " + num("%.2f", r.get("busy_attempts_per_op")) + " busy attempts/acq";
  return std::move(r);
}

}  // namespace

const std::vector<std::string>& semaphore_case_names() {
  static const std::vector<std::string> names{"B5-sem-sync", "B5-sem-sync-raw", "B5-sem-async", "B5-sem-handoff",
                                              "B5-permits-watchdog"};
  return names;
}

void run_semaphore_cases(const section_run& run, double floor_rtt_us) {
  const auto& names = semaphore_case_names();
  if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return run.wanted(n); })) return;
  std::unique_ptr<raw_conn> meter;
  ceilings c;
  std::string failed;  // the ceiling's error, given to every case that needs it
  try {
    meter = std::make_unique<raw_conn>(run.cfg);
    if (std::any_of(names.begin(), names.begin() + 3, [&](const std::string& n) { return run.wanted(n); }))
      c = measure_ceiling(run, *meter, run.prefix + "sem-ceiling");
  } catch (const std::exception& e) {
    failed = e.what();
  }
  const std::string key = run.prefix + "sem:";
  // Case `name` on the semaphore key + `suffix`, which is deleted after it with its latches.
  auto attempt = [&](const std::string& name, bool needs_ceiling, const char* suffix, const std::function<row()>& fn) {
    if (!run.wanted(name)) return;
    if (!failed.empty() && (needs_ceiling || !meter)) {
      row r;
      r.name = name;
      r.error = "semaphore ceiling: " + failed;
      return run.emit(std::move(r));
    }
    run.emit(attempt_row(name, fn));
    try {
      drop(*meter, key + suffix);
    } catch (const std::exception&) {  // the next case's own set-up reports a server that is gone
    }
  };
  double library_sync = 0;  // B5-sem-sync's pairs/s, for the raw row's library_share
  attempt("B5-sem-sync", true, "sync", [&] {
    auto r = sync_pairs(run, *meter, key + "sync");
    against(r, c.best, c, true);
    library_sync = r.ops_per_s;
    return r;
  });
  attempt("B5-sem-sync-raw", true, "sync-raw", [&] {
    auto r = sync_raw_pairs(run, *meter, key + "sync-raw");
    against(r, c.best, c, true);
    r.note.replace(0, r.note.find("; redis"), "vs semaphore pair ceiling; no library, a connection per thread");
    if (library_sync > 0) {
      r.num("library_share", library_sync / r.ops_per_s);
      r.note += "; B5-sem-sync " + num("%.2f", library_sync / r.ops_per_s) + "x this";
    }
    return r;
  });
  attempt("B5-sem-async", true, "async", [&] {
    auto r = async_pairs(run, *meter, key + "async");
    against(r, c.best, c, false);
    return r;
  });
  attempt("B5-sem-handoff", false, "handoff", [&] { return handoff(run, *meter, key + "handoff", floor_rtt_us); });
  if (run.watchdog_locks > 0)
    attempt("B5-permits-watchdog", false, "permits", [&] {
      return permits_watchdog(run, key + "permits", run.watchdog_locks, run.watchdog_window_s);
    });
}

}  // namespace redlease::cli::bench
