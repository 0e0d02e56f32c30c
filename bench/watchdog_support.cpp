// SPDX-License-Identifier: MIT
#include "watchdog_support.hpp"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <future>
#include <stdexcept>

namespace redlease::cli::bench {

double acquire_all(client& c, const std::vector<std::string>& keys, std::atomic<long long>& lost,
                   std::vector<float>& lat_us) {
  const std::size_t n = keys.size();
  const owner_id owner = c.new_owner();
  std::atomic<std::size_t> next{0};
  std::atomic<int> live{0};
  std::promise<void> done;
  std::string error;
  std::vector<steady::time_point> t0(n);
  lat_us.assign(n, 0);
  std::function<void()> chain = [&] {
    std::size_t i = next.fetch_add(1);
    if (i >= n) {
      if (live.fetch_sub(1) == 1) done.set_value();
      return;
    }
    auto l = c.lock(keys[i]);
    l.on_lost([&](const lost_info&) { ++lost; });
    t0[i] = steady::now();
    l.async_lock(owner, [&, i](std::error_code ec) {
      lat_us[i] = std::chrono::duration<float, std::micro>(steady::now() - t0[i]).count();
      if (ec && error.empty()) error = "async_lock: " + ec.message();
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
  const double secs = std::chrono::duration<double>(steady::now() - ta).count();
  if (!error.empty()) throw std::runtime_error(error);
  return secs;
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
