// SPDX-License-Identifier: MIT
// Built against an installed redlease with redlease::prometheus by tests/cmake/consumer_test.cmake:
// the exported target brings prometheus-cpp::core, and the families of an empty snapshot are made.
#include <redlease/prometheus.hpp>
#include <redlease/version.hpp>

#include <iostream>

int main() {
  const auto families = redlease::prometheus_families(redlease::client_stats{});
  std::cout << "redlease " << REDLEASE_VERSION_STRING << " " << families.size() << " families\n";
  return families.empty() ? 1 : 0;
}
