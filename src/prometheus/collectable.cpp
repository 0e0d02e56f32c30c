// SPDX-License-Identifier: MIT
#include "redlease/prometheus.hpp"

#include <prometheus/check_names.h>
#include <prometheus/client_metric.h>
#include <prometheus/metric_type.h>

#include <algorithm>
#include <array>
#include <limits>

#include "redlease/error.hpp"

namespace redlease {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using labels = std::vector<ClientMetric::Label>;

// Index order of lock_kind, acquire_outcome and loss_cause.
constexpr std::array<const char*, lock_kind_count> kind_names{"reentrant", "mutex", "fair",  "read",
                                                              "write",     "semaphore", "latch", "permit_semaphore"};
constexpr std::array<const char*, acquire_outcome_count> outcome_names{"granted", "timed_out", "cancelled", "refused",
                                                                       "error"};
constexpr std::array<const char*, loss_cause_count> cause_names{"expired", "deleted", "taken",
                                                                "failover", "quorum", "max_hold"};
constexpr std::array<std::string_view, 8> own_label_names{"kind", "outcome", "cause", "node", "type", "client", "le",
                                                          "prefix"};

void check_labels(const prometheus_options& opts) {
  for (const auto& [name, value] : opts.const_labels) {
    const bool own = std::find(own_label_names.begin(), own_label_names.end(), name) != own_label_names.end();
    if (own || !prometheus::CheckLabelName(name) || name.rfind("__", 0) == 0)
      throw error(errc::invalid_argument, "prometheus_options: label name '" + name + "' is not allowed");
  }
}

struct named_value {
  const char* name;
  const char* help;
  std::uint64_t value;
};

class family_builder {
 public:
  family_builder(const prometheus_options& opts, std::string_view client_id) {
    families_.reserve(20);  // prometheus_families makes 16, and 4 with config::metrics_prefix
    for (const auto& [name, value] : opts.const_labels) base_.push_back({name, value});
    if (opts.client_id_label) base_.push_back({"client", std::string(client_id)});
  }

  MetricFamily& family(const char* name, const char* help, MetricType type) {
    families_.push_back(MetricFamily{name, help, type, {}});
    return families_.back();
  }
  ClientMetric& sample(MetricFamily& f, labels extra = {}) {
    ClientMetric m;
    m.label = base_;
    m.label.insert(m.label.end(), std::make_move_iterator(extra.begin()), std::make_move_iterator(extra.end()));
    f.metric.push_back(std::move(m));
    return f.metric.back();
  }
  void counter(const named_value& c) {
    sample(family(c.name, c.help, MetricType::Counter)).counter.value = static_cast<double>(c.value);
  }
  void gauge(const named_value& g) {
    sample(family(g.name, g.help, MetricType::Gauge)).gauge.value = static_cast<double>(g.value);
  }
  void histogram(const char* name, const char* help, const duration_histogram& h) {
    histogram_sample(family(name, help, MetricType::Histogram), h);
  }
  void histogram_sample(MetricFamily& f, const duration_histogram& h, labels extra = {}) {
    auto& out = sample(f, std::move(extra)).histogram;
    out.sample_sum = h.sum_seconds;
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.counts.size(); ++i) {
      cumulative += h.counts[i];
      const double bound =
          i < duration_histogram::bounds.size() ? duration_histogram::bounds[i] : std::numeric_limits<double>::infinity();
      out.bucket.push_back({cumulative, bound});
    }
    // The buckets and the count are separate relaxed loads: +Inf must equal _count for a scraper.
    out.sample_count = cumulative;
  }
  std::vector<MetricFamily> take() { return std::move(families_); }

 private:
  labels base_;
  std::vector<MetricFamily> families_;
};

class stats_collectable final : public prometheus::Collectable {
 public:
  stats_collectable(std::function<std::optional<client_stats>()> read, prometheus_options opts, std::string client_id)
      : read_(std::move(read)), opts_(std::move(opts)), client_id_(std::move(client_id)) {}

  std::vector<MetricFamily> Collect() const override {
    auto s = read_();
    if (!s) return {};
    return prometheus_families(*s, opts_, client_id_);
  }

 private:
  std::function<std::optional<client_stats>()> read_;
  prometheus_options opts_;
  std::string client_id_;
};

}  // namespace

std::vector<MetricFamily> prometheus_families(const client_stats& s, const prometheus_options& opts,
                                              std::string_view client_id) {
  check_labels(opts);
  family_builder b(opts, client_id);
  const auto& l = s.locks;

  auto& acq = b.family("redlease_lock_acquisitions_total",
                       "Acquisitions ended (lock, try_lock, a semaphore's or a latch's wait), by lock kind and outcome.",
                       MetricType::Counter);
  for (std::size_t k = 0; k < lock_kind_count; ++k)
    for (std::size_t o = 0; o < acquire_outcome_count; ++o)
      b.sample(acq, {{"kind", kind_names[k]}, {"outcome", outcome_names[o]}}).counter.value =
          static_cast<double>(l.acquisitions[k][o]);
  auto& losses = b.family("redlease_lock_losses_total", "Holds lost, by cause.", MetricType::Counter);
  for (std::size_t c = 0; c < loss_cause_count; ++c)
    b.sample(losses, {{"cause", cause_names[c]}}).counter.value = static_cast<double>(l.losses[c]);
  const named_value counters[] = {
      {"redlease_renewals_total", "Lock renewals done by the watchdog.", s.renewed_locks},
      {"redlease_renewal_calls_total", "Watchdog script calls (each renews a batch of holds).", s.renew_calls},
      {"redlease_renewals_failed_total", "Watchdog renewals that failed (the hold was found lost, or the call failed).",
       l.renewals_failed},
      {"redlease_failovers_total", "Failovers seen (a master that changed under Sentinel or a cluster).", l.failovers},
      {"redlease_connects_total", "Successful (re)connections of the command connection.", s.connects},
      {"redlease_connection_losses_total", "Drops of the command connection.", s.connection_losses},
      {"redlease_pubsub_wakeups_total", "Waiters woken by a message on their channel.", l.wakeups},
      {"redlease_noscript_fallbacks_total", "Scripts sent again as EVAL after a NOSCRIPT reply.", l.noscript_fallbacks},
  };
  for (const auto& c : counters) b.counter(c);
  auto& redirects = b.family("redlease_cluster_redirects_total", "MOVED and ASK replies, by the cluster node that answered.",
                             MetricType::Counter);
  for (const auto& r : l.redirects) {
    b.sample(redirects, {{"node", r.node}, {"type", "moved"}}).counter.value = static_cast<double>(r.moved);
    b.sample(redirects, {{"node", r.node}, {"type", "ask"}}).counter.value = static_cast<double>(r.ask);
  }
  b.gauge({"redlease_locks_held", "Holds currently tracked by the client.", s.held_locks});
  b.gauge({"redlease_locks_watched", "Holds currently renewed by the watchdog.", s.watched_locks});
  b.histogram("redlease_lock_wait_seconds", "How long granted acquisitions waited, from the call to the grant.",
              l.wait_seconds);
  b.histogram("redlease_lock_hold_seconds", "How long holds lasted, from the grant to their release or loss.",
              l.hold_seconds);
  b.histogram("redlease_lock_handoff_seconds", "From the message that woke a waiter to its grant.", l.handoff_seconds);
  if (!l.by_prefix.empty()) {  // config::metrics_prefix
    auto& pacq = b.family("redlease_lock_prefix_acquisitions_total",
                          "Acquisitions ended, by lock name prefix (config::metrics_prefix) and outcome.",
                          MetricType::Counter);
    auto& pwait = b.family("redlease_lock_prefix_wait_seconds",
                           "How long granted acquisitions waited, by lock name prefix.", MetricType::Histogram);
    auto& phold = b.family("redlease_lock_prefix_hold_seconds", "How long holds lasted, by lock name prefix.",
                           MetricType::Histogram);
    auto& plost = b.family("redlease_lock_prefix_losses_total", "Holds lost, by lock name prefix.", MetricType::Counter);
    for (const auto& p : l.by_prefix) {
      for (std::size_t o = 0; o < acquire_outcome_count; ++o)
        b.sample(pacq, {{"prefix", p.prefix}, {"outcome", outcome_names[o]}}).counter.value =
            static_cast<double>(p.acquisitions[o]);
      b.histogram_sample(pwait, p.wait_seconds, {{"prefix", p.prefix}});
      b.histogram_sample(phold, p.hold_seconds, {{"prefix", p.prefix}});
      b.sample(plost, {{"prefix", p.prefix}}).counter.value = static_cast<double>(p.losses);
    }
  }
  return b.take();
}

std::shared_ptr<prometheus::Collectable> make_prometheus_collectable(std::function<std::optional<client_stats>()> read,
                                                                     prometheus_options opts, std::string client_id) {
  if (!read) throw error(errc::invalid_argument, "make_prometheus_collectable: no reader");
  check_labels(opts);
  return std::make_shared<stats_collectable>(std::move(read), std::move(opts), std::move(client_id));
}

std::shared_ptr<prometheus::Collectable> make_prometheus_collectable(const client& c, prometheus_options opts) {
  auto read = c.stats_reader();
  if (!read) throw error(errc::invalid_argument, "make_prometheus_collectable: a moved-from client");
  return make_prometheus_collectable(std::move(read), std::move(opts), c.id());
}

}  // namespace redlease
