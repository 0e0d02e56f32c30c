// SPDX-License-Identifier: MIT
// Fuzzes what the client makes of a Sentinel's replies (decoded by the same RESP decoder as every
// reply): SENTINEL MASTER, GET-MASTER-ADDR-BY-NAME, SENTINEL SENTINELS and +switch-master payloads.
// Never crashes; an accepted address always has a host and a port in 1..65535; the directory holds
// distinct addresses and keeps the configured one and the one that answered; the master tracker
// never goes back to an older epoch.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "net/resp.hpp"
#include "topology/sentinel_fsm.hpp"

using namespace redlease;
using namespace redlease::detail;

namespace {

void check(const master_answer& a) {
  if (!a.ec && (a.address.host.empty() || a.address.port == 0)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto a = parse_switch_master(text, "mymaster"); a && (a->host.empty() || a->port == 0)) std::abort();

  resp_reader r(resp_limits{16, 1 << 14});
  if (!r.feed(text.data(), text.size())) return 0;
  sentinel_directory dir({{"127.0.0.1", 26379}});
  master_tracker tracker;
  long long last_epoch = -1;
  for (int n = 0; n < 64; ++n) {
    reply rep;
    if (r.next(rep) != resp_reader::status::reply) break;
    check(parse_master_addr(rep, "s", "mymaster"));
    auto info = parse_master_info(rep, "s", "mymaster");
    check(info);
    if (!info.ec) {
      auto v = tracker.answer(info.address, info.epoch);
      if (info.epoch >= 0 && v != master_tracker::verdict::stale) {
        if (info.epoch < last_epoch) std::abort();
        last_epoch = info.epoch;
      }
    }
    std::size_t at = static_cast<std::size_t>(n);
    const node_address answering = dir.current(at);
    std::size_t before = dir.size();
    std::size_t added = dir.learn(rep, at);
    if (dir.size() > before + added || dir.nodes()[0] != node_address{"127.0.0.1", 26379} ||
        dir.current(at) != answering)
      std::abort();
    for (std::size_t i = 0; i < dir.size(); ++i)
      for (std::size_t j = i + 1; j < dir.size(); ++j)
        if (dir.nodes()[i] == dir.nodes()[j]) std::abort();
  }
  return 0;
}
