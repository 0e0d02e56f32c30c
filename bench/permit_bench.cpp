// SPDX-License-Identifier: MIT
// B5-permits-watchdog: many permits of one permit_semaphore, each a hold that the watchdog renews,
// measured as B4 measures held locks (redlease_bench.cpp, watchdog_scale). BENCHMARKS.md, "B5:
// semaphores", says what it reports.
#include "permit_bench.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/hex.hpp"
#include "redlease/redlease.hpp"
#include "redlease_lua.hpp"
#include "watchdog_support.hpp"

namespace redlease::cli::bench {
namespace {

using namespace std::chrono_literals;
namespace lua = redlease::detail::lua;

// The least lease left over the permits out, on the server's clock (the zset's lowest score is the
// nearest expiry): B4's least PTTL, in one call.
constexpr std::string_view least_lease =
    "local t = redis.call('time') local z = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES') "
    "if #z == 0 then return -2 end "
    "return tonumber(z[2]) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))";

// The permits out whose lease has not run out.
constexpr std::string_view live_permits =
    "local t = redis.call('time') "
    "return redis.call('zcount', KEYS[1], '(' .. (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)), '+inf')";

// Takes `n` permits of `sem` one by one, 1,000 acquisitions in flight (as acquire_all takes B4's
// locks); a later loss of each counts into `lost`.
double acquire_permits(permit_semaphore& sem, std::vector<permit>& out, std::size_t n, std::atomic<long long>& lost,
                       std::vector<float>& lat_us) {
  out.resize(n);
  return run_chained(n, [&](std::size_t i, std::function<void(std::string)> finish) {
    sem.async_try_acquire(1, std::nullopt, std::nullopt,
                          [&, i, finish = std::move(finish)](std::error_code ec, permit p) {
                            if (p) p.on_lost([&](const lost_info&) { ++lost; });
                            out[i] = std::move(p);
                            finish(ec || !out[i] ? "async_try_acquire: " + (ec ? ec.message() : "no permit")
                                                 : std::string());
                          });
  }, lat_us);
}

}  // namespace

row permits_watchdog(const section_run& run, const std::string& key, std::size_t n, double window_s) {
  row r;
  r.name = "B5-permits-watchdog";
  raw_conn meter(run.cfg);
  const std::string zset = describe(lock_kind::permit_semaphore, key).keys.at(1).key;
  // Loaded first, as the run's ceiling loads B4's renew.lua: a steady state. On a server that has
  // not seen them, the first tick's calls all go out as EVALSHA, are answered NOSCRIPT and are sent
  // again as EVAL (BENCHMARKS.md, "B5: semaphores").
  for (const auto* s : {&lua::permits_acquire, &lua::permits_release, &lua::permits_renew})
    if (meter.command({"SCRIPT", "LOAD", s->body}).str != s->sha1)
      throw std::runtime_error("SCRIPT LOAD " + std::string(s->name) + ": unexpected reply");
  auto cfg = run.cfg;
  cfg.watchdog_timeout = watchdog_lease;
  std::atomic<long long> lost{0};
  std::vector<float> acq_lat;
  std::vector<std::string> ids;  // every permit's id as the zset holds it, for the floor
  std::size_t heap0 = 0, heap1 = 0, rss0 = 0, rss1 = 0;
  double acquire_s = 0;
  long long min_lease = -1, alive = 0, watched = 0;
  snap a, b;
  {
    client c{cfg};
    auto sem = c.permit_semaphore(key);
    if (!sem.try_set_permits(static_cast<long long>(n)))
      throw std::runtime_error(r.name + ": the semaphore " + key + " was already set");
    sem.acquire(1).release();  // the client's paths (and allocator) warm before the memory baseline
    std::vector<permit> held;
    held.reserve(n);
    heap0 = heap_in_use();
    rss0 = rss_bytes();
    acquire_s = acquire_permits(sem, held, n, lost, acq_lat);
    // Hold them: the watchdog alone talks to the server. The least lease left, every 200 ms.
    a = take(meter, &c);
    const auto end = a.t + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(window_s));
    while (steady::now() < end) {
      auto t = meter.command({"EVAL", least_lease, "1", zset});
      if (t.type == ':' && (min_lease < 0 || t.integer < min_lease)) min_lease = t.integer;
      std::this_thread::sleep_for(std::min<steady::duration>(200ms, end - steady::now()));
    }
    b = take(meter, &c);
    heap1 = heap_in_use();
    rss1 = rss_bytes();
    watched = static_cast<long long>(c.stats().watched_locks);
    alive = meter.command({"EVAL", live_permits, "1", zset}).integer;
    for (auto& p : held)
      for (auto& id : p.ids()) ids.push_back(detail::from_hex(id).value_or(id));  // the zset holds the bytes
    for (auto& p : held) {
      std::error_code ec;  // a lost permit shows in `lost`; it has nothing left to give back
      p.release(ec);
    }
  }
  // The server's own floor, in the same run: every permit's expiry moved by one `ZADD XX` member,
  // 1,000 per command, all in one write: no script, no check. The permits are put back first (the
  // releases removed them); the best of three passes.
  const std::string score = "9000000000000";
  auto zadd_all = [&](bool xx) {
    std::string q;
    std::size_t cmds = 0;
    for (std::size_t i = 0; i < ids.size(); i += 1000, ++cmds) {
      std::vector<std::string> args{"ZADD", zset};
      if (xx) args.emplace_back("XX");
      for (std::size_t j = i; j < std::min(ids.size(), i + 1000); ++j) {
        args.push_back(score);
        args.push_back(ids[j]);
      }
      encode(q, args);
    }
    meter.send(q);
    meter.read(cmds);
  };
  zadd_all(false);
  double floor_cpu_s = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const double c0 = redis_cpu_seconds(meter);
    zadd_all(true);
    const double used = redis_cpu_seconds(meter) - c0;
    floor_cpu_s = pass == 0 ? used : std::min(floor_cpu_s, used);
  }
  meter.command({"DEL", key, zset});

  const double secs = seconds(a.t, b.t);
  const double renewed = static_cast<double>(b.st.renewed_locks - a.st.renewed_locks);
  const double commands = static_cast<double>(b.st.commands - a.st.commands);
  const double redis_pct = 100 * (b.redis - a.redis) / secs;
  const double floor_pct = 100 * floor_cpu_s / watchdog_interval_s;
  r.ops_per_s = renewed / secs;  // an op is one permit renewal
  r.rt_per_op = renewed > 0 ? commands / renewed : 0;
  r.redis_us_per_op = renewed > 0 ? (b.redis - a.redis) * 1e6 / renewed : 0;
  r.client_us_per_op = renewed > 0 ? (b.cpu - a.cpu) * 1e6 / renewed : 0;
  r.p50_us = percentile(acq_lat, 0.5);  // p50/p99: one permit's acquisition, 1,000 in flight
  r.p99_us = percentile(acq_lat, 0.99);
  // B4's fields (a hold is a permit here), so that --check and readers of B4's rows read these alike.
  const double heap_growth = static_cast<double>(heap1) - static_cast<double>(heap0);
  fill_held(r, {static_cast<double>(n), static_cast<double>(alive), static_cast<double>(watched),
                static_cast<double>(lost.load()), heap_growth, static_cast<double>(rss1) - static_cast<double>(rss0),
                static_cast<double>(min_lease), acquire_s}, a.st, b.st, secs);
  r.num("redis_cpu_pct", redis_pct);
  r.num("client_cpu_pct", 100 * (b.cpu - a.cpu) / secs);
  r.num("redis_floor_cpu_pct", floor_pct);
  if (floor_pct > 0) r.num("redis_cpu_to_floor", redis_pct / floor_pct);
  r.num("window_s", secs);
  r.note = std::to_string(n) + " permits: " + num("%.1f", r.get("renew_calls_per_interval")) + " script calls and " +
           num("%.1f", r.get("writes_per_interval")) + " writes/interval, " +
           num("%.2f", r.get("renewals_per_lock_per_interval")) + " renewals/permit/interval, redis " +
           num("%.2f%%", redis_pct) + " (floor " + num("%.2f%%", floor_pct) + "), client " +
           num("%.2f%%", r.get("client_cpu_pct")) + ", " + num("%.0f", r.get("bytes_per_lock")) +
           " B/permit heap, alive " + std::to_string(alive) + ", min lease " + std::to_string(min_lease) + " ms";
  return r;
}

}  // namespace redlease::cli::bench
