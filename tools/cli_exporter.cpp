// SPDX-License-Identifier: MIT
// `redlease exporter [PATTERN] --listen ADDR`: the locks in Redis as Prometheus metrics, for operators
// whose services do not all run the library. One thread makes a scan pass (lock_scan.hpp) every
// --interval and publishes a snapshot of aggregates; a scrape (prometheus::Exposer) turns the latest
// snapshot into samples, so Redis sees one SCAN pass per interval whatever the scrape rate.
#include <arpa/inet.h>
#include <malloc.h>
#include <signal.h>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "exporter.hpp"
#include "lock_scan.hpp"
#include "redlease/redlease.hpp"

namespace redlease::cli {
namespace {

using std::chrono::steady_clock;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr std::chrono::milliseconds min_interval{1000};
// The kinds a scan reports, as label values (Prometheus label values in the library's style).
constexpr std::array<std::string_view, 8> all_kinds{"reentrant", "fair",  "read_write", "mutex",
                                                    "semaphore", "permit_semaphore", "latch", "semaphore_or_latch"};
constexpr std::string_view other_prefix = "_other";
// A name with no more segments than the depth: its prefix would be the whole name.
constexpr std::string_view no_prefix = "_none";

[[noreturn]] void usage_error(const std::string& text) {
  throw error(errc::invalid_argument, text, error::whole_message);
}

struct listen_address {
  std::string host;  // as civetweb takes it: an IPv6 address in brackets
  std::string port;
};

// civetweb binds IP addresses only (no name resolution), so a host name is refused here, with a
// usage error, rather than by the listener as a bind failure.
listen_address parse_listen(const std::string& text) {
  const std::string hint = "--listen '" + printable(text) + "': expected HOST:PORT, HOST an IP address "
                           "(127.0.0.1:9716, 0.0.0.0:9716, [::1]:9716)";
  listen_address a;
  std::string bare;
  if (!text.empty() && text[0] == '[') {
    const auto close = text.find("]:");
    if (close == std::string::npos) usage_error(hint);
    bare = text.substr(1, close - 1);
    a.host = text.substr(0, close + 1);
    a.port = text.substr(close + 2);
    in6_addr v6{};
    if (::inet_pton(AF_INET6, bare.c_str(), &v6) != 1) usage_error(hint);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) usage_error(hint);
    a.host = text.substr(0, colon);
    a.port = text.substr(colon + 1);
    in_addr v4{};
    if (::inet_pton(AF_INET, a.host.c_str(), &v4) != 1) usage_error(hint);
  }
  if (a.port.empty() || a.port.size() > 5 || a.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(a.port) > 65535)
    usage_error(hint);
  return a;
}

std::string kind_label(std::string_view kind) {
  std::string out(kind);
  for (char& ch : out)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))) ch = '_';
  return out;
}

// The label value for `name`: its first `depth` segments, or no_prefix when nothing follows them
// (the label must never carry a whole lock name).
std::string name_prefix(std::string_view name, char separator, unsigned depth) {
  std::size_t end = 0;
  for (unsigned i = 0; i < depth; ++i) {
    end = name.find(separator, i == 0 ? 0 : end + 1);
    if (end == std::string_view::npos) return std::string(no_prefix);
  }
  if (end + 1 >= name.size()) return std::string(no_prefix);
  return printable(name.substr(0, end));
}

bool held(const found_lock& l, std::string_view kind) {
  if (kind == "permit_semaphore") return l.permits_out > 0;
  // A plain semaphore's or a latch's number says nothing about who holds what.
  if (kind == "semaphore" || kind == "latch" || kind == "semaphore_or_latch") return false;
  return l.holder_count > 0 || !l.holders.empty();
}

// What the samples of one label set add up.
struct group {
  long long locks = 0, held = 0, holders = 0, waiters = 0, without_expiry = 0;
  long long permits = 0, permits_out = 0;
  std::optional<steady_clock::time_point> oldest;  // the first sight of the oldest hold

  void add(const group& g) {
    locks += g.locks;
    held += g.held;
    holders += g.holders;
    waiters += g.waiters;
    without_expiry += g.without_expiry;
    permits += g.permits;
    permits_out += g.permits_out;
    if (g.oldest && (!oldest || *g.oldest < *oldest)) oldest = g.oldest;
  }
};

using group_key = std::tuple<std::string, std::string, std::string>;  // kind, prefix, node

// What a scrape serves: the aggregates of the last pass, or only the exporter's own state after a
// failed one.
struct snapshot {
  bool up = false;
  std::map<group_key, group> groups;
  double scan_seconds = 0;
  std::size_t keys = 0;
  std::size_t prefixes_folded = 0;
  long long errors = 0;
  std::optional<double> last_success_unix;
};

struct label_mode {
  bool prefix = false, node = false;
};

class metrics_builder {
 public:
  explicit metrics_builder(const snapshot& s, label_mode m) : s_(s), mode_(m) {}

  std::vector<MetricFamily> build() {
    if (s_.up) lock_families();
    self_families();
    return std::move(out_);
  }

 private:
  MetricFamily& family(const char* name, const char* help, MetricType type) {
    out_.push_back(MetricFamily{name, help, type, {}});
    return out_.back();
  }
  static ClientMetric& sample(MetricFamily& f, std::vector<ClientMetric::Label> labels, double value) {
    ClientMetric m;
    m.label = std::move(labels);
    if (f.type == MetricType::Counter)
      m.counter.value = value;
    else
      m.gauge.value = value;
    f.metric.push_back(std::move(m));
    return f.metric.back();
  }
  // The groups merged over the labels a family does not carry; without prefix labels every kind has
  // its sample (zeros too), so that a series does not vanish when its count falls to nothing.
  std::map<group_key, group> merged(bool keep_prefix, bool keep_node) const {
    std::map<group_key, group> out;
    if (!mode_.prefix && !keep_node)
      for (auto k : all_kinds) out[{std::string(k), "", ""}];
    for (const auto& [key, g] : s_.groups) {
      const auto& [kind, prefix, node] = key;
      out[{kind, keep_prefix ? prefix : "", keep_node ? node : ""}].add(g);
    }
    return out;
  }
  std::vector<ClientMetric::Label> labels(const group_key& k, bool with_kind, bool keep_prefix, bool keep_node) const {
    std::vector<ClientMetric::Label> l;
    if (with_kind) l.push_back({"kind", std::get<0>(k)});
    if (keep_prefix) l.push_back({"prefix", std::get<1>(k)});
    if (keep_node) l.push_back({"node", std::get<2>(k)});
    return l;
  }

  template <class Value>
  void per_kind(const char* name, const char* help, bool keep_prefix, bool keep_node, Value value) {
    auto& f = family(name, help, MetricType::Gauge);
    for (const auto& [k, g] : merged(keep_prefix, keep_node))
      sample(f, labels(k, true, keep_prefix, keep_node), value(g));
  }
  // A family of the kinds in `kinds` only (semaphores, latches), with a kind label when it has more
  // than one.
  template <class Value>
  void of_kinds(const char* name, const char* help, std::initializer_list<std::string_view> kinds, Value value) {
    auto& f = family(name, help, MetricType::Gauge);
    std::map<std::pair<std::string, std::string>, long long> sums;
    if (!mode_.prefix)
      for (auto k : kinds) sums[{std::string(k), ""}];
    for (const auto& [key, g] : s_.groups) {
      const auto& [kind, prefix, node] = key;
      if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) continue;
      sums[{kind, mode_.prefix ? prefix : ""}] += value(g);
    }
    for (const auto& [k, v] : sums) {
      std::vector<ClientMetric::Label> l;
      if (kinds.size() > 1) l.push_back({"kind", k.first});
      if (mode_.prefix) l.push_back({"prefix", k.second});
      sample(f, std::move(l), static_cast<double>(v));
    }
  }

  void lock_families() {
    const bool p = mode_.prefix;
    per_kind("redlease_redis_locks", "Locks, semaphores and latches present in Redis, by kind.", p, mode_.node,
             [](const group& g) { return static_cast<double>(g.locks); });
    per_kind("redlease_redis_locks_held",
             "Locks held: with a holder; a permit semaphore with a permit out (a plain semaphore or a latch is "
             "never counted).",
             p, false, [](const group& g) { return static_cast<double>(g.held); });
    per_kind("redlease_redis_lock_holders", "Holders of the held locks (a read-write lock's readers each count).", p,
             false, [](const group& g) { return static_cast<double>(g.holders); });
    per_kind("redlease_redis_lock_waiters",
             "Clients waiting: subscribers of the locks' channels, plus the fair locks' queues.", p, false,
             [](const group& g) { return static_cast<double>(g.waiters); });
    const auto now = steady_clock::now();
    per_kind("redlease_redis_lock_oldest_hold_seconds",
             "Age of the oldest hold, at least: since the exporter first saw it (0 when none is held).", p, false,
             [now](const group& g) {
               return g.oldest ? std::chrono::duration<double>(now - *g.oldest).count() : 0.0;
             });
    per_kind("redlease_redis_lock_without_expiry", "Held locks whose key has no expiry (no TTL).", false, false,
             [](const group& g) { return static_cast<double>(g.without_expiry); });
    of_kinds("redlease_redis_semaphore_permits_available", "Permits available in the semaphores.",
             {"semaphore", "permit_semaphore"}, [](const group& g) { return g.permits; });
    of_kinds("redlease_redis_semaphore_permits_out", "Permits out (acquired, not yet released) of the permit semaphores.",
             {"permit_semaphore"}, [](const group& g) { return g.permits_out; });
    of_kinds("redlease_redis_latch_count", "The count-down latches' counts, added.", {"latch"},
             [](const group& g) { return g.permits; });
  }

  void self_families() {
    sample(family("redlease_exporter_up", "Whether the last scan pass succeeded: 1, else 0 (and no lock samples).",
                  MetricType::Gauge),
           {}, s_.up ? 1 : 0);
    sample(family("redlease_exporter_scan_duration_seconds", "Wall time of the last scan pass.", MetricType::Gauge), {},
           s_.scan_seconds);
    sample(family("redlease_exporter_scan_errors_total", "Scan passes that failed.", MetricType::Counter), {},
           static_cast<double>(s_.errors));
    if (s_.last_success_unix)
      sample(family("redlease_exporter_last_scan_timestamp_seconds",
                    "When the last successful scan pass ended (Unix time).", MetricType::Gauge),
             {}, *s_.last_success_unix);
    if (!s_.up) return;
    sample(family("redlease_exporter_scan_keys", "Keys the last scan pass returned.", MetricType::Gauge), {},
           static_cast<double>(s_.keys));
    if (mode_.prefix)
      sample(family("redlease_exporter_prefixes_folded",
                    "Prefixes of the last pass counted under prefix=\"_other\" (beyond --max-prefixes).",
                    MetricType::Gauge),
             {}, static_cast<double>(s_.prefixes_folded));
  }

  const snapshot& s_;
  label_mode mode_;
  std::vector<MetricFamily> out_;
};

// The scan thread's state and the snapshot scrapes read.
class exporter final : public prometheus::Collectable {
 public:
  exporter(config cfg, const exporter_options& o, std::chrono::milliseconds interval)
      : cfg_(std::move(cfg)), o_(o), interval_(interval) {
    scan_.match = o.pattern;
    scan_.list_cap = 1;  // the first holder names a hold; the rest are only counted
    mode_.prefix = o.prefix_depth > 0;
    mode_.node = o.by_node;
  }

  // The first pass, on the caller's thread: its failure (Redis unavailable at start) is thrown.
  void first_pass() {
    scanner_ = std::make_unique<lock_scanner>(cfg_);
    const auto start = steady_clock::now();
    scan_cost cost;
    auto found = scanner_->scan(scan_, &cost);
    publish(aggregate(found, cost, start));
  }

  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  void stop() {
    {
      std::lock_guard lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  std::vector<MetricFamily> Collect() const override {
    std::shared_ptr<const snapshot> s;
    {
      std::lock_guard lk(m_);
      s = snap_;
    }
    if (!s) return {};
    return metrics_builder(*s, mode_).build();
  }

 private:
  void loop() {
    auto next = steady_clock::now() + interval_;
    std::unique_lock lk(m_);
    while (!cv_.wait_until(lk, next, [this] { return stop_; })) {
      lk.unlock();
      pass();
      lk.lock();
      // A pass longer than the interval: the next one an interval after it, not a burst.
      next = std::max(next + interval_, steady_clock::now());
    }
  }

  void pass() {
    const auto start = steady_clock::now();
    try {
      if (!scanner_) scanner_ = std::make_unique<lock_scanner>(cfg_);
      scan_cost cost;
      publish(aggregate(scanner_->scan(scan_, &cost), cost, start));
      // The scan thread's heap does not shrink by itself: over 100k locks a pass peaks near 85 MB,
      // and the exporter would sit on 105 MB between passes instead of 30.
      ::malloc_trim(0);
      if (!last_error_.empty()) std::cerr << "redlease exporter: scan passes succeed again\n";
      last_error_.clear();
    } catch (const std::exception& e) {
      // A fresh connection next time: the deployment may have changed (a failover, a new cluster layout).
      scanner_.reset();
      holds_.clear();
      ++errors_;
      auto s = std::make_shared<snapshot>();
      s->scan_seconds = std::chrono::duration<double>(steady_clock::now() - start).count();
      s->errors = errors_;
      s->last_success_unix = last_success_unix_;
      publish(std::move(s));
      const std::string text = cli_words(e.what());
      if (text != last_error_)
        std::cerr << "redlease exporter: scan pass failed (redlease_exporter_up 0 until one succeeds): " << text << "\n";
      last_error_ = text;
    }
  }

  std::shared_ptr<snapshot> aggregate(const std::vector<found_lock>& found, const scan_cost& cost,
                                      steady_clock::time_point start) {
    const auto now = steady_clock::now();
    auto s = std::make_shared<snapshot>();
    s->up = true;
    s->keys = cost.keys;
    s->scan_seconds = std::chrono::duration<double>(now - start).count();
    s->errors = errors_;
    last_success_unix_ = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    s->last_success_unix = last_success_unix_;

    std::vector<std::string> prefixes(found.size());
    if (mode_.prefix) {
      const char sep = o_.prefix_separator[0];
      std::unordered_map<std::string, std::size_t> sizes;
      for (std::size_t i = 0; i < found.size(); ++i) ++sizes[prefixes[i] = name_prefix(found[i].name, sep, o_.prefix_depth)];
      // A prefix keeps its label for the exporter's life once given one, as the library's
      // config::metrics_prefix does (series that do not flap); free labels go to the new prefixes
      // with the most locks first (ties by name).
      std::vector<std::pair<std::string, std::size_t>> fresh;
      for (const auto& [p, n] : sizes)
        if (!labelled_.count(p)) fresh.emplace_back(p, n);
      std::sort(fresh.begin(), fresh.end(),
                [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
      for (const auto& f : fresh) {
        if (labelled_.size() >= o_.max_prefixes) break;
        labelled_.insert(f.first);
      }
      for (const auto& [p, n] : sizes) s->prefixes_folded += labelled_.count(p) ? 0 : 1;
      for (auto& p : prefixes)
        if (!labelled_.count(p)) p = other_prefix;
    }

    // A hold is (kind, name, first holder): its first sight carries over from pass to pass while it
    // lasts. Kept by a hash of the three: a pass over 100k held locks would otherwise keep 100k names.
    std::unordered_map<std::size_t, steady_clock::time_point> holds;
    for (std::size_t i = 0; i < found.size(); ++i) {
      const auto& l = found[i];
      const std::string kind = kind_label(l.kind);
      group g;
      g.locks = 1;
      if (held(l, kind)) {
        g.held = 1;
        g.holders = l.holder_count;
        g.without_expiry = l.ttl_ms == -1 ? 1 : 0;
        std::string id = kind;
        id.append(1, '\0').append(l.name).append(1, '\0').append(l.holders.empty() ? "" : l.holders.front());
        const auto key = std::hash<std::string>{}(id);
        auto it = holds_.find(key);
        g.oldest = it != holds_.end() ? it->second : now;
        holds.emplace(key, *g.oldest);
      }
      g.waiters = l.waiters;
      if (l.permits > 0) g.permits = l.permits;
      if (l.permits_out > 0) g.permits_out = l.permits_out;
      s->groups[{kind, prefixes[i], mode_.node ? l.node : ""}].add(g);
    }
    holds_ = std::move(holds);
    return s;
  }

  void publish(std::shared_ptr<const snapshot> s) {
    std::lock_guard lk(m_);
    snap_ = std::move(s);
  }

  const config cfg_;
  const exporter_options o_;
  const std::chrono::milliseconds interval_;
  scan_options scan_;
  label_mode mode_;
  // The scan thread's own (the first pass's before it starts).
  std::unique_ptr<lock_scanner> scanner_;
  std::unordered_map<std::size_t, steady_clock::time_point> holds_;
  std::unordered_set<std::string> labelled_;  // the prefixes with a label of their own
  long long errors_ = 0;
  std::optional<double> last_success_unix_;
  std::string last_error_;

  mutable std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::shared_ptr<const snapshot> snap_;
  std::thread thread_;
};

}  // namespace

int run_exporter(const exporter_options& o) {
  const auto address = parse_listen(o.listen);
  const auto interval = parse_duration(o.interval);
  if (!interval || *interval < min_interval)
    usage_error("--interval must be at least 1s: each pass scans every key of the deployment");
  if (o.prefix_separator.size() != 1) usage_error("--prefix-separator must be one character");

  // Before any thread exists (the library's, civetweb's): the stop signals are read by sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto cfg = make_config(o.url);
  // A long-running process: the library's reports of a Redis that stays down would repeat at every
  // reconnection attempt; each line is printed once until another one comes.
  cfg.on_error = [report = cfg.on_error, last = std::make_shared<std::pair<std::mutex, std::string>>()](
                     const background_error& e) {
    std::string line(e.source);
    line.append(": ").append(e.message.empty() ? e.code.message() : e.message);
    {
      std::lock_guard lk(last->first);
      if (line == last->second) return;
      last->second = line;
    }
    if (report) report(e);
  };
  auto ex = std::make_shared<exporter>(cfg, o, *interval);
  ex->first_pass();

  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(address.host + ":" + address.port, 2);
  } catch (const std::exception&) {
    // civetweb says only that it has no context; the usual causes instead.
    std::cerr << "redlease exporter: cannot listen on " << printable(o.listen)
              << ": the port is in use or the address is not one of this machine's"
              << (address.host[0] == '[' ? " (or the HTTP server, civetweb, was built without IPv6, as Debian's is)" : "")
              << "\n";
    return exit_code::unavailable;
  }
  exposer->RegisterCollectable(ex);
  const auto ports = exposer->GetListeningPorts();
  ex->start();
  std::cout << "redlease exporter: listening on http://" << address.host << ":"
            << (ports.empty() ? std::stoi(address.port) : ports.front()) << "/metrics (a scan pass every "
            << o.interval << ")" << std::endl;

  int signal = 0;
  sigwait(&stop_signals, &signal);
  ex->stop();
  exposer.reset();  // civetweb's listener notices within its poll quantum (about 1.5 s)
  return exit_code::ok;
}

}  // namespace redlease::cli
