// SPDX-License-Identifier: MIT
#include <redlease/redlease.hpp>

#include <iostream>

int main() {
  std::error_code ec;
  auto c = redlease::config::from_url("redis://127.0.0.1:1", ec);
  std::cout << "redlease " << redlease::version << " " << c.redacted_url() << "\n";
  return ec ? 1 : 0;
}
