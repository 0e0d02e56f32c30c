// SPDX-License-Identifier: MIT
#include "cluster_view.hpp"

#include "commands.hpp"

namespace redlease::cli {

cluster_view::cluster_view(const config& cfg, cluster_layout l) : layout(std::move(l)) {
  for (const auto& m : layout.masters) {
    masters.push_back(node_client(cfg, m.address));
    for (const auto& r : m.replicas) replicas.push_back(node_client(cfg, r));
  }
}

client* cluster_view::master_client(const cluster_master* m) {
  return m == nullptr ? nullptr : masters[static_cast<std::size_t>(m - layout.masters.data())].get();
}

std::unique_ptr<cluster_view> read_cluster_view(client& c) {
  auto layout = read_cluster(c);
  if (!layout) return nullptr;
  return std::make_unique<cluster_view>(c.get_config(), std::move(*layout));
}

std::vector<long long> count_subscribers(client& c, const std::string& name, const std::vector<std::string>& channels,
                                         cluster_view* cv, const cluster_master* home) {
  std::vector<long long> out(channels.size(), 0);
  auto add = [&](const reply& r) {
    for (std::size_t i = 0; i + 1 < r.elements.size() && i / 2 < out.size(); i += 2)
      out[i / 2] += r.elements[i + 1].integer;
  };
  std::vector<std::string> cmd{"PUBSUB", "NUMSUB"};
  cmd.insert(cmd.end(), channels.begin(), channels.end());
  if (cv == nullptr) {
    add(lock_command(c, name, cmd));
    return out;
  }
  for (auto& m : cv->masters) add(lock_command(*m, name, cmd));
  for (auto& r : cv->replicas) {
    std::error_code ec;  // a replica that is down holds no waiter that could be woken
    auto rep = r->command(cmd, ec);
    if (!ec) add(rep);
  }
  if (client* owner = cv->master_client(home)) {
    cmd[1] = "SHARDNUMSUB";
    std::error_code ec;  // Redis 6 has no sharded pub/sub
    auto rep = owner->command(cmd, ec);
    if (!ec) add(rep);
  }
  return out;
}

}  // namespace redlease::cli
