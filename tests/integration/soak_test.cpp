// SPDX-License-Identifier: MIT
// Mutual-exclusion soak under random faults.
//
// Contenders: two threads in each of two clients of this process (one client behind a fault proxy,
// one direct) and two worker processes (soak_worker; one behind the proxy, one direct) with two
// threads each, on a reentrant lock and a mutex. Each loops: try_lock, a short critical section
// (sometimes reentered), valid(), unlock. Meanwhile this test injects faults at random: proxy
// resets, lost replies, stalls shorter than the lease, latency spikes, SCRIPT FLUSH, killed pub/sub
// connections, and SIGSTOP of a worker process for longer than the lease.
//
// Every critical section is appended to one log file (O_APPEND, one write per record) on
// CLOCK_MONOTONIC, which all processes share. The checker then looks for overlapping sections of
// one lock. An overlap is allowed only if one side was frozen past its lease and was told (valid()
// false at the end of its section, or unlock reporting lock_lost); and the known-valid windows
// [start, min(end, valid_until)] of two sections may never overlap at all. (A holder frozen after its
// grant arrived but before try_lock returned starts its section with its lease already gone: its
// window is empty, it is told, and the next holder may legitimately be inside the lock already.)
//
// Quick by default (20 s of load; CTest runs this). REDLEASE_SOAK_SECONDS=N runs longer by hand.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string_view>
#include <thread>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"
#include "soak_section.hpp"

namespace redlease::test {
namespace {

using ms = std::chrono::milliseconds;

constexpr ms lease{600};
constexpr ms request_timeout{250};
constexpr ms wait_for_lock{3000};

long long mono_ns(steady::time_point t = steady::now()) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

double soak_seconds() {
  if (const char* s = std::getenv("REDLEASE_SOAK_SECONDS")) {
    double v = std::atof(s);
    if (v > 0) return v;
  }
  return 20;  // the quick size
}

struct counters {
  std::atomic<long long> acquisitions{0}, told{0}, errors{0}, timeouts{0}, hangs{0};
  // try_lock errors the design does not allow here: any but a transient failure (its connection reset
  // or stalled under it, docs/reliability.md). Unlocks are checked section by section, workers' too.
  std::atomic<long long> unexpected_errors{0};
  std::atomic<long long> longest_wait_ms{0};
  std::mutex mu;
  std::map<std::string, long long> error_kinds;  // "op:code"
  void error(const char* op, std::error_code ec) {
    ++errors;
    if (std::string_view(op) == "try_lock" && !soak::transient(ec)) ++unexpected_errors;
    std::lock_guard<std::mutex> g(mu);
    ++error_kinds[std::string(op) + ":" + ec.message()];
  }
};

// One contender thread of this process: the same loop as soak_worker's.
void contend(client& c, const std::string& name, const std::string& kind, const std::string& holder,
             steady::time_point end, int log, counters& n, unsigned seed) {
  detail::lock_handle l = kind == "mutex" ? detail::lock_handle(c.mutex(name)) : detail::lock_handle(c.lock(name));
  std::minstd_rand rng(seed);
  while (steady::now() < end) {
    std::error_code ec;
    auto t0 = steady::now();
    bool got = l.try_lock(wait_for_lock, ec);
    auto waited = ms_since(t0);
    long long prev = n.longest_wait_ms.load();
    while (waited > prev && !n.longest_wait_ms.compare_exchange_weak(prev, waited)) {
    }
    if (waited > wait_for_lock.count() + 2000) ++n.hangs;
    if (ec) {
      n.error("try_lock", ec);
      std::this_thread::sleep_for(10ms);  // back off after a failed attempt
      continue;
    }
    if (!got) {
      ++n.timeouts;
      continue;
    }
    ++n.acquisitions;
    auto sec = soak::critical_section(l, kind == "reentrant", rng);
    if (sec.told()) ++n.told;
    if (sec.unlock && sec.unlock != errc::lock_lost) n.error("unlock", sec.unlock);
    soak::write_line(log, soak::record(name, holder, sec));
    std::this_thread::sleep_for(ms(rng() % 10));  // work outside the lock: no thread barges forever
  }
}

// REDLEASE_SOAK_TRACE=1: a MONITOR connection records every command the server runs (scripts'
// inner commands included), so that a failure can be explained from the server's side.
class monitor_trace {
 public:
  explicit monitor_trace(std::uint16_t port) {
    timespec rt{}, mt{};
    ::clock_gettime(CLOCK_REALTIME, &rt);
    ::clock_gettime(CLOCK_MONOTONIC, &mt);
    offset_ns_ = (rt.tv_sec - mt.tv_sec) * 1000000000LL + (rt.tv_nsec - mt.tv_nsec);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    std::string cmd = "MONITOR\r\n";
    if (::write(fd_, cmd.data(), cmd.size()) < 0) return;
    thread_ = std::thread([this] {
      char buf[65536];
      for (;;) {
        ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n <= 0) break;
        std::lock_guard<std::mutex> g(mu_);
        data_.append(buf, static_cast<std::size_t>(n));
      }
    });
  }
  ~monitor_trace() {
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  // Lines about `what` whose server time (converted to CLOCK_MONOTONIC ns) is in [from, to].
  void print(const std::string& what, long long from, long long to) {
    std::lock_guard<std::mutex> g(mu_);
    std::istringstream in(data_);
    std::string line;
    while (std::getline(in, line)) {
      if (line.size() < 2 || line[0] != '+' || line.find(what) == std::string::npos) continue;
      double t = std::atof(line.c_str() + 1);
      long long mono = static_cast<long long>(t * 1e9) - offset_ns_;
      if (mono < from || mono > to) continue;
      std::cout << "[trace] " << mono << " " << line.substr(1) << "\n";
    }
  }

 private:
  int fd_ = -1;
  long long offset_ns_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::string data_;
};

struct section {
  std::string lock, holder, unlock;
  long long start = 0, end = 0, valid_until = 0;
  bool valid = false;
  int depth = 1;
  bool unlock_timed_out = false;
  bool told() const { return !valid || unlock == "lock_lost"; }
  std::string process() const { return holder.substr(0, holder.find('.')); }
};

struct freeze_window {
  std::string process;
  long long from = 0, to = 0;
};

class soak_test : public lock_fixture {};

TEST_F(soak_test, mutual_exclusion_under_random_faults) {
  const double seconds = soak_seconds();
  fault_proxy proxy(server().port());
  const std::string direct_url = server().url();
  const std::string proxied_url = "redis://127.0.0.1:" + std::to_string(proxy.port());

  std::unique_ptr<monitor_trace> trace;
  if (std::getenv("REDLEASE_SOAK_TRACE")) trace = std::make_unique<monitor_trace>(server().port());

  char path[] = "/tmp/redlease-soak-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string log_path = path;
  int log = ::open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(log, 0);

  const std::vector<std::pair<std::string, std::string>> locks{{"soak-r", "reentrant"}, {"soak-m", "mutex"}};
  const auto t_begin = steady::now();
  const auto end = t_begin + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));

  // Two worker processes: A behind the proxy, B direct.
  std::map<std::string, std::unique_ptr<child_process>> workers;
  for (auto [tag, url] : {std::pair<std::string, std::string>{"pA", proxied_url}, {"pB", direct_url}}) {
    std::ostringstream secs;
    secs << seconds;
    workers[tag] = std::make_unique<child_process>(std::vector<std::string>{
        SOAK_WORKER_PATH, "soak", url, log_path, secs.str(), "2", std::to_string(lease.count()),
        std::to_string(request_timeout.count()), tag, "soak-r:reentrant", "soak-m:mutex"});
  }

  std::map<std::string, std::string> worker_ids;  // tag -> client uuid
  for (auto& [tag, w] : workers) {
    auto id = w->read_line_starting("id ", 10000ms);
    ASSERT_TRUE(id) << "worker " << tag << " did not start";
    worker_ids[tag] = id->substr(3);
  }

  // Two clients of this process: one behind the proxy, one direct; two threads each.
  auto make_conf = [&](bool proxied) {
    auto c = cfg(lease);
    c.request_timeout = request_timeout;
    c.connect_timeout = 500ms;
    if (proxied) c.port = proxy.port();
    return c;
  };
  client via_proxy{make_conf(true)};
  client direct{make_conf(false)};
  counters local;
  if (trace) {
    std::cout << "[ids] t1 " << via_proxy.id() << " t2 " << direct.id();
    for (auto& [tag, id] : worker_ids) std::cout << " " << tag << " " << id;
    std::cout << "\n";
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    client& c = i < 2 ? via_proxy : direct;
    const auto& [name, kind] = locks[static_cast<std::size_t>(i % 2)];
    std::string holder = std::string(i < 2 ? "t1." : "t2.") + std::to_string(i % 2);
    threads.emplace_back([&, name = name, kind = kind, holder, i] {
      contend(c, name, kind, holder, end, log, local, 1000u + static_cast<unsigned>(i));
    });
  }

  // The fault injector.
  std::map<std::string, long long> faults;
  std::vector<freeze_window> freezes;
  // A fixed sequence of faults, so that a failure can be run again (REDLEASE_SOAK_SEED picks another;
  // the threads' timing still varies from run to run).
  unsigned seed = 20261125u;
  if (const char* e = std::getenv("REDLEASE_SOAK_SEED")) seed = static_cast<unsigned>(std::strtoul(e, nullptr, 10));
  std::cout << "[ soak ] fault sequence seed " << seed << " (REDLEASE_SOAK_SEED)\n";
  std::minstd_rand rng(seed);
  auto last_freeze = t_begin;
  bool freeze_a = true;
  while (steady::now() + 1500ms < end) {
    std::this_thread::sleep_for(ms(200 + rng() % 300));  // the pace of the faults
    switch (rng() % 8) {
      case 0:
        proxy.drop_all();
        ++faults["proxy reset"];
        break;
      case 1:
        proxy.lose_next_reply();
        ++faults["reply lost"];
        break;
      case 2: {
        auto d = ms(50 + rng() % 150);  // shorter than a third of the lease
        proxy.stall(true);
        std::this_thread::sleep_for(d);
        proxy.stall(false);
        ++faults["proxy stall"];
        break;
      }
      case 3:
        proxy.set_latency(ms(10 + rng() % 30));
        std::this_thread::sleep_for(300ms);
        proxy.set_latency(0ms);
        ++faults["latency spike"];
        break;
      case 4:
        raw()({"SCRIPT", "FLUSH"});
        ++faults["SCRIPT FLUSH"];
        break;
      case 5:
        raw()({"CLIENT", "KILL", "TYPE", "pubsub"});
        ++faults["pub/sub killed"];
        break;
      case 6:
      case 7: {
        if (steady::now() - last_freeze < 1500ms) break;
        const std::string tag = freeze_a ? "pA" : "pB";
        freeze_a = !freeze_a;
        auto& w = *workers[tag];
        // Catch it holding the reentrant lock if we can (its field starts with its client id).
        eventually([&] {
          for (auto& k : raw()({"HKEYS", "soak-r"}).elements)
            if (k.str.rfind(worker_ids[tag] + ":", 0) == 0) return true;
          return false;
        }, 500ms);
        freeze_window f{tag, 0, 0};
        if (!w.running() || !w.freeze()) break;
        f.from = mono_ns();
        std::this_thread::sleep_for(lease + ms(200 + rng() % 200));  // frozen past its lease
        f.to = mono_ns();
        EXPECT_TRUE(w.thaw());
        freezes.push_back(f);
        last_freeze = steady::now();
        ++faults["SIGSTOP worker > lease"];
        break;
      }
    }
  }
  proxy.stall(false);
  proxy.set_latency(0ms);

  for (auto& t : threads) t.join();
  std::map<std::string, std::string> summaries;
  for (auto& [tag, w] : workers) {
    auto line = w->read_line_starting("summary", ms(static_cast<long long>(seconds * 1000) + 20000));
    EXPECT_TRUE(line) << "worker " << tag << " did not finish";
    if (line) summaries[tag] = *line;
    auto st = w->wait_exit(10000ms);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "worker " << tag;
  }
  ::close(log);

  // ---- the checker
  std::vector<section> all;
  {
    std::ifstream in(log_path);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string tag;
      section s;
      int v = 0, rt = 0;
      ls >> tag >> s.lock >> s.holder >> s.start >> s.end >> s.valid_until >> v >> s.unlock >> s.depth >> rt;
      s.unlock_timed_out = rt != 0;
      if (tag != "S" || ls.fail()) {
        ADD_FAILURE() << "bad record: " << line;
        continue;
      }
      s.valid = v != 0;
      all.push_back(s);
    }
  }
  ::unlink(log_path.c_str());
  auto frozen_during = [&](const section& s) {
    for (auto& f : freezes)
      if (f.process == s.process() && f.from >= s.start && f.to <= s.end) return true;
    return false;
  };
  // Frozen at some point between sending its acquisition (at most a lease before the section's
  // start) and the section's end.
  auto frozen_near = [&](const section& s) {
    for (auto& f : freezes)
      if (f.process == s.process() && f.to >= s.start - std::chrono::nanoseconds(lease).count() && f.from <= s.end)
        return true;
    return false;
  };
  long long overlaps = 0, overlaps_frozen = 0, overlaps_told_not_frozen = 0, unexplained = 0, window_violations = 0;
  // Overlaps next to an unlock retried after request_timeout (checked like the others; counted
  // because a late first attempt is the case the release latch exists for).
  long long overlaps_timed_out_unlock = 0;
  long long told = 0, frozen_sections = 0, frozen_untold = 0, timed_out_unlocks = 0, lost_reentered_not_owner = 0;
  std::map<std::string, long long> per_lock, per_holder, unlock_results;
  for (auto& s : all) {
    ++per_lock[s.lock];
    ++per_holder[s.holder];
    ++unlock_results[s.unlock];
    // A holder's unlock succeeds or says it lost the lock; anything else (an error left after the
    // retries, not_owner) is a release the design does not allow, in this process or a worker. One
    // exception: a re-entered hold lost under a freeze can be gone whole by its outer unlock, which
    // then says not_owner to a holder already told by valid() (seen once in four runs here). A
    // re-entry granted after the loss was seen is given back now and says lock_lost
    // (engine.a_re_entry_granted_after_its_hold_was_found_lost_is_given_back); one granted just
    // before it was seen, on a key already free, cannot be told from a re-entry by its reply.
    const bool lost_reentered = s.unlock == "not_owner" && s.depth == 2 && !s.valid;
    if (lost_reentered) ++lost_reentered_not_owner;
    if (s.unlock != "ok" && s.unlock != "lock_lost" && !lost_reentered) {
      ADD_FAILURE() << s.holder << " on " << s.lock << ": unlock " << s.unlock << " (depth " << s.depth << ", valid "
                    << s.valid << ", frozen near it " << frozen_near(s) << ", valid_until - end "
                    << (s.valid_until - s.end) / 1000000 << " ms)";
    }
    if (s.told()) ++told;
    if (s.unlock_timed_out) ++timed_out_unlocks;
    if (frozen_during(s)) {
      ++frozen_sections;
      if (!s.told()) {
        ++frozen_untold;
        ADD_FAILURE() << "frozen past its lease but not told: " << s.holder;
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const section& a, const section& b) { return a.start < b.start; });
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (std::size_t j = i + 1; j < all.size() && all[j].start < all[i].end; ++j) {
      const auto& a = all[i];
      const auto& b = all[j];
      if (a.lock != b.lock || a.holder == b.holder) continue;
      ++overlaps;
      if (a.unlock_timed_out || b.unlock_timed_out) ++overlaps_timed_out_unlock;
      // Known-valid windows must never overlap: both held the lock with a lease known good.
      const long long a_until = std::min(a.end, a.valid_until), b_until = std::min(b.end, b.valid_until);
      if (b.start < std::min(a_until, b_until)) {
        ++window_violations;
        ADD_FAILURE() << "the valid windows of " << a.holder << " and " << b.holder << " on " << b.lock
                      << " overlap by " << (std::min(a_until, b_until) - b.start) / 1000 << " us";
        if (trace) {
          for (auto& x : all)
            if (x.lock == a.lock && x.end > a.start - 2000000000LL && x.start < b.start + 300000000LL)
              std::cout << "[section] " << x.holder << " " << x.start << " " << x.end << " vu " << x.valid_until
                        << " valid " << x.valid << " " << x.unlock << " depth " << x.depth << "\n";
          for (auto& f : freezes) std::cout << "[freeze] " << f.process << " " << f.from << " " << f.to << "\n";
          trace->print(a.lock, a.start - 2000000000LL, b.start + 300000000LL);
        }
      }
      if (!a.told() && !b.told()) {
        ++unexplained;
        ADD_FAILURE() << "overlap on " << a.lock << " of " << a.holder << " and " << b.holder
                      << ", neither told of a loss";
      } else if ((a.told() && frozen_near(a)) || (b.told() && frozen_near(b))) {
        ++overlaps_frozen;
      } else {
        // The told holder's lease ran out without a freeze (a stall or latency spike this test
        // injected, or CPU starvation): allowed like a freeze when the valid windows did not overlap
        // (a window violation is counted and failed above) and the holder was told.
        ++overlaps_told_not_frozen;
        std::cout << "[soak] overlap on " << a.lock << " of " << a.holder << " and " << b.holder
                  << ": lease ran out without a freeze; told\n";
      }
    }
  }

  long long worker_acq = 0;
  for (auto& [tag, line] : summaries) {
    auto p = line.find("acquisitions=");
    if (p != std::string::npos) worker_acq += std::atoll(line.c_str() + p + 13);
  }
  long long total_faults = 0;
  for (auto& [k, v] : faults) total_faults += v;

  std::cout << "[soak] duration " << seconds << " s, 8 contenders (4 threads here, 2 processes x 2 threads), "
            << "lease " << lease.count() << " ms, request timeout " << request_timeout.count() << " ms\n";
  std::cout << "[soak] critical sections: " << all.size() << " (reentrant " << per_lock["soak-r"] << ", mutex "
            << per_lock["soak-m"] << "); this process " << local.acquisitions << ", workers " << worker_acq << "\n";
  std::cout << "[soak] faults injected: " << total_faults;
  for (auto& [k, v] : faults) std::cout << "; " << k << " " << v;
  std::cout << "\n";
  std::cout << "[soak] overlaps: " << overlaps << " (holder frozen near it and told: " << overlaps_frozen
            << "; told, lease ran out without a freeze: " << overlaps_told_not_frozen << "; unexplained: " << unexplained
            << "; next to an unlock retried after request_timeout: " << overlaps_timed_out_unlock
            << "); valid-window violations: " << window_violations << "\n";
  std::cout << "[soak] stale holders told: " << told << " sections (frozen past the lease: " << frozen_sections
            << ", of which not told: " << frozen_untold << "); sections with an unlock retried after "
            << "request_timeout: " << timed_out_unlocks << "\n";
  std::cout << "[soak] unlock results:";
  for (auto& [r, v] : unlock_results) std::cout << " " << r << " " << v;
  std::cout << " (not_owner of a lost re-entered hold told by valid(): " << lost_reentered_not_owner << ")\n";
  std::cout << "[soak] this process: errors " << local.errors << ", try_lock timeouts " << local.timeouts
            << ", longest try_lock " << local.longest_wait_ms << " ms, hangs " << local.hangs << "\n";
  for (auto& [k, v] : local.error_kinds) std::cout << "[soak]   error " << k << ": " << v << "\n";
  for (auto& [tag, line] : summaries) std::cout << "[soak] worker " << tag << ": " << line << "\n";
  std::cout << "[soak] sections per holder:";
  for (auto& [h, v] : per_holder) std::cout << " " << h << " " << v;
  std::cout << "\n";
  std::cout << std::flush;

  EXPECT_EQ(unexplained, 0);
  EXPECT_EQ(window_violations, 0);
  EXPECT_EQ(frozen_untold, 0);
  EXPECT_EQ(local.hangs, 0);
  EXPECT_EQ(local.unexpected_errors, 0);
  // The scenario happened: a worker was frozen past its lease in the middle of a section, or the
  // zero of frozen_untold proves nothing.
  EXPECT_GT(faults["SIGSTOP worker > lease"], 0);
  EXPECT_GT(frozen_sections, 0);
  EXPECT_GE(static_cast<long long>(all.size()), static_cast<long long>(seconds * 5));
  EXPECT_GT(local.acquisitions.load(), 0);
  EXPECT_GT(worker_acq, 0);
  EXPECT_GT(total_faults, 0);
}

}  // namespace
}  // namespace redlease::test
