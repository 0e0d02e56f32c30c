// SPDX-License-Identifier: MIT
// Fuzzes the CLI's duration parser: never crashes; accepted values are in range.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "commands.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto d = redlease::cli::parse_duration(text);
  if (d && (d->count() < 0 || d->count() > 1'000'000'000'000LL)) std::abort();
  return 0;
}
