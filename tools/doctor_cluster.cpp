// SPDX-License-Identifier: MIT
// `redlease doctor` on a Redis Cluster: the settings of the cluster as a whole, after each master's
// own checks: what a failed master stops (cluster-require-full-coverage), which masters have no
// replica to take over, and whether sharded pub/sub is there (what Redisson's AUTO picks).
#include <string>
#include <vector>

#include "doctor_checks.hpp"

namespace redlease::cli::checkup {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

void check_full_coverage(const cluster_layout& layout, const std::vector<client*>& masters, report& r) {
  std::vector<std::string> yes, no, unread;
  std::string why;
  for (std::size_t i = 0; i < masters.size(); ++i) {
    const std::string name = layout.masters[i].address.name();
    std::string refused = "unreachable";
    auto v = masters[i] != nullptr ? config_get(*masters[i], "cluster-require-full-coverage", refused) : std::nullopt;
    if (!v) {
      unread.push_back(name);
      why = refused;
    } else {
      (*v == "no" ? no : yes).push_back(name);
    }
  }
  if (!yes.empty()) {
    r.warn("cluster.coverage",
           "cluster-require-full-coverage yes on " + join(yes) +
               ": when a master fails and no replica takes its slots over, the cluster refuses every command "
               "(CLUSTERDOWN), so one failed master stops every lock, on every slot, until it is back",
           "give every master a replica (the cluster then fails over within the node timeout), and CONFIG SET "
           "cluster-require-full-coverage no on every node (and in redis.conf): the other masters' locks then keep "
           "working while a shard is down");
  } else if (!unread.empty()) {
    r.warn("cluster.coverage", "cannot read cluster-require-full-coverage on " + join(unread) + ": " + why,
           "grant +config|get, or run the doctor as an administrator; the setting that keeps the other masters' "
           "locks working through a shard's failure is no");
  } else {
    r.ok("cluster.coverage", "cluster-require-full-coverage no on every master: a failed master stops the locks of "
                             "its own slots only");
  }
}

void check_replicas(const cluster_layout& layout, report& r) {
  std::vector<std::string> alone, counts;
  for (const auto& m : layout.masters) {
    counts.push_back(m.address.name() + " " + std::to_string(m.replicas.size()));
    if (m.replicas.empty()) alone.push_back(m.address.name());
  }
  if (!alone.empty()) {
    r.warn("cluster.replicas",
           "no replica for " + join(alone) + " (replicas per master: " + join(counts) +
               "): when such a master fails, nothing takes over its slots, and the locks whose names hash to them "
               "(or, with full coverage, every lock) stop until it is back",
           "add a replica to each master (CLUSTER REPLICATE on a new node), so that the cluster fails over");
  } else {
    r.ok("cluster.replicas", "every master has a replica (" + join(counts) +
                                 "); replication is asynchronous: a failover can lose a grant made just before it");
  }
}

void check_sharded_pubsub(const cluster_layout& layout, const std::vector<client*>& masters, report& r) {
  std::vector<std::string> with, without;
  std::string why;
  for (std::size_t i = 0; i < masters.size(); ++i) {
    if (masters[i] == nullptr) continue;
    std::error_code ec;
    auto rep = masters[i]->command({"PUBSUB", "SHARDNUMSUB"}, ec);
    if (ec) {
      without.push_back(layout.masters[i].address.name());
      why = error_text(rep, ec);
    } else {
      with.push_back(layout.masters[i].address.name());
    }
  }
  // The library decides as Redisson's AUTO does (config::cluster.sharded_pubsub): both sides agree
  // unless one of them is configured otherwise.
  if (with.empty() && without.empty()) {
    r.warn("cluster.pubsub", "no master could be asked PUBSUB SHARDNUMSUB", "");
  } else if (without.empty()) {
    r.ok("cluster.pubsub",
         "sharded pub/sub available (PUBSUB SHARDNUMSUB answered on every master): Redisson's default "
         "ShardedSubscriptionMode AUTO and redlease's cluster.sharded_pubsub=auto both pick sharded pub/sub "
         "(SSUBSCRIBE/SPUBLISH on the slot's master); a client configured otherwise on either side does not wake "
         "the other's waiters (they find the lock free at their next try)");
  } else if (with.empty()) {
    r.ok("cluster.pubsub", "no sharded pub/sub (PUBSUB SHARDNUMSUB refused: " + why +
                               "): Redisson's AUTO and redlease's auto both pick classic pub/sub");
  } else {
    r.warn("cluster.pubsub",
           "sharded pub/sub on " + join(with) + " but not on " + join(without) + " (" + why +
               "): Redisson's AUTO decides by the node it asks first, so its clients may not agree on a mode",
           "run one Redis version on every node (7 or later for sharded pub/sub), or set Redisson's "
           "shardedSubscriptionMode explicitly");
  }
}

}  // namespace

void check_cluster_settings(const cluster_layout& layout, const std::vector<client*>& masters, report& r) {
  check_full_coverage(layout, masters, r);
  check_replicas(layout, r);
  check_sharded_pubsub(layout, masters, r);
}

}  // namespace redlease::cli::checkup
