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
//     Prints "id <client uuid>" at start, "summary acquisitions=N told=N errors=N timeouts=N" at the end.
//
// Unlock results: ok, lock_lost, not_owner, or err:<code> (another error, after retries).
#include <fcntl.h>
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
#include "soak_section.hpp"

namespace {

using namespace std::chrono_literals;
using redlease::soak::result_name;
using redlease::soak::steady;
using redlease::soak::write_line;

const char* reason_name(redlease::lost_reason r) {
  switch (r) {
    case redlease::lost_reason::expired: return "expired";
    case redlease::lost_reason::deleted: return "deleted";
    case redlease::lost_reason::taken: return "taken";
  }
  return "unknown";
}

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
      std::minstd_rand rng(static_cast<unsigned>(::getpid() * 131 + t));
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

}  // namespace

int main(int argc, char** argv) {
  // Never outlive the test that started us.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 1;
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "hold") return hold(argc, argv);
    if (mode == "soak") return soak(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "soak_worker: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: soak_worker hold|soak ...\n";
  return 64;
}
