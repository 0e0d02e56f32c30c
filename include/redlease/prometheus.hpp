// SPDX-License-Identifier: MIT
/// @file
/// A Prometheus exposition of a client's counters (`client::stats()`) through prometheus-cpp: the
/// library `redlease::prometheus`, built with `-DREDLEASE_WITH_PROMETHEUS=ON`. The names, types and
/// labels are listed in docs/metrics.md. No label carries a lock's name.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redlease/client.hpp"

namespace redlease {

/// What the exposition adds to every sample.
struct prometheus_options {
  /// Labels on every sample, e.g. `{{"service", "billing"}}`. Each name must be a valid Prometheus
  /// label name, not starting with `__`, and none of the names the families use themselves (`kind`,
  /// `outcome`, `cause`, `node`, `type`, `client`, `le`).
  std::vector<std::pair<std::string, std::string>> const_labels;
  /// Adds `client="<client::id()>"` to every sample, to tell apart several clients of one process.
  /// A client's id is random per construction: each restart of a process makes new series. Off by
  /// default.
  bool client_id_label = false;
};

/// The metric families of one snapshot, in the order of docs/metrics.md: counters (`_total`),
/// gauges and histograms (seconds; the buckets of `duration_histogram::bounds`, cumulative, and
/// `+Inf`). `client_id` is the value of the `client` label when `opts.client_id_label` is set.
/// @throws redlease::error `errc::invalid_argument` for a constant label that breaks the rules of
/// `prometheus_options::const_labels`.
std::vector<prometheus::MetricFamily> prometheus_families(const client_stats& s, const prometheus_options& opts = {},
                                                          std::string_view client_id = {});

/// A collectable for a `prometheus::Exposer` or `prometheus::Registry` that reads `c.stats()` at
/// each scrape (relaxed loads, no lock taken). It holds the client weakly (`client::stats_reader()`):
/// it may outlive the client, and once the client and its handles are gone it collects nothing.
/// `Collect()` may be called from any thread, concurrently.
/// @throws redlease::error `errc::invalid_argument` for a bad constant label (see
/// `prometheus_options`), or a moved-from client.
std::shared_ptr<prometheus::Collectable> make_prometheus_collectable(const client& c, prometheus_options opts = {});

/// As above, over any source of snapshots: `read()` is called at each scrape, from the scraping
/// thread; an empty result collects nothing. `client_id` is the `client` label's value, when
/// `opts.client_id_label` is set.
/// @throws redlease::error `errc::invalid_argument` for a bad constant label, or an empty `read`.
std::shared_ptr<prometheus::Collectable> make_prometheus_collectable(
    std::function<std::optional<client_stats>()> read, prometheus_options opts = {}, std::string client_id = {});

}  // namespace redlease
