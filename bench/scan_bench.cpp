// SPDX-License-Identifier: MIT
// T1-scan: the cost of one scan pass of `redlease top` and `redlease exporter` over many locks,
// measured on the server (INFO cpu) as well as on the wall. BENCHMARKS.md, "T1: top and the
// exporter", says what it reports.
#include "scan_bench.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "lock_scan.hpp"

namespace redlease::cli::bench {

row scan_pass(const section_run& run, const std::string& name, std::size_t n) {
  row r;
  r.name = name;
  raw_conn meter(run.cfg);
  const std::string base = run.prefix + "scan:";
  // The locks, 1,000 commands a write.
  std::string batch;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string key = base + std::to_string(i);
    encode(batch, {"HSET", key, run.fake_uuid + ":" + std::to_string(i % 64 + 1), "1"});
    encode(batch, {"PEXPIRE", key, "300000"});
    if ((i + 1) % 500 == 0 || i + 1 == n) {
      meter.send(batch);
      meter.read(((i % 500) + 1) * 2);
      batch.clear();
    }
  }
  lock_scanner scanner{run.cfg};
  scan_options o;
  o.match = base + "*";
  std::vector<double> wall, cpu, client;
  std::size_t found = 0, commands = 0;
  for (int pass = 0; pass < 3; ++pass) {
    scan_cost cost;
    const double c0 = redis_cpu_seconds(meter), p0 = process_cpu_seconds();
    found = scanner.scan(o, &cost).size();
    client.push_back(process_cpu_seconds() - p0);
    cpu.push_back(redis_cpu_seconds(meter) - c0);
    wall.push_back(std::chrono::duration<double>(cost.took).count());
    commands = cost.commands;
  }
  // The floor: SCAN alone over the same keys (no pass can do less than enumerate them).
  std::vector<double> floor;
  for (int pass = 0; pass < 3; ++pass) {
    const double c0 = redis_cpu_seconds(meter);
    std::string cursor = "0";
    do {
      auto step = scanner.routed().command({"SCAN", cursor, "MATCH", o.match, "COUNT", "1000"});
      cursor = step.elements.at(0).str;
    } while (cursor != "0");
    floor.push_back(redis_cpu_seconds(meter) - c0);
  }
  std::sort(floor.begin(), floor.end());
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  std::sort(client.begin(), client.end());
  const double w = wall[1], c = cpu[1];
  if (found != n) r.error = "found " + std::to_string(found) + " of " + std::to_string(n) + " locks";
  // An op is one lock of the pass: the latency columns are the pass's (median and slowest of three),
  // RT/op the commands sent per lock.
  r.ops_per_s = static_cast<double>(n) / w;
  r.p50_us = w * 1e6;
  r.p99_us = wall.back() * 1e6;
  r.rt_per_op = static_cast<double>(commands) / static_cast<double>(n);
  r.num("locks", static_cast<double>(n));
  r.num("pass_ms", w * 1000);
  r.num("redis_cpu_ms_per_pass", c * 1000);
  r.num("client_cpu_ms_per_pass", client[1] * 1000);
  r.num("redis_cpu_ms_scan_alone", floor[1] * 1000);
  r.num("commands_per_lock", static_cast<double>(commands) / static_cast<double>(n));
  r.num("redis_pct_at_1s", c * 100);
  r.num("redis_pct_at_15s", c * 100 / 15);
  const double interval = std::max(1.0, 20 * w);
  r.num("top_interval_s", interval);
  r.num("redis_pct_top_capped", c * 100 / interval);
  r.note = num("%.0f", w * 1000) + " ms a pass (client CPU " + num("%.0f", client[1] * 1000) + " ms), Redis " +
           num("%.0f", c * 1000) + " ms CPU (SCAN alone " + num("%.0f", floor[1] * 1000) + " ms): " +
           num("%.1f", c * 100) + " % at 1/s, " + num("%.2f", c * 100 / 15) + " % at 15 s; top's cap: every " +
           num("%.1f", interval) + " s (" + num("%.1f", c * 100 / interval) + " %)";
  // Clean up, 1,000 keys a command.
  std::vector<std::string> del{"UNLINK"};
  for (std::size_t i = 0; i < n; ++i) {
    del.push_back(base + std::to_string(i));
    if (del.size() == 1001 || i + 1 == n) {
      meter.command(del);
      del.resize(1);
    }
  }
  return r;
}

}  // namespace redlease::cli::bench
