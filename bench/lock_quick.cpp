// SPDX-License-Identifier: MIT
// Quick lock figures against a private redis-server (or argv[1]): lock+unlock pairs/s for 1 and 16
// threads on one client, and the wake-up latency of a waiter after an unlock. The full suite with
// ceilings comes with redlease-bench.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "local_server.hpp"
#include "redlease/redlease.hpp"

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

static double pairs_per_s(redlease::client& c, int threads, std::chrono::milliseconds d) {
  std::atomic<long long> pairs{0};
  std::vector<std::thread> ts;
  auto end = steady::now() + d;
  auto t0 = steady::now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      auto l = c.lock("quick:" + std::to_string(t));
      long long n = 0;
      while (steady::now() < end) {
        l.lock();
        l.unlock();
        ++n;
      }
      pairs += n;
    });
  }
  for (auto& t : ts) t.join();
  return pairs / std::chrono::duration<double>(steady::now() - t0).count();
}

int main(int argc, char** argv) {
  std::unique_ptr<redlease::local::redis_server> server;
  std::string url;
  if (argc > 1) {
    url = argv[1];
  } else {
    server = std::make_unique<redlease::local::redis_server>();
    url = server->url();
  }
  redlease::client c{redlease::config::from_url(url)};
  c.ping();
  pairs_per_s(c, 1, 300ms);  // warm up (scripts cached)
  std::cout << "lock+unlock pairs/s, 1 thread:   " << static_cast<long long>(pairs_per_s(c, 1, 2s)) << "\n";
  auto s0 = c.stats();
  std::cout << "lock+unlock pairs/s, 16 threads: " << static_cast<long long>(pairs_per_s(c, 16, 2s)) << "\n";
  auto s1 = c.stats();
  std::cout << "  commands per write (16 threads): "
            << static_cast<double>(s1.commands - s0.commands) / static_cast<double>(s1.writes - s0.writes) << "\n";

  // Wake-up latency: a holder releases while another thread waits.
  std::vector<double> lat;
  auto l = c.lock("quick:wake");
  for (int i = 0; i < 200; ++i) {
    l.lock();
    std::atomic<bool> waiting{false};
    std::atomic<long long> woke{0};
    std::thread w([&] {
      auto l2 = c.lock("quick:wake");
      waiting = true;
      l2.lock();
      woke = steady::now().time_since_epoch().count();
      l2.unlock();
    });
    while (!waiting) std::this_thread::yield();
    std::this_thread::sleep_for(2ms);  // let it subscribe and sleep
    auto t0 = steady::now().time_since_epoch().count();
    l.unlock();
    w.join();
    lat.push_back((woke - t0) / 1000.0);
  }
  std::sort(lat.begin(), lat.end());
  std::cout << "waiter wake-up after unlock (us): p50 " << lat[lat.size() / 2] << "  p99 "
            << lat[lat.size() * 99 / 100] << "\n";
}
