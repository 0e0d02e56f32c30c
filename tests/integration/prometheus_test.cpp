// SPDX-License-Identifier: MIT
// The Prometheus exposition (redlease::prometheus), against real redis-server: a client's counters
// scraped over HTTP from a prometheus::Exposer, in Prometheus' text format, with no lock name in it;
// constant and client labels; a collectable that outlives its client.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <prometheus/exposer.h>

#include <sstream>
#include <string>
#include <thread>

#include "lock_test_support.hpp"
#include "redlease/prometheus.hpp"

namespace redlease::test {
namespace {

// GET `path` over HTTP/1.0 (the server closes the connection after the reply); the whole response.
std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) response.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return response;
}

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (l == line) return true;
  }
  return false;
}

class prometheus_test : public lock_fixture {};

TEST_F(prometheus_test, a_scrape_over_http_shows_the_counts_and_no_lock_name) {
  client c{cfg()};
  client other{cfg()};
  prometheus::Exposer exposer{"127.0.0.1:0", 1};
  auto collectable = make_prometheus_collectable(c);
  exposer.RegisterCollectable(collectable);
  const auto ports = exposer.GetListeningPorts();
  ASSERT_EQ(ports.size(), 1u);
  ASSERT_NE(ports[0], 0);

  auto l = c.lock("prom:orders-42");
  l.lock();
  std::this_thread::sleep_for(20ms);
  l.unlock();
  auto held = other.lock("prom:orders-43");
  held.lock();
  EXPECT_FALSE(c.lock("prom:orders-43").try_lock(50ms));
  held.unlock();

  const auto response = http_get(ports[0], "/metrics");
  ASSERT_EQ(response.rfind("HTTP/1.", 0), 0u) << response;
  ASSERT_EQ(response.find(" 200 "), 8u) << response;
  const auto body = response.substr(response.find("\r\n\r\n") + 4);
  for (const char* line : {
           "# TYPE redlease_lock_acquisitions_total counter",
           R"(redlease_lock_acquisitions_total{kind="reentrant",outcome="granted"} 1)",
           R"(redlease_lock_acquisitions_total{kind="reentrant",outcome="timed_out"} 1)",
           R"(redlease_lock_acquisitions_total{kind="mutex",outcome="granted"} 0)",
           R"(redlease_lock_acquisitions_total{kind="permit_semaphore",outcome="error"} 0)",
           "# TYPE redlease_lock_losses_total counter",
           R"(redlease_lock_losses_total{cause="max_hold"} 0)",
           "# TYPE redlease_lock_hold_seconds histogram",
           R"(redlease_lock_hold_seconds_bucket{le="0.01"} 0)",
           R"(redlease_lock_hold_seconds_bucket{le="3600"} 1)",
           R"(redlease_lock_hold_seconds_bucket{le="+Inf"} 1)",
           "redlease_lock_hold_seconds_count 1",
           "# TYPE redlease_lock_wait_seconds histogram",
           R"(redlease_lock_wait_seconds_bucket{le="+Inf"} 1)",
           "redlease_lock_wait_seconds_count 1",
           "# TYPE redlease_lock_handoff_seconds histogram",
           "# TYPE redlease_locks_held gauge",
           "redlease_locks_held 0",
           "# TYPE redlease_locks_watched gauge",
           "redlease_locks_watched 0",
           "# TYPE redlease_renewals_total counter",
           "# TYPE redlease_connects_total counter",
           "redlease_connection_losses_total 0",
           "# TYPE redlease_cluster_redirects_total counter",
       })
    EXPECT_TRUE(has_line(body, line)) << "missing: " << line << "\n" << body;
  EXPECT_EQ(body.find("orders"), std::string::npos) << body;
  EXPECT_EQ(body.find("prom:"), std::string::npos) << body;
  EXPECT_EQ(body.find("redlease_cluster_redirects_total{"), std::string::npos) << "no samples outside a cluster";
}

TEST_F(prometheus_test, the_prefix_families_come_with_config_metrics_prefix) {
  config with = cfg();
  with.metrics_prefix.depth = 1;
  client c{with};
  auto l = c.lock("jobs:nightly:1");
  l.lock();
  l.unlock();
  std::string text;
  for (const auto& f : make_prometheus_collectable(c)->Collect()) {
    if (f.name.rfind("redlease_lock_prefix_", 0) != 0) continue;
    for (const auto& m : f.metric) {
      std::ostringstream line;
      line << f.name;
      for (const auto& label : m.label) line << ' ' << label.name << '=' << label.value;
      line << ' '
           << (f.type == prometheus::MetricType::Histogram ? static_cast<double>(m.histogram.sample_count)
                                                           : m.counter.value)
           << '\n';
      text += line.str();
    }
  }
  EXPECT_NE(text.find("redlease_lock_prefix_acquisitions_total prefix=jobs outcome=granted 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("redlease_lock_prefix_hold_seconds prefix=jobs 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("redlease_lock_prefix_losses_total prefix=jobs 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("nightly"), std::string::npos) << text;
  // Without the option: no such family.
  client plain{cfg()};
  for (const auto& f : make_prometheus_collectable(plain)->Collect())
    EXPECT_NE(f.name.rfind("redlease_lock_prefix_", 0), 0u) << f.name;
}

TEST_F(prometheus_test, constant_labels_and_the_client_label_go_on_every_sample) {
  client c{cfg()};
  auto l = c.mutex("prom:labelled");
  l.lock();
  l.unlock();
  prometheus_options opts;
  opts.const_labels = {{"service", "billing"}};
  opts.client_id_label = true;
  const auto families = make_prometheus_collectable(c, opts)->Collect();
  ASSERT_FALSE(families.empty());
  for (const auto& f : families) {
    EXPECT_EQ(f.name.rfind("redlease_", 0), 0u) << f.name;
    for (const auto& m : f.metric) {
      ASSERT_GE(m.label.size(), 2u) << f.name;
      EXPECT_EQ(m.label[0].name, "service");
      EXPECT_EQ(m.label[0].value, "billing");
      EXPECT_EQ(m.label[1].name, "client");
      EXPECT_EQ(m.label[1].value, c.id());
    }
  }
  const auto& acq = families.front();
  ASSERT_EQ(acq.name, "redlease_lock_acquisitions_total");
  EXPECT_EQ(acq.metric.size(), lock_kind_count * acquire_outcome_count);
  const auto& granted_mutex = acq.metric[1 * acquire_outcome_count];
  EXPECT_EQ(granted_mutex.label[2].value, "mutex");
  EXPECT_EQ(granted_mutex.label[3].value, "granted");
  EXPECT_EQ(granted_mutex.counter.value, 1.0);

  for (const char* bad : {"kind", "le", "client", "__reserved", "not-a-label", ""}) {
    prometheus_options o;
    o.const_labels = {{bad, "x"}};
    EXPECT_THROW(make_prometheus_collectable(c, o), error) << bad;
  }
}

TEST_F(prometheus_test, a_collectable_that_outlives_its_client_collects_nothing) {
  std::shared_ptr<::prometheus::Collectable> collectable;
  {
    client c{cfg()};
    collectable = make_prometheus_collectable(c);
    EXPECT_FALSE(collectable->Collect().empty());
    c.close();
    EXPECT_FALSE(collectable->Collect().empty());  // the last counts, while the client lives
  }
  EXPECT_TRUE(collectable->Collect().empty());
  client moved_from{cfg()};
  client taker{std::move(moved_from)};
  EXPECT_THROW(make_prometheus_collectable(moved_from), error);  // NOLINT(bugprone-use-after-move)
}

}  // namespace
}  // namespace redlease::test
