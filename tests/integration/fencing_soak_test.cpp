// SPDX-License-Identifier: MIT
// Fencing soak: Kleppmann's scenario, many times over. Lock holders are SIGSTOPped past their lease
// between their grant and their write to a resource that checks fencing tokens; no stale write may
// be accepted.
//
// Three worker processes (soak_worker fenced) each loop over a reentrant lock, a mutex, a fair lock
// and a write lock, one thread per lock (one name per kind; fixed 400 ms leases, no watchdog): take
// the lock with a fencing token, then write "<holder> <token>" to that lock's resource with the
// token, through the library's own fenced_set.lua wrapped so that the resource also appends every
// value it accepts to a list (the order in which it accepted them, which the checker reads back).
// Two sections in three work before they write (so that a pause can land between grant and
// write), the others write at once. Each grant and its write is one record of a shared log
// (O_APPEND, CLOCK_MONOTONIC, which all processes share; see soak_section.hpp).
//
// This test freezes the workers on a fixed timetable: the k-th freeze stops worker k % 3 (SIGSTOP,
// lease + 500 ms, SIGCONT), first waiting (up to 600 ms) until that worker has a thread between a
// grant of lock k % 4 and a late write (counters in a page the processes share), so that every kind
// gets frozen holders. The frozen holder's lease runs out, the next holder takes the lock with a
// larger token and writes; the frozen one wakes and writes with its old token. The checker asserts,
// per lock name:
//   - no token was granted twice, and a grant asked for after another returned has a larger token;
//   - the tokens the resource accepted, in its order, never decrease (stale writes accepted: 0);
//     and by the clock, no accepted write was sent after a write with a larger token had been
//     accepted;
//   - the resource's list and the holders' log agree on which writes were accepted, and every
//     refused write had a larger token accepted by the resource;
// and that the scenario really happened: holders frozen past their lease between grant and write,
// with refused writes among theirs (for every kind); late writes (sent after a grant with a larger
// token had returned); and overwrites prevented (writes sent after a larger token's write had been
// accepted, which a resource without the token check would have let clobber it).
//
// Quick by default (15 s of load; CTest runs this). REDLEASE_SOAK_SECONDS=N runs longer by hand.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "fault_proxy.hpp"
#include "lock_test_support.hpp"
#include "soak_section.hpp"

namespace redlease::test {
namespace {

using ms = std::chrono::milliseconds;
using soak::fenced_write;

constexpr ms lease{400};
constexpr ms freeze_for = lease + ms{500};  // past the lease, with time for the next holder to write
// A worker's wait for a lock. (A fair lock's queued waiter counts as alive until its deadline, its
// wait plus those of the waiters queued before it: a frozen waiter at the head of the queue holds up
// the live ones behind it. One thread per lock per process keeps a frozen holder's own process out
// of the queue behind it, so that the next holder is a live one.)
constexpr ms wait_for_lock{2000};
constexpr ms request_timeout{2000};
constexpr ms first_freeze{800};
constexpr ms freeze_period{1400};
constexpr ms catch_limit{600};  // how long a freeze waits for a holder between grant and write
constexpr int worker_count = 3;

double soak_seconds() {
  if (const char* s = std::getenv("REDLEASE_SOAK_SECONDS")) {
    double v = std::atof(s);
    if (v > 0) return v;
  }
  return 15;  // the quick size
}

struct freeze_window {
  std::string process;
  long long from = 0, to = 0;  // inside the time the process was stopped
};

// The highest token among (time, token) points whose time is before t; 0 if none.
class max_token_before {
 public:
  explicit max_token_before(std::vector<std::pair<long long, std::uint64_t>> points) : points_(std::move(points)) {
    std::sort(points_.begin(), points_.end());
    std::uint64_t m = 0;
    for (auto& p : points_) p.second = m = std::max(m, p.second);
  }
  std::uint64_t operator()(long long t) const {
    auto it = std::lower_bound(points_.begin(), points_.end(), std::pair<long long, std::uint64_t>{t, 0});
    return it == points_.begin() ? 0 : std::prev(it)->second;
  }

 private:
  std::vector<std::pair<long long, std::uint64_t>> points_;
};

// Removes a file at the end of the scope, whatever ends the test.
struct unlink_at_exit {
  std::string path;
  ~unlink_at_exit() { ::unlink(path.c_str()); }
};

// A page shared with the workers: slot i * (number of locks) + j counts worker i's threads between a
// grant of lock j and a late write.
class shared_page {
 public:
  shared_page() {
    char path[] = "/tmp/redlease-fsoak-page-XXXXXX";
    int fd = ::mkstemp(path);
    if (fd < 0) throw std::runtime_error("mkstemp");
    path_ = path;
    if (::ftruncate(fd, size) != 0) {
      ::close(fd);
      throw std::runtime_error("ftruncate");
    }
    mem_ = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (mem_ == MAP_FAILED) throw std::runtime_error("mmap");
  }
  ~shared_page() {
    ::munmap(mem_, size);
    ::unlink(path_.c_str());
  }
  shared_page(const shared_page&) = delete;
  shared_page& operator=(const shared_page&) = delete;
  const std::string& path() const { return path_; }
  int load(int slot) const { return std::atomic_ref<int>(static_cast<int*>(mem_)[slot]).load(); }

  static constexpr std::size_t size = 4096;

 private:
  std::string path_;
  void* mem_ = nullptr;
};

class fencing_soak_test : public lock_fixture {};

TEST_F(fencing_soak_test, holders_frozen_past_their_lease_never_get_a_stale_write_accepted) {
  const double seconds = soak_seconds();
  const std::vector<std::pair<std::string, std::string>> locks{
      {"fsoak-r", "reentrant"}, {"fsoak-m", "mutex"}, {"fsoak-f", "fair"}, {"fsoak-w", "write"}};

  char path[] = "/tmp/redlease-fsoak-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string log_path = path;
  const unlink_at_exit remove_log{log_path};
  shared_page page;

  const auto t_begin = steady::now();
  const auto end = t_begin + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
  std::ostringstream secs;
  secs << seconds;
  std::vector<std::unique_ptr<child_process>> workers;
  std::vector<std::string> tags;
  for (int i = 0; i < worker_count; ++i) {
    tags.push_back("p" + std::string(1, static_cast<char>('A' + i)));
    std::vector<std::string> argv{SOAK_WORKER_PATH,
                                  "fenced",
                                  server().url(),
                                  log_path,
                                  secs.str(),
                                  std::to_string(locks.size()),  // one thread per lock
                                  std::to_string(lease.count()),
                                  std::to_string(wait_for_lock.count()),
                                  std::to_string(request_timeout.count()),
                                  tags.back(),
                                  page.path(),
                                  std::to_string(i)};
    for (auto& [name, kind] : locks) argv.push_back(name + ":" + kind);
    workers.push_back(std::make_unique<child_process>(argv));
  }
  for (std::size_t i = 0; i < workers.size(); ++i)
    ASSERT_TRUE(workers[i]->read_line_starting("id ", 10000ms)) << "worker " << tags[i] << " did not start";

  // The freezes, on a fixed timetable: worker k % 3 at first_freeze + k * freeze_period, caught
  // between a grant of lock k % 4 and a late write if it gets there within catch_limit. None in the
  // last second, so that every frozen holder writes before its worker stops.
  std::vector<freeze_window> freezes;
  int caught = 0;
  for (int k = 0;; ++k) {
    const auto at = t_begin + first_freeze + k * freeze_period;
    if (at + catch_limit + freeze_for + 1000ms > end) break;
    std::this_thread::sleep_until(at);
    const int i = k % worker_count;
    const int slot = i * static_cast<int>(locks.size()) + k % static_cast<int>(locks.size());
    auto& w = *workers[static_cast<std::size_t>(i)];
    if (eventually([&] { return page.load(slot) > 0; }, catch_limit)) ++caught;
    if (!w.running() || !w.freeze()) {
      ADD_FAILURE() << "could not freeze worker " << tags[static_cast<std::size_t>(i)];
      break;
    }
    freeze_window f{tags[static_cast<std::size_t>(i)], soak::ns(steady::now()), 0};
    std::this_thread::sleep_for(freeze_for);  // frozen past its lease
    f.to = soak::ns(steady::now());
    EXPECT_TRUE(w.thaw());
    freezes.push_back(f);
  }

  std::map<std::string, std::string> summaries;
  long long worker_errors = 0;
  for (int i = 0; i < worker_count; ++i) {
    const auto& tag = tags[static_cast<std::size_t>(i)];
    auto& w = *workers[static_cast<std::size_t>(i)];
    auto line = w.read_line_starting("summary", ms(static_cast<long long>(seconds * 1000) + 20000));
    EXPECT_TRUE(line) << "worker " << tag << " did not finish";
    if (line) {
      summaries[tag] = *line;
      auto p = line->find("errors=");
      if (p != std::string::npos) worker_errors += std::atoll(line->c_str() + p + 7);
    }
    auto st = w.wait_exit(10000ms);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "worker " << tag;
  }

  // ---- the checker
  std::map<std::string, std::vector<fenced_write>> by_lock;
  long long bad_records = 0;
  {
    std::ifstream in(log_path);
    std::string line;
    while (std::getline(in, line)) {
      auto w = fenced_write::parse(line);
      if (!w) {
        ++bad_records;
        ADD_FAILURE() << "bad record: " << line;
        continue;
      }
      by_lock[w->lock].push_back(*w);
    }
  }

  // Frozen past its lease between grant and write: a freeze of its process began after the grant
  // returned (so the lease had begun) and ended, longer than the lease, before the write was sent.
  auto frozen_before_write = [&](const fenced_write& w) {
    for (auto& f : freezes)
      if (f.process == w.process() && f.from >= w.acquired && f.to <= w.write_sent &&
          f.to - f.from > std::chrono::nanoseconds(lease).count())
        return true;
    return false;
  };

  long long writes = 0, accepted = 0, refused = 0, write_errors = 0;
  long long duplicate_tokens = 0, token_order_violations = 0;
  long long history_decreases = 0, stale_accepted = 0, history_mismatches = 0, unexplained_refusals = 0;
  long long frozen_holders = 0, frozen_refused = 0, late_writes = 0, late_accepted = 0, prevented = 0;
  raw_client& r = raw();
  client checker(cfg());
  std::ostringstream per_lock;
  for (auto& [name, kind] : locks) {
    auto& ws = by_lock[name];
    long long lock_accepted = 0, lock_refused = 0, lock_frozen = 0, lock_frozen_refused = 0;

    // Tokens: one per grant, and growing with real time across grants.
    std::map<std::uint64_t, int> seen;
    for (auto& w : ws)
      if (++seen[w.token] == 2) {
        ++duplicate_tokens;
        ADD_FAILURE() << name << ": token " << w.token << " granted twice";
      }
    std::vector<std::pair<long long, std::uint64_t>> acquired_points, accepted_points;
    for (auto& w : ws) {
      acquired_points.emplace_back(w.acquired, w.token);
      if (w.result == "accepted") accepted_points.emplace_back(w.write_done, w.token);
    }
    const max_token_before granted_before(acquired_points), accepted_before(accepted_points);
    for (auto& w : ws)
      if (granted_before(w.requested) >= w.token) {
        ++token_order_violations;
        ADD_FAILURE() << name << ": " << w.holder << " asked after a grant of token " << granted_before(w.requested)
                      << " had returned, and got " << w.token;
      }

    // The resource's own order of acceptance.
    std::multiset<std::string> history;
    std::uint64_t highest = 0;
    for (auto& e : r({"LRANGE", name + ":accepted", "0", "-1"}).elements) {
      history.insert(e.str);
      const auto t = static_cast<std::uint64_t>(std::strtoull(e.str.substr(e.str.find(' ') + 1).c_str(), nullptr, 10));
      if (t < highest) {
        ++history_decreases;
        ADD_FAILURE() << name << ": the resource accepted token " << t << " after " << highest;
      }
      highest = std::max(highest, t);
    }
    if (!ws.empty()) {
      auto last = r({"HGET", name + ":resource", "token"}).str;
      EXPECT_EQ(last, std::to_string(highest)) << name << ": the resource's token is not the highest it accepted";
      // The library's fenced_set on the same resource: an old token is refused.
      EXPECT_FALSE(checker.fenced_set(name + ":resource", 1, "stale")) << name;
    }

    std::multiset<std::string> maybe_written;  // accepted, or failed with its effect unknown
    for (auto& w : ws)
      if (w.result != "refused") maybe_written.insert(w.holder + " " + std::to_string(w.token));
    for (auto& v : history)
      if (maybe_written.count(v) == 0) {
        ++history_mismatches;
        ADD_FAILURE() << name << ": the resource accepted " << v << ", which no holder reports accepted";
      }

    for (auto& w : ws) {
      ++writes;
      const std::string value = w.holder + " " + std::to_string(w.token);
      const bool in_history = history.count(value) > 0;
      if (w.result == "accepted") {
        ++accepted;
        ++lock_accepted;
        if (!in_history) {
          ++history_mismatches;
          ADD_FAILURE() << name << ": " << value << " accepted but not in the resource's list";
        }
      } else if (w.result == "refused") {
        ++refused;
        ++lock_refused;
        if (in_history) {
          ++history_mismatches;
          ADD_FAILURE() << name << ": " << value << " refused but in the resource's list";
        }
        if (highest <= w.token) {
          ++unexplained_refusals;
          ADD_FAILURE() << name << ": " << value << " refused, yet no larger token was ever accepted";
        }
      } else {
        ++write_errors;  // its effect is unknown: either way is consistent
      }
      // Late: sent after a grant with a larger token had returned, i.e. after the lock moved on.
      if (granted_before(w.write_sent) > w.token) {
        ++late_writes;
        if (w.result == "accepted") ++late_accepted;  // the newer holder had not written yet
      }
      // Sent after a larger token's write was accepted: without the token check it would overwrite it.
      if (accepted_before(w.write_sent) > w.token) {
        if (w.result == "accepted") {
          ++stale_accepted;
          ADD_FAILURE() << name << ": stale write accepted: " << value << " after token "
                        << accepted_before(w.write_sent);
        } else if (w.result == "refused") {
          ++prevented;
        }
      }
      if (frozen_before_write(w)) {
        ++frozen_holders;
        ++lock_frozen;
        if (w.result == "refused") {
          ++frozen_refused;
          ++lock_frozen_refused;
        }
      }
    }
    EXPECT_GT(lock_accepted, 0) << name;
    EXPECT_GT(lock_frozen_refused, 0) << name << ": no write of a holder frozen past its lease was refused";
    per_lock << " " << name << " (" << kind << ") " << ws.size() << "/" << lock_accepted << "/" << lock_refused << "/"
             << lock_frozen << "/" << lock_frozen_refused;
  }

  // REDLEASE_SOAK_TRACE=1: what each lock's holders did around each freeze.
  if (std::getenv("REDLEASE_SOAK_TRACE")) {
    for (auto& f : freezes) {
      std::cout << "[freeze] " << f.process << " " << f.from << " .. " << f.to << "\n";
      for (auto& [name, ws] : by_lock)
        for (auto& w : ws)
          if (w.write_done >= f.from - 100000000LL && w.acquired <= f.to + 100000000LL)
            std::cout << "  " << w.record() << (frozen_before_write(w) ? " frozen" : "") << "\n";
    }
  }
  std::cout << "[fencing soak] " << seconds << " s, " << worker_count << " processes x " << locks.size()
            << " threads, lease " << lease.count() << " ms; freezes " << freezes.size() << " of " << freeze_for.count()
            << " ms (" << caught << " caught a holder before its write)\n";
  std::cout << "[fencing soak] per lock, writes/accepted/refused/frozen holders/their writes refused:" << per_lock.str()
            << "\n";
  std::cout << "[fencing soak] late writes " << late_writes << " (accepted before the newer holder wrote: "
            << late_accepted << "), overwrites prevented " << prevented << ", duplicate tokens " << duplicate_tokens
            << ", token order violations " << token_order_violations << ", write errors " << write_errors
            << ", worker errors " << worker_errors << "\n";
  for (auto& [tag, line] : summaries) std::cout << "[fencing soak] worker " << tag << ": " << line << "\n";
  std::cout << "[fencing soak] writes " << writes << ", accepted " << accepted << ", refused " << refused
            << ", stale accepted " << history_decreases << " (by the clock: " << stale_accepted << "), frozen holders "
            << frozen_holders << " (refused " << frozen_refused << ")\n"
            << std::flush;

  EXPECT_EQ(bad_records, 0);
  EXPECT_EQ(duplicate_tokens, 0);
  EXPECT_EQ(token_order_violations, 0);
  EXPECT_EQ(history_decreases, 0);
  EXPECT_EQ(stale_accepted, 0);
  EXPECT_EQ(history_mismatches, 0);
  EXPECT_EQ(unexplained_refusals, 0);
  // Only freezes are injected, shorter than the request timeout: every acquisition, write and unlock
  // gets its answer (a frozen holder's unlock is told lock_lost or not_owner, not an error). The
  // workers print each error on their stderr.
  EXPECT_EQ(worker_errors, 0);
  EXPECT_EQ(write_errors, 0);
  // The scenario happened: without these the zeros above prove nothing.
  EXPECT_GT(static_cast<long long>(freezes.size()), 0);
  EXPECT_GT(frozen_holders, 0);
  EXPECT_GT(frozen_refused, 0);
  EXPECT_GT(late_writes, 0);
  EXPECT_GT(prevented, 0);
  EXPECT_GE(writes, static_cast<long long>(seconds * 20));
}

}  // namespace
}  // namespace redlease::test
