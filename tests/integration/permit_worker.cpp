// SPDX-License-Identifier: MIT
// A separate process for the permit-expirable semaphore's crash and freeze tests:
//   permit_worker URL NAME WATCHDOG_MS
// Takes one permit kept by the watchdog, prints "held <id>", then "lost <reason>" if it is lost
// (exit 3), or releases it and exits 0 when its stdin closes.
#include <atomic>
#include <iostream>
#include <string>

#include "redlease/redlease.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: permit_worker URL NAME WATCHDOG_MS\n";
    return 64;
  }
  try {
    auto cfg = redlease::config::from_url(argv[1]);
    cfg.watchdog_timeout = std::chrono::milliseconds(std::stoll(argv[3]));
    redlease::client c{cfg};
    auto p = c.permit_semaphore(argv[2]).acquire(1);
    std::atomic<bool> lost{false};
    p.on_lost([&](const redlease::lost_info& i) {
      lost = true;  // before the line: the test closes stdin once it reads it
      std::cout << "lost " << static_cast<int>(i.reason) << std::endl;
    });
    std::cout << "held " << p.ids().at(0) << std::endl;
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line == "valid") std::cout << (p.valid() ? "valid yes" : "valid no") << std::endl;
    }
    if (lost) return 3;
    p.release();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "permit_worker: " << e.what() << "\n";
    return 1;
  }
}
