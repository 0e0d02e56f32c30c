// SPDX-License-Identifier: MIT
// The cluster's layout for the CLI (cluster_nodes.hpp). The library keeps its slot table to itself,
// so the CLI reads its own: one CLUSTER SLOTS, parsed for what status and doctor print.
#include "cluster_nodes.hpp"

#include <algorithm>

#include "commands.hpp"
#include "info_parser.hpp"

namespace redlease::cli {

std::string cluster_node_address::name() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

long long cluster_master::slots() const {
  long long n = 0;
  for (auto [first, last] : ranges) n += last - first + 1;
  return n;
}

long long cluster_layout::covered() const {
  long long n = 0;
  for (const auto& m : masters) n += m.slots();
  return n;
}

const cluster_master* cluster_layout::master_of(int slot) const {
  for (const auto& m : masters)
    for (auto [first, last] : m.ranges)
      if (slot >= first && slot <= last) return &m;
  return nullptr;
}

namespace {

std::optional<cluster_node_address> address_of(const reply& node, const std::string& from_host) {
  if (!node.is_array() || node.elements.size() < 2) return std::nullopt;
  cluster_node_address a;
  a.host = node.elements[0].str;
  // A node that does not know its own address names none: it is the one that answered.
  if (a.host.empty() || a.host == "?") a.host = from_host;
  const reply& p = node.elements[1];
  a.port = p.is_integer() ? static_cast<int>(p.integer) : static_cast<int>(parse_integer(p.str).value_or(0));
  if (a.port <= 0 || a.port > 65535) return std::nullopt;  // no port for this client (TLS-only)
  return a;
}

}  // namespace

std::optional<cluster_layout> read_cluster(client& c) {
  if (c.get_config().cluster.mode == cluster_mode::off) return std::nullopt;
  std::error_code ec;
  auto r = c.command({"CLUSTER", "SLOTS"}, ec);
  if (ec || !r.is_array()) return std::nullopt;
  cluster_layout out;
  for (const auto& range : r.elements) {
    if (!range.is_array() || range.elements.size() < 3) continue;
    auto master = address_of(range.elements[2], c.get_config().host);
    if (!master) continue;
    auto it = std::find_if(out.masters.begin(), out.masters.end(),
                           [&](const cluster_master& m) { return m.address.name() == master->name(); });
    if (it == out.masters.end()) it = out.masters.insert(out.masters.end(), cluster_master{*master, {}, {}});
    it->ranges.emplace_back(static_cast<int>(range.elements[0].integer), static_cast<int>(range.elements[1].integer));
    for (std::size_t i = 3; i < range.elements.size(); ++i) {
      auto replica = address_of(range.elements[i], c.get_config().host);
      if (!replica) continue;
      bool known = std::any_of(it->replicas.begin(), it->replicas.end(),
                               [&](const cluster_node_address& x) { return x.name() == replica->name(); });
      if (!known) it->replicas.push_back(*replica);
    }
  }
  std::sort(out.masters.begin(), out.masters.end(), [](const cluster_master& a, const cluster_master& b) {
    return a.ranges.front().first < b.ranges.front().first;
  });
  return out;
}

int slot_of(client& c, std::string_view key) {
  return static_cast<int>(lock_command(c, key, {"CLUSTER", "KEYSLOT", key}).integer);
}

std::unique_ptr<client> node_client(const config& base, const cluster_node_address& a) {
  config cfg = base;
  cfg.host = a.host;
  cfg.port = static_cast<std::uint16_t>(a.port);
  cfg.cluster.mode = cluster_mode::off;
  cfg.cluster.seeds.clear();
  return std::make_unique<client>(std::move(cfg));
}

}  // namespace redlease::cli
