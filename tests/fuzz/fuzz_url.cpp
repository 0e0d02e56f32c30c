// SPDX-License-Identifier: MIT
// Fuzzes config::from_url: never crashes; what it accepts is self-consistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "redlease/config.hpp"
#include "redlease/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view url(reinterpret_cast<const char*>(data), size);
  std::error_code ec;
  auto c = redlease::config::from_url(url, ec);
  if (ec) {
    if (ec != redlease::errc::invalid_url && ec != redlease::errc::tls_not_supported) std::abort();
    return 0;
  }
  if (c.unix_socket.empty() && (c.port == 0 || c.host.empty())) std::abort();
  if (c.database < 0) std::abort();
  // The redacted form does not depend on the password's content: it never shows it.
  auto other = c;
  if (!other.password.empty()) other.password = "x";
  if (other.redacted_url() != c.redacted_url()) std::abort();
  return 0;
}
