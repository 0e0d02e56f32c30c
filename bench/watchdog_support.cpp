// SPDX-License-Identifier: MIT
#include "watchdog_support.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>

namespace redlease::cli::bench {

snap take(raw_conn& meter, const client* c) {
  snap s;
  s.redis = redis_cpu_seconds(meter);
  s.mem = std::strtod(info_field(meter, "memory", "used_memory").c_str(), nullptr);
  if (c) s.st = c->stats();
  s.cpu = process_cpu_seconds();
  s.csw = process_context_switches();
  s.t = steady::now();
  return s;
}

void fill_held(row& r, const held_figures& h, const client_stats& a, const client_stats& b, double secs) {
  const double intervals = secs / watchdog_interval_s;
  auto per_interval = [&](std::uint64_t from, std::uint64_t to) { return static_cast<double>(to - from) / intervals; };
  r.num("locks", h.holds);
  r.num("alive", h.alive);
  r.num("watched", h.watched);
  r.num("lost", h.lost);
  r.num("round_trips_per_interval", per_interval(a.commands, b.commands));
  r.num("renew_calls_per_interval", per_interval(a.renew_calls, b.renew_calls));
  r.num("writes_per_interval", per_interval(a.writes, b.writes));
  r.num("renewals_per_lock_per_interval", per_interval(a.renewed_locks, b.renewed_locks) / h.holds);
  r.num("bytes_per_lock", h.heap_growth / h.holds);
  r.num("rss_bytes_per_lock", h.rss_growth / h.holds);
  r.num("min_ttl_ms", h.min_ttl_ms);
  r.num("acquire_per_s", h.holds / h.acquire_s);
}

double run_chained(std::size_t n, const std::function<void(std::size_t, std::function<void(std::string)>)>& start,
                   std::vector<float>& lat_us) {
  std::atomic<std::size_t> next{0};
  std::atomic<int> live{0};
  std::promise<void> done;
  std::mutex error_mu;
  std::string error;
  std::vector<steady::time_point> t0(n);
  lat_us.assign(n, 0);
  std::function<void()> chain = [&] {
    std::size_t i = next.fetch_add(1);
    if (i >= n) {
      if (live.fetch_sub(1) == 1) done.set_value();
      return;
    }
    t0[i] = steady::now();
    start(i, [&, i](std::string why) {
      lat_us[i] = us(steady::now() - t0[i]);
      if (!why.empty()) {
        std::lock_guard g(error_mu);
        if (error.empty()) error = std::move(why);
      }
      chain();
    });
  };
  const int window = static_cast<int>(std::min<std::size_t>(1000, n));
  if (window == 0) return 0;
  live = window;
  auto fut = done.get_future();
  auto ta = steady::now();
  for (int w = 0; w < window; ++w) chain();
  fut.wait();
  const double secs = seconds(ta, steady::now());
  if (!error.empty()) throw std::runtime_error(error);
  return secs;
}

double acquire_all(client& c, const std::vector<std::string>& keys, std::atomic<long long>& lost,
                   std::vector<float>& lat_us) {
  const owner_id owner = c.new_owner();
  return run_chained(keys.size(), [&](std::size_t i, std::function<void(std::string)> finish) {
    auto l = c.lock(keys[i]);
    l.on_lost([&](const lost_info&) { ++lost; });
    l.async_lock(owner, [finish = std::move(finish)](std::error_code ec) {
      finish(ec ? "async_lock: " + ec.message() : std::string());
    });
  }, lat_us);
}

tally keys_command(raw_conn& c, std::string_view cmd, const std::vector<std::string>& keys, std::size_t per_cmd,
                   std::initializer_list<std::string_view> tail) {
  std::string q;
  std::size_t cmds = 0;
  std::vector<std::string> args;
  for (std::size_t i = 0; i < keys.size(); i += per_cmd) {
    args.assign(1, std::string(cmd));
    for (std::size_t j = i; j < std::min(keys.size(), i + per_cmd); ++j) args.push_back(keys[j]);
    for (auto t : tail) args.emplace_back(t);
    encode(q, args);
    ++cmds;
  }
  if (cmds == 0) return {};
  c.send(q);
  return c.read(cmds);
}

std::optional<long long> min_pttl(raw_conn& c, const std::vector<std::string>& keys) {
  auto t = keys_command(c, "PTTL", keys, 1);
  if (t.integer != keys.size()) return std::nullopt;
  return t.int_min;
}

std::vector<std::string> spread_sample(const std::vector<std::string>& keys, std::size_t count) {
  std::vector<std::string> out;
  count = std::min(count, keys.size());
  for (std::size_t i = 0; i < count; ++i) out.push_back(keys[i * keys.size() / count]);
  return out;
}

double command_calls(raw_conn& c, std::string_view name) {
  auto v = info_field(c, "commandstats", "cmdstat_" + std::string(name));
  auto pos = v.find("calls=");
  return pos == std::string::npos ? 0 : std::strtod(v.c_str() + pos + 6, nullptr);
}

}  // namespace redlease::cli::bench
