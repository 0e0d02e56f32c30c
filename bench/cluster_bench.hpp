// SPDX-License-Identifier: MIT
// The Redis Cluster cases of redlease-bench (bench/cluster_bench.cpp, `--cluster`): B2-async on a
// private 3-master cluster, the client pointed at one node, with the keys on 1, 2 and 3 masters,
// each against the summed per-node ceiling of the same masters in the same run; B4 (the watchdog
// at scale) on the cluster against the single-server B4 of as many locks.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench_support.hpp"

namespace redlease::cli::bench {

/// The section's case names, in the order they run: B2-async-cluster-1, -2, -3 (keys on that many
/// of the 3 masters), then, with `watchdog_locks` (N), B4-cluster-single-Nk (the single-server B4
/// of N locks, the reference) and B4-cluster-Nk (N locks held by the watchdog on the cluster).
std::vector<std::string> cluster_case_names(std::size_t watchdog_locks);

/// Runs the wanted cases of `run` (the run's settings, --only, the output): starts a private
/// 3-master cluster (no replicas; free loopback ports, no persistence), measures each case's
/// ceiling and the case, and stops the nodes. A case that fails is emitted with its error.
void run_cluster_cases(const section_run& run);

}  // namespace redlease::cli::bench
