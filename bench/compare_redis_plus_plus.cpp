// The B1 / B2-sync workloads of redlease-bench, run on redis-plus-plus (sw::redis), a blocking
// client that does its I/O on the calling thread. Built and run only by
// bench/compare-redis-plus-plus.sh, outside the project's build: redlease does not depend on it.
//
//   compare_redis_plus_plus --port N [--host 127.0.0.1] [--only rpp-B1-redmutex,...]
//                           [--seconds 3] [--warmup 0.3] [--threads 16] [--pool 16]
//
// Cases (op = one acquire + release pair, on a free key, 10 s lease):
//   rpp-B1-redmutex   1 thread, one key: RedMutex::try_lock() + unlock()
//   rpp-B1-redlock    1 thread, one key: RedLock<RedLockMutex>::try_lock(10 s) + unlock()
//   rpp-B2-redmutex   16 threads, one key each, one sw::redis::Redis with a 16-connection pool
//   rpp-B2-redlock    the same with RedLock<RedLockMutex>
//   rpp-B2-redmutex-shared-watcher  rpp-B2-redmutex with one LockWatcher for the 16 mutexes (the
//                     README's advice to avoid a thread per mutex)
//   rpp-B1-redmutex-lock  (only when asked for) RedMutex::lock() + unlock(); lock() sleeps a random
//                     0-5 ms before every attempt (redlock.cpp), so it measures that sleep
//
// RedMutex (default options: Lua scripting, i.e. RedLockMutex underneath, with ttl = 10 s) gets its
// own LockWatcher thread per mutex, as `RedMutex mtx(redis, name, nullptr, opts)` does. Every
// successful try_lock() hands the mutex to that watcher (push + notify). RedLock<RedLockMutex> with
// one master is SET NX PX + EVAL of the release script, and nothing else.
// try_lock() is used rather than lock() because RedMutex::lock() sleeps before trying.
//
// Per case: warm-up, then the measured run; pairs/s, p50/p99 latency of a pair, client CPU µs per
// pair and context switches per pair (getrusage(RUSAGE_SELF): the whole process, watcher threads
// included). One JSON object per line, with the field names of `redlease-bench --json`.

#include <sw/redis++/redis++.h>
#include <sw/redis++/patterns/redlock.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto lease = std::chrono::milliseconds(10'000);

struct options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string only = "rpp-B1-redmutex,rpp-B1-redlock,rpp-B2-redmutex,rpp-B2-redlock";
  double seconds = 3, warmup = 0.3;
  int threads = 16;
  std::size_t pool = 16;
};

struct usage {
  steady::time_point t;
  double cpu = 0;
  long long csw = 0;
};

usage take() {
  usage u;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  u.cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
          static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  u.csw = ru.ru_nvcsw + ru.ru_nivcsw;
  u.t = steady::now();
  return u;
}

struct thread_result {
  long long ops = 0, failed = 0;
  std::vector<float> lat;
};

// One acquire + release; false when the acquisition did not succeed (it should always succeed:
// every thread has its own free key).
using pair_fn = std::function<bool()>;

// Runs `threads` threads, each calling its pair function until `secs` have passed (the loop is
// bounded by that stop flag). `before` / `after` are called around the run.
std::vector<thread_result> run(std::vector<pair_fn>& fns, double secs, usage* before, usage* after) {
  auto threads = static_cast<int>(fns.size());
  std::vector<thread_result> res(fns.size());
  std::atomic<bool> stop{false};
  std::latch ready(threads + 1);
  std::mutex err_mu;
  std::string error;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      auto& out = res[static_cast<std::size_t>(t)];
      auto& fn = fns[static_cast<std::size_t>(t)];
      out.lat.reserve(1 << 18);
      ready.arrive_and_wait();
      try {
        while (!stop.load(std::memory_order_relaxed)) {
          auto t0 = steady::now();
          bool ok = fn();
          out.lat.push_back(std::chrono::duration<float, std::micro>(steady::now() - t0).count());
          if (ok) ++out.ops;
          else if (++out.failed > 1000) throw std::runtime_error("more than 1000 failed acquisitions");
        }
      } catch (const std::exception& e) {
        std::lock_guard g(err_mu);
        if (error.empty()) error = e.what();
        stop = true;
      }
    });
  if (before) *before = take();
  ready.arrive_and_wait();
  std::this_thread::sleep_for(std::chrono::duration<double>(secs));
  stop = true;
  for (auto& t : ts) t.join();
  if (after) *after = take();
  if (!error.empty()) throw std::runtime_error(error);
  return res;
}

double percentile(std::vector<float>& v, double q) {
  if (v.empty()) return 0;
  auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

std::string jnum(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::string key_prefix() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  return std::string("rpp-bench:") + buf + ":";
}

// Holds the per-thread lock objects of one case alive across warm-up and measured run.
struct case_state {
  std::vector<std::unique_ptr<sw::redis::RedMutex>> mutexes;
  std::vector<std::unique_ptr<sw::redis::RedLockMutex>> redlocks;
  std::vector<pair_fn> fns;
};

void build_case(case_state& cs, const std::string& name, const std::shared_ptr<sw::redis::Redis>& redis,
                const std::string& prefix, int threads) {
  bool mutex = name.find("redmutex") != std::string::npos;
  bool blocking_lock = name.ends_with("-lock");
  std::shared_ptr<sw::redis::LockWatcher> watcher;  // null: each RedMutex starts its own
  if (name.ends_with("-shared-watcher")) watcher = std::make_shared<sw::redis::LockWatcher>();
  for (int t = 0; t < threads; ++t) {
    std::string key = prefix + name + ":" + std::to_string(t);
    if (mutex) {
      sw::redis::RedMutexOptions o;
      o.ttl = lease;
      cs.mutexes.push_back(std::make_unique<sw::redis::RedMutex>(redis, key, nullptr, o, watcher));
      auto* m = cs.mutexes.back().get();
      if (blocking_lock)
        cs.fns.emplace_back([m] {
          m->lock();
          m->unlock();
          return true;
        });
      else
        cs.fns.emplace_back([m] {
          if (!m->try_lock()) return false;
          m->unlock();
          return true;
        });
    } else {
      cs.redlocks.push_back(std::make_unique<sw::redis::RedLockMutex>(redis, key));
      auto* m = cs.redlocks.back().get();
      cs.fns.emplace_back([m] {
        // A fresh RedLock per pair, as a scoped lock would be: a new random value each time.
        sw::redis::RedLock<sw::redis::RedLockMutex> l(*m, std::defer_lock);
        if (!l.try_lock(lease)) return false;
        l.unlock();
        return true;
      });
    }
  }
}

std::string run_case(const options& opt, const std::string& name, const std::string& prefix) {
  int threads = name.find("-B2-") != std::string::npos ? opt.threads : 1;
  sw::redis::ConnectionOptions co;
  co.host = opt.host;
  co.port = opt.port;
  co.socket_timeout = 5000ms;
  co.connect_timeout = 2000ms;
  sw::redis::ConnectionPoolOptions po;
  po.size = opt.pool;
  po.wait_timeout = 5000ms;
  auto redis = std::make_shared<sw::redis::Redis>(co, po);
  redis->ping();

  case_state cs;
  build_case(cs, name, redis, prefix, threads);
  run(cs.fns, opt.warmup, nullptr, nullptr);
  usage a, b;
  auto res = run(cs.fns, opt.seconds, &a, &b);

  double ops = 0, failed = 0;
  std::vector<float> lat;
  for (auto& r : res) {
    ops += static_cast<double>(r.ops);
    failed += static_cast<double>(r.failed);
    lat.insert(lat.end(), r.lat.begin(), r.lat.end());
  }
  double secs = std::chrono::duration<double>(b.t - a.t).count();
  std::ostringstream o;
  o << "{\"case\":\"" << name << "\",\"ops_per_s\":" << jnum(ops / secs)
    << ",\"p50_us\":" << jnum(percentile(lat, 0.5)) << ",\"p99_us\":" << jnum(percentile(lat, 0.99))
    << ",\"client_cpu_us_per_op\":" << jnum(ops > 0 ? (b.cpu - a.cpu) * 1e6 / ops : 0)
    << ",\"context_switches_per_op\":" << jnum(ops > 0 ? static_cast<double>(b.csw - a.csw) / ops : 0)
    << ",\"client_cpu_pct\":" << jnum(100 * (b.cpu - a.cpu) / secs) << ",\"ops\":" << jnum(ops)
    << ",\"failed\":" << jnum(failed) << ",\"seconds\":" << jnum(secs) << ",\"threads\":" << threads
    << ",\"pool_size\":" << opt.pool << ",\"library\":\"redis-plus-plus\"}";
  cs.fns.clear();
  cs.mutexes.clear();  // joins the watcher threads
  cs.redlocks.clear();
  return o.str();
}

[[noreturn]] void usage_exit(const char* argv0) {
  std::cerr << "usage: " << argv0
            << " --port N [--host 127.0.0.1] [--only case,...] [--seconds 3] [--warmup 0.3]"
               " [--threads 16] [--pool 16]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage_exit(argv[0]);
    std::string v = argv[++i];
    if (a == "--host") opt.host = v;
    else if (a == "--port") opt.port = std::atoi(v.c_str());
    else if (a == "--only") opt.only = v;
    else if (a == "--seconds") opt.seconds = std::atof(v.c_str());
    else if (a == "--warmup") opt.warmup = std::atof(v.c_str());
    else if (a == "--threads") opt.threads = std::atoi(v.c_str());
    else if (a == "--pool") opt.pool = static_cast<std::size_t>(std::atoll(v.c_str()));
    else usage_exit(argv[0]);
  }
  if (opt.port <= 0 || opt.seconds <= 0 || opt.seconds > 600 || opt.warmup < 0 || opt.threads < 1 ||
      opt.threads > 1024 || opt.pool < 1)
    usage_exit(argv[0]);

  auto prefix = key_prefix();
  int rc = 0;
  std::stringstream ss(opt.only);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) continue;
    static const char* known[] = {"rpp-B1-redmutex", "rpp-B1-redlock", "rpp-B2-redmutex", "rpp-B2-redlock",
                                  "rpp-B2-redmutex-shared-watcher", "rpp-B1-redmutex-lock",
                                  "rpp-B2-redmutex-lock"};
    if (std::find(std::begin(known), std::end(known), name) == std::end(known)) {
      std::cerr << "unknown case: " << name << "\n";
      return 2;
    }
    try {
      std::cout << run_case(opt, name, prefix) << std::endl;
    } catch (const std::exception& e) {
      std::string msg;
      for (char c : std::string(e.what()))
        msg += (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) ? '\'' : c;
      std::cout << "{\"case\":\"" << name << "\",\"error\":\"" << msg << "\"}" << std::endl;
      rc = 1;
    }
  }
  return rc;
}
