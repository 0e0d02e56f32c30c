// SPDX-License-Identifier: MIT
// A separate process for the multi-process mutual-exclusion tests:
//   lock_worker URL LOCK COUNTER THREADS ITERATIONS reentrant|mutex
// Each thread loops: lock; GET counter; SET counter+1; unlock. Exits 0 when all went well.
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "redlease/redlease.hpp"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: lock_worker URL LOCK COUNTER THREADS ITERATIONS reentrant|mutex\n";
    return 64;
  }
  try {
    redlease::client c{redlease::config::from_url(argv[1])};
    std::string lock_name = argv[2], counter = argv[3], kind = argv[6];
    int threads = std::atoi(argv[4]), iterations = std::atoi(argv[5]);
    std::vector<std::thread> ts;
    std::atomic<int> failures{0};
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&] {
        try {
          for (int i = 0; i < iterations; ++i) {
            auto work = [&](auto& l) {
              l.lock();
              auto v = c.command({"GET", counter});
              long long n = v.is_nil() ? 0 : std::stoll(v.str);
              c.command({"SET", counter, std::to_string(n + 1)});
              l.unlock();
            };
            if (kind == "mutex") {
              auto m = c.mutex(lock_name);
              work(m);
            } else {
              auto l = c.lock(lock_name);
              work(l);
            }
          }
        } catch (const std::exception& e) {
          std::cerr << "lock_worker: " << e.what() << "\n";
          ++failures;
        }
      });
    }
    for (auto& t : ts) t.join();
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "lock_worker: " << e.what() << "\n";
    return 1;
  }
}
