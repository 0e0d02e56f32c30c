// SPDX-License-Identifier: MIT
// Fuzzes what the client makes of a cluster's replies (decoded by the same RESP decoder as every
// reply): CLUSTER SLOTS tables, MOVED/ASK redirects and the other cluster error replies. Never
// crashes; an accepted table routes every covered slot to a node with a host and a port in
// 1..65535, covers at most 16384 slots, and only grows by what its ranges say; an accepted
// redirect names a slot below 16384 and a node with a port.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "net/resp.hpp"
#include "topology/cluster_map.hpp"

using namespace redlease;
using namespace redlease::detail;

namespace {

void check(const cluster_map& m) {
  if (m.covered() > cluster_slot_count) std::abort();
  std::size_t covered = 0;
  for (std::uint32_t slot = 0; slot < cluster_slot_count; ++slot) {
    const cluster_node* n = m.owner(static_cast<std::uint16_t>(slot));
    if (n == nullptr) continue;
    ++covered;
    if (n->address.host.empty() || n->address.port == 0) std::abort();
  }
  if (covered != m.covered()) std::abort();
  for (const auto& r : m.ranges())
    if (r.first > r.last || r.last >= cluster_slot_count || r.master >= m.nodes().size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto r = parse_cluster_redirect(text, "10.0.0.1"))
    if (r->slot >= cluster_slot_count || r->node.host.empty() || r->node.port == 0) std::abort();
  (void)classify_cluster_error(text);

  resp_reader reader(resp_limits{16, 1 << 14});
  if (!reader.feed(text.data(), text.size())) return 0;
  cluster_map current;
  for (int n = 0; n < 16; ++n) {
    reply rep;
    if (reader.next(rep) != resp_reader::status::reply) break;
    auto res = parse_cluster_slots(rep, "10.0.0.1");
    if (res.ec) {
      if (res.map.covered() != 0) std::abort();  // a refused table is empty
      continue;
    }
    check(res.map);
    if (accept_cluster_map(current, res.map)) current = std::move(res.map);
    if (rep.is_error())
      if (auto r = parse_cluster_redirect(rep.str, "10.0.0.1"); r && r->node.port == 0) std::abort();
  }
  return 0;
}
