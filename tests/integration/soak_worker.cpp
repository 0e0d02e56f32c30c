// SPDX-License-Identifier: MIT
// A separate process for the chaos and soak tests, so that a lock holder can be frozen (SIGSTOP)
// or killed (SIGKILL) while it holds a lock.
//
//   soak_worker hold URL NAME WATCHDOG_MS REQUEST_TIMEOUT_MS reentrant|mutex
//     Takes the lock (watchdog lease), prints "locked", then answers commands read from stdin, one
//     per line: "valid" -> "valid 0|1", "unlock" -> "unlock <result>", "count" -> "count N".
//     When the lock is lost it prints "lost <reason>" (from the on_lost callback). Exits at EOF.
//
//   soak_worker soak URL LOG SECONDS THREADS WATCHDOG_MS REQUEST_TIMEOUT_MS TAG LOCK:KIND...
//     THREADS threads loop for SECONDS: try_lock (wait 3 s), a short critical section (sometimes
//     reentered), then valid() and unlock. Each critical section is appended to LOG as one line
//     (one write(2), O_APPEND), on CLOCK_MONOTONIC, which every process shares:
//       S <lock> <holder> <start_ns> <end_ns> <valid_until_ns> <valid 0|1> <unlock result> <depth>
//         <1 if an unlock failed with request_timeout and was retried, else 0>
//     Seeds are fixed (TAG, thread). Prints "id <client uuid>" at start, "summary acquisitions=N
//     told=N errors=N timeouts=N" at the end.
//
//   soak_worker fenced URL LOG SECONDS THREADS LEASE_MS WAIT_MS REQUEST_TIMEOUT_MS TAG PHASE_FILE SLOT
//                      LOCK:KIND...
//     The fencing soak (fencing_soak_test). THREADS threads loop for SECONDS, thread t on lock t % n
//     of the n locks given (kinds reentrant, mutex, fair, read, write): try_lock_and_get_token (wait
//     WAIT_MS, fixed lease LEASE_MS, no watchdog), then one write of "<holder> <token>" with that
//     token to the resource "<lock>:resource" through the library's fenced_set.lua, wrapped so that
//     the resource also appends each value it accepts to the list "<lock>:accepted", then unlock.
//     Two sections in three work 5-30 ms before writing (late), the others write at once and work
//     after. While a thread is between its grant of lock j and a late write, the int at index
//     SLOT * n + j of the shared file PHASE_FILE counts it, so that the test can freeze the process
//     then. Each grant is appended to LOG as one `soak::fenced_write` record (soak_section.hpp).
//     Seeds are fixed (SLOT, thread). Prints "id <client uuid>" at start, "summary grants=N
//     accepted=N refused=N errors=N timeouts=N" at the end.
//
// Unlock results: ok, lock_lost, not_owner, or err:<code> (another error, after retries).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "redlease/redlease.hpp"
#include "redlease_lua.hpp"
#include "soak_section.hpp"

namespace {

using namespace std::chrono_literals;
using redlease::soak::result_name;
using redlease::soak::steady;
using redlease::soak::write_line;

const char* reason_name(redlease::lost_reason r) { return redlease::lost_reason_name(r); }

redlease::config make_config(const std::string& url, long long watchdog_ms, long long request_ms) {
  auto c = redlease::config::from_url(url);
  c.watchdog_timeout = std::chrono::milliseconds(watchdog_ms);
  c.request_timeout = std::chrono::milliseconds(request_ms);
  c.connect_timeout = 1000ms;
  c.reconnect_min_delay = 10ms;
  c.reconnect_max_delay = 100ms;
  return c;
}

redlease::detail::lock_handle make_handle(redlease::client& c, const std::string& name, const std::string& kind) {
  if (kind == "mutex") return c.mutex(name);
  if (kind == "fair") return c.fair_lock(name);
  if (kind == "read") return c.read_lock(name);
  if (kind == "write") return c.write_lock(name);
  return c.lock(name);
}

int hold(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: soak_worker hold URL NAME WATCHDOG_MS REQUEST_TIMEOUT_MS reentrant|mutex\n";
    return 64;
  }
  redlease::client c{make_config(argv[2], std::atoll(argv[4]), std::atoll(argv[5]))};
  auto l = make_handle(c, argv[3], argv[6]);
  l.on_lost([](const redlease::lost_info& i) { write_line(STDOUT_FILENO, std::string("lost ") + reason_name(i.reason)); });
  l.lock();
  write_line(STDOUT_FILENO, "locked " + c.id() + ":" + std::to_string(redlease::this_thread_owner()));
  std::string cmd;
  while (std::getline(std::cin, cmd)) {
    if (cmd == "valid") {
      write_line(STDOUT_FILENO, std::string("valid ") + (l.valid() ? "1" : "0"));
    } else if (cmd == "unlock") {
      std::error_code ec;
      l.unlock(ec);
      write_line(STDOUT_FILENO, "unlock " + result_name(ec));
    } else if (cmd == "count") {
      std::error_code ec;
      auto n = l.hold_count(ec);
      write_line(STDOUT_FILENO, "count " + (ec ? result_name(ec) : std::to_string(n)));
    } else {
      write_line(STDOUT_FILENO, "unknown " + cmd);
    }
  }
  return 0;
}

int soak(int argc, char** argv) {
  if (argc < 11) {
    std::cerr << "usage: soak_worker soak URL LOG SECONDS THREADS WATCHDOG_MS REQUEST_TIMEOUT_MS TAG LOCK:KIND...\n";
    return 64;
  }
  std::string url = argv[2];
  int log = ::open(argv[3], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (log < 0) {
    std::perror("soak_worker: open log");
    return 1;
  }
  auto seconds = std::atof(argv[4]);
  int threads = std::atoi(argv[5]);
  std::string tag = argv[8];
  std::vector<std::pair<std::string, std::string>> locks;
  for (int i = 9; i < argc; ++i) {
    std::string s = argv[i];
    auto colon = s.find(':');
    locks.emplace_back(s.substr(0, colon), colon == std::string::npos ? "reentrant" : s.substr(colon + 1));
  }
  redlease::client c{make_config(url, std::atoll(argv[6]), std::atoll(argv[7]))};
  write_line(STDOUT_FILENO, "id " + c.id());  // lets the test see which locks this process holds
  const auto end = steady::now() + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
  std::atomic<long long> acquisitions{0}, told{0}, errors{0}, timeouts{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const auto& [name, kind] = locks[static_cast<std::size_t>(t) % locks.size()];
      auto l = make_handle(c, name, kind);
      std::string holder = tag + "." + std::to_string(t);
      std::minstd_rand rng(2000u + static_cast<unsigned>(tag.back()) * 64u + static_cast<unsigned>(t));  // fixed seed
      while (steady::now() < end) {
        std::error_code ec;
        bool got = l.try_lock(3000ms, ec);
        if (ec) {
          ++errors;
          write_line(STDERR_FILENO, "soak_worker " + holder + ": try_lock: " + ec.message());
          std::this_thread::sleep_for(10ms);  // back off after a failed attempt
          continue;
        }
        if (!got) {
          ++timeouts;
          continue;
        }
        ++acquisitions;
        auto sec = redlease::soak::critical_section(l, kind == "reentrant", rng);
        if (sec.told()) ++told;
        if (sec.unlock && sec.unlock != redlease::errc::lock_lost) {
          ++errors;
          write_line(STDERR_FILENO, "soak_worker " + holder + ": unlock: " + sec.unlock.message());
        }
        write_line(log, redlease::soak::record(name, holder, sec));
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 10));  // work outside the lock
      }
    });
  }
  for (auto& th : ts) th.join();
  ::close(log);
  write_line(STDOUT_FILENO, "summary acquisitions=" + std::to_string(acquisitions.load()) +
                                " told=" + std::to_string(told.load()) + " errors=" + std::to_string(errors.load()) +
                                " timeouts=" + std::to_string(timeouts.load()));
  return 0;
}

// The fenced soak's resource write: the library's own fenced_set.lua, unchanged, run as a function,
// and each value it accepts appended to the list KEYS[2], in the order the resource accepted them.
std::string fenced_set_with_history() {
  return "local function fenced_set()\n" + std::string(redlease::detail::lua::fenced_set.body) +
         "\nend\nlocal r = fenced_set()\nif r == 1 then redis.call('rpush', KEYS[2], ARGV[2]) end\nreturn r\n";
}

int fenced(int argc, char** argv) {
  if (argc < 13) {
    std::cerr << "usage: soak_worker fenced URL LOG SECONDS THREADS LEASE_MS WAIT_MS REQUEST_TIMEOUT_MS TAG "
                 "PHASE_FILE SLOT LOCK:KIND...\n";
    return 64;
  }
  std::string url = argv[2];
  int log = ::open(argv[3], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (log < 0) {
    std::perror("soak_worker: open log");
    return 1;
  }
  auto seconds = std::atof(argv[4]);
  int threads = std::atoi(argv[5]);
  const std::chrono::milliseconds lease(std::atoll(argv[6]));
  const std::chrono::milliseconds wait(std::atoll(argv[7]));
  std::string tag = argv[9];
  int slot = std::atoi(argv[11]);
  std::vector<std::pair<std::string, std::string>> locks;
  for (int i = 12; i < argc; ++i) {
    std::string s = argv[i];
    auto colon = s.find(':');
    locks.emplace_back(s.substr(0, colon), colon == std::string::npos ? "reentrant" : s.substr(colon + 1));
  }
  constexpr std::size_t page = 4096;
  if (slot < 0 || (static_cast<std::size_t>(slot) + 1) * locks.size() > page / sizeof(int)) {
    std::cerr << "soak_worker: bad SLOT\n";
    return 64;
  }
  int pfd = ::open(argv[10], O_RDWR | O_CLOEXEC);
  if (pfd < 0) {
    std::perror("soak_worker: open phase file");
    return 1;
  }
  void* mem = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
  ::close(pfd);
  if (mem == MAP_FAILED) {
    std::perror("soak_worker: mmap phase file");
    return 1;
  }
  int* const before_write = static_cast<int*>(mem) + static_cast<std::size_t>(slot) * locks.size();
  const std::string script = fenced_set_with_history();
  redlease::client c{make_config(url, lease.count(), std::atoll(argv[8]))};
  write_line(STDOUT_FILENO, "id " + c.id());
  const auto end = steady::now() + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
  std::atomic<long long> grants{0}, accepted{0}, refused{0}, errors{0}, timeouts{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const std::size_t j = static_cast<std::size_t>(t) % locks.size();
      auto l = make_handle(c, locks[j].first, locks[j].second);
      const std::string holder = tag + "." + std::to_string(t);
      std::minstd_rand rng(1000u + static_cast<unsigned>(slot) * 64u + static_cast<unsigned>(t));  // fixed seed
      while (steady::now() < end) {
        redlease::soak::fenced_write w;
        w.lock = l.name();
        w.holder = holder;
        std::error_code ec;
        w.requested = redlease::soak::ns(steady::now());
        auto token = l.try_lock_and_get_token(wait, lease, ec);
        w.acquired = redlease::soak::ns(steady::now());
        if (ec) {
          ++errors;
          write_line(STDERR_FILENO, "soak_worker " + holder + ": try_lock_and_get_token " + w.lock + ": " +
                                        ec.message());
          std::this_thread::sleep_for(10ms);  // back off after a failed attempt
          continue;
        }
        if (!token) {
          ++timeouts;
          continue;
        }
        ++grants;
        w.token = *token;
        w.late = rng() % 3 != 0;
        const auto work = std::chrono::milliseconds(5 + rng() % 26);
        if (w.late) {
          std::atomic_ref<int>(before_write[j]).fetch_add(1);
          std::this_thread::sleep_for(work);  // the section's work, before its write
          std::atomic_ref<int>(before_write[j]).fetch_sub(1);
        }
        const std::string value = holder + " " + std::to_string(w.token);
        w.write_sent = redlease::soak::ns(steady::now());
        auto r = c.command(std::vector<std::string>{"EVAL", script, "2", w.lock + ":resource", w.lock + ":accepted",
                                                    std::to_string(w.token), value},
                           ec);
        w.write_done = redlease::soak::ns(steady::now());
        if (ec || !r.is_integer()) {
          ++errors;
          w.result = "err:" + std::to_string(ec ? ec.value() : -1);
          write_line(STDERR_FILENO, "soak_worker " + holder + ": fenced write " + w.lock + ": " +
                                        (ec ? ec.message() : std::string("not an integer reply")));
        } else if (r.integer == 1) {
          ++accepted;
          w.result = "accepted";
        } else {
          ++refused;
          w.result = "refused";
        }
        if (!w.late) std::this_thread::sleep_for(work);  // the section's work, after its write
        std::error_code un;
        for (int i = 0; i < 3; ++i) {
          l.unlock(un);
          if (!redlease::soak::transient(un)) break;
        }
        // A holder paused past its lease is told at its unlock: lock_lost (or not_owner).
        if (un && un != redlease::errc::lock_lost && un != redlease::errc::not_owner) {
          ++errors;
          write_line(STDERR_FILENO, "soak_worker " + holder + ": unlock " + w.lock + ": " + un.message());
        }
        write_line(log, w.record());
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 5));  // work outside the lock
      }
    });
  }
  for (auto& th : ts) th.join();
  ::close(log);
  ::munmap(mem, page);
  write_line(STDOUT_FILENO, "summary grants=" + std::to_string(grants.load()) +
                                " accepted=" + std::to_string(accepted.load()) +
                                " refused=" + std::to_string(refused.load()) +
                                " errors=" + std::to_string(errors.load()) +
                                " timeouts=" + std::to_string(timeouts.load()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Never outlive the test that started us.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 1;
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "hold") return hold(argc, argv);
    if (mode == "soak") return soak(argc, argv);
    if (mode == "fenced") return fenced(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "soak_worker: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: soak_worker hold|soak|fenced ...\n";
  return 64;
}
