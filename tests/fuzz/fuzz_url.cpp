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
  // What it accepts is a valid setting, and its redacted form reads back to the same address and
  // cluster settings (Sentinel and unix URLs aside).
  if (!c.invalid_setting().empty()) std::abort();
  if (c.unix_socket.empty() && c.sentinel.nodes.empty()) {
    auto back = redlease::config::from_url(c.redacted_url(), ec);
    if (ec || back.host != c.host || back.port != c.port || back.database != c.database ||
        back.cluster.mode != c.cluster.mode || back.cluster.sharded_pubsub != c.cluster.sharded_pubsub ||
        back.cluster.seeds.size() != c.cluster.seeds.size())
      std::abort();
    for (std::size_t i = 0; i < c.cluster.seeds.size(); ++i) {
      const auto &want = c.cluster.seeds[i], &got = back.cluster.seeds[i];
      if (got.host != want.host || got.port != want.port) std::abort();
    }
  }
  return 0;
}
