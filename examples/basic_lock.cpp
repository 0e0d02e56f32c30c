// SPDX-License-Identifier: MIT
// Takes and releases a lock. Usage: example_basic_lock [redis://host:port]
#include <iostream>
#include <mutex>

#include "redlease/redlease.hpp"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  try {
    redlease::client c{redlease::config::from_url(argc > 1 ? argv[1] : "redis://127.0.0.1:6379")};
    redlease::lock l = c.lock("example:orders:42");
    {
      std::lock_guard guard(l);  // waits via pub/sub; the watchdog renews the 30 s lease
      std::cout << "held: hold_count=" << l.hold_count() << " ttl=" << l.remaining_ttl().count() << "ms\n";
    }
    std::cout << "released: locked=" << std::boolalpha << l.is_locked() << "\n";
  } catch (const redlease::error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
