// SPDX-License-Identifier: MIT
// `redlease demo`: shows, live and in a few seconds, each thing the product does; every step ends
// in a checked verdict. Without --redis it runs against a private redis-server it starts itself.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <iostream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "local_server.hpp"
#include "redlease/redlease.hpp"

extern char** environ;

namespace redlease::cli {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

double ms_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct verdict {
  std::string step;
  bool pass = false;
  std::string figure;
};

void say(const std::string& s) { std::cout << s << std::endl; }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

long long counter_value(client& c, const std::string& key) {
  auto r = c.command({"GET", key});
  return r.is_nil() ? 0 : std::stoll(r.str);
}

// One increment of a shared non-atomic counter: read, then write, under the caller's lock.
void increment(client& c, const std::string& key) {
  long long n = counter_value(c, key);
  c.command({"SET", key, std::to_string(n + 1)});
}

// ---- 1. watchdog -------------------------------------------------------------------------------

verdict step_watchdog(const config& base) {
  say("\n[1/5] Watchdog: a job works 3 s holding a lock whose watchdog timeout is 1 s");
  auto cfg = base;
  cfg.watchdog_timeout = 1000ms;
  client c{cfg};
  client observer{base};
  auto l = c.lock("demo:watchdog");
  l.lock();
  auto t0 = steady::now();
  long long min_ttl = 1 << 30, last_ttl = 1000;
  int renewals_seen = 0;
  while (steady::now() - t0 < 3s) {
    long long ttl = observer.command({"PTTL", "demo:watchdog"}).integer;
    min_ttl = std::min(min_ttl, ttl);
    if (ttl > last_ttl + 50) {
      ++renewals_seen;
      say("      t=" + fmt("%.2f", ms_between(t0, steady::now()) / 1000) + "s  ttl " + std::to_string(last_ttl) +
          " ms -> " + std::to_string(ttl) + " ms  (renewed by the watchdog)");
    }
    last_ttl = ttl;
    if (ttl <= 0) break;
    std::this_thread::sleep_for(25ms);
  }
  bool held = l.valid() && l.is_held_by_current_thread();
  l.unlock();
  bool gone = observer.command({"EXISTS", "demo:watchdog"}).integer == 0;
  verdict v{"watchdog", held && min_ttl > 0 && gone && renewals_seen >= 6, ""};
  v.figure = std::to_string(renewals_seen) + " renewals in 3 s, min TTL " + std::to_string(min_ttl) +
             " ms, key gone after unlock: " + (gone ? "yes" : "no");
  say(std::string("      ") + (v.pass ? "PASS" : "FAIL") + "  " + v.figure);
  return v;
}

// ---- 2. mutual exclusion -----------------------------------------------------------------------

verdict step_exclusion(const config& base, const std::string& url, const std::string& self) {
  const int threads = 7, iterations = 60;
  say("\n[2/5] Mutual exclusion: 8 workers (7 threads + 1 child process) increment a non-atomic counter");
  client c{base};
  c.command({"DEL", "demo:counter"});
  // The child process: this same binary, hidden worker subcommand.
  std::vector<std::string> args{self, "__worker", "--redis", url};
  for (auto& a : tls_flag_args()) args.push_back(a);
  for (auto a : {std::string("demo:exclusion"), std::string("demo:counter"), std::to_string(iterations)})
    args.push_back(std::move(a));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t child = -1;
  bool spawned = posix_spawn(&child, self.c_str(), nullptr, nullptr, argv.data(), environ) == 0;

  std::mutex mu;
  std::vector<double> gaps;  // release -> next acquire by a thread that was waiting, in µs
  std::atomic<long long> last_release{0};
  auto t0 = steady::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      auto l = c.lock("demo:exclusion");
      for (int i = 0; i < iterations; ++i) {
        auto asked = steady::now().time_since_epoch().count();
        l.lock();
        auto got = steady::now().time_since_epoch().count();
        long long rel = last_release.load();
        if (rel > asked) {  // it waited for a release: the hand-off
          std::lock_guard g(mu);
          gaps.push_back((got - rel) / 1000.0);
        }
        increment(c, "demo:counter");
        last_release = steady::now().time_since_epoch().count();
        l.unlock();
      }
    });
  }
  for (auto& t : ts) t.join();
  int status = -1;
  if (spawned) waitpid(child, &status, 0);
  double secs = ms_between(t0, steady::now()) / 1000;
  long long expected = 8LL * iterations, got = counter_value(c, "demo:counter");
  std::sort(gaps.begin(), gaps.end());
  auto pct = [&](double p) { return gaps.empty() ? 0.0 : gaps[std::min(gaps.size() - 1, static_cast<std::size_t>(p * gaps.size()))]; };
  bool child_ok = spawned && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  verdict v{"mutual exclusion", got == expected && child_ok, ""};
  v.figure = "counter " + std::to_string(got) + "/" + std::to_string(expected) + ", " +
             fmt("%.0f", expected / secs) + " lock+increment+unlock/s, hand-off p50 " + fmt("%.0f", pct(0.5)) +
             " us, p99 " + fmt("%.0f", pct(0.99)) + " us (event-driven wake-up)";
  say(std::string("      ") + (v.pass ? "PASS" : "FAIL") + "  " + v.figure);
  return v;
}

// ---- 3. lost lock ------------------------------------------------------------------------------

verdict step_lost(const config& base) {
  say("\n[3/5] Lost lock: the key is deleted behind the holder's back (as a failover would)");
  auto cfg = base;
  cfg.watchdog_timeout = 1000ms;
  client c{cfg};
  client other{base};
  auto l = c.lock("demo:lost");
  std::promise<steady::time_point> told;
  l.on_lost([&](const lost_info&) { told.set_value(steady::now()); });
  l.lock();
  auto token = l.lost_token();
  std::this_thread::sleep_for(100ms);
  auto t0 = steady::now();
  other.command({"DEL", "demo:lost"});
  auto f = told.get_future();
  bool notified = f.wait_for(3s) == std::future_status::ready;
  double after = notified ? ms_between(t0, f.get()) : -1;
  std::error_code ec;
  l.unlock(ec);
  double interval = 1000.0 / 3;
  verdict v{"lost lock", notified && after < 2 * interval && token.stop_requested() && ec == errc::lock_lost, ""};
  v.figure = "holder told after " + fmt("%.0f", after) + " ms (renewal interval " + fmt("%.0f", interval) +
             " ms); stop_token stopped: " + (token.stop_requested() ? "yes" : "no") + "; unlock says: " + ec.message();
  say(std::string("      ") + (v.pass ? "PASS" : "FAIL") + "  " + v.figure);
  return v;
}

// ---- 4. fencing ---------------------------------------------------------------------------------

verdict step_fencing(const config& base) {
  say("\n[4/5] Fencing: a holder pauses past its lease; its late write is refused by the token check");
  client a{base};
  client b{base};
  auto la = a.mutex("demo:fenced");
  auto lb = b.mutex("demo:fenced");
  b.command({"DEL", "demo:storage"});
  auto ta = la.lock_and_get_token(300ms);  // a fixed lease, nothing renews it
  bool first = a.fenced_set("demo:storage", ta, "A, before the pause");
  say("      A holds the lock with token " + std::to_string(ta) + " and writes; then A is paused for longer than its lease");
  auto tb = lb.try_lock_and_get_token(3s);  // served when A's lease runs out
  bool b_wrote = tb && b.fenced_set("demo:storage", *tb, "B");
  say("      B gets the lock with token " + (tb ? std::to_string(*tb) : std::string("-")) + " and writes");
  bool late = a.fenced_set("demo:storage", ta, "A, after the pause");  // A wakes up and writes
  auto stored = b.command({"HGET", "demo:storage", "value"}).str;
  if (tb) lb.unlock();
  verdict v{"fencing", first && b_wrote && !late && stored == "B", ""};
  v.figure = std::string("A's late write (token ") + std::to_string(ta) + ") " + (late ? "ACCEPTED" : "refused") +
             "; the resource keeps \"" + stored + "\" (token " + (tb ? std::to_string(*tb) : std::string("-")) + ")";
  say(std::string("      ") + (v.pass ? "PASS" : "FAIL") + "  " + v.figure);
  return v;
}

// ---- 5. flash sale -----------------------------------------------------------------------------

struct sale_result {
  long long total = 0;
  long long orders = 0;
  double per_s = 0;
  bool exact = false;   // sold out, every unit exactly once: orders == total, each segment "0"
  std::string failure;  // the first error a buyer ended with, or why the sale did not end
};

// Buyers run as coroutines until the stock is sold out; each purchase either takes the segment's
// lock and decrements with a plain read-modify-write, or (atomic) deducts in one Lua call. The sale
// runs to the end so that the last units, where an oversell would happen, are always raced for.
sale_result run_sale(const config& base, const std::string& name, std::size_t segments, bool atomic, int buyers,
                     long long total) {
  client c{base};
  auto stock = c.stock(name, segments);
  stock.init(total);
  // The reentrant lock (Redisson's RLock, which the flash-sale articles use): its waiters sleep until
  // an unlock's message wakes the next one.
  std::vector<reentrant_lock> locks;
  for (std::size_t i = 0; i < segments; ++i) locks.push_back(c.lock(name + ":lock:" + std::to_string(i)));
  asio::io_context ioc;
  // The buyers all run on this thread (ioc's): plain variables.
  long long sold = 0;
  std::vector<char> empty(segments, 0);
  std::size_t empties = 0;
  std::string failure;
  auto t0 = steady::now();
  auto last_sale = t0;
  // A broken stock that never runs out (a take that deducts nothing) must not hang the demo.
  auto give_up = t0 + 30s;
  auto open = [&] { return failure.empty() && sold <= total && steady::now() < give_up; };
  // One buyer: buys until the stock is sold out.
  auto buyer = [&](owner_id owner, unsigned seed) -> asio::awaitable<void> {
    std::minstd_rand rng(seed + 1);
    if (atomic) {
      while (open() && co_await stock.async_try_take(1, asio::use_awaitable)) {
        ++sold;
        last_sale = steady::now();
      }
      co_return;
    }
    while (open() && empties < segments) {
      std::size_t seg = rng() % segments;
      while (empty[seg]) seg = (seg + 1) % segments;
      auto& l = locks[seg];
      co_await l.async_lock(owner, std::chrono::milliseconds(5000), asio::use_awaitable);
      if (!empty[seg]) {
        auto key = stock.segment_key(seg);
        // Named argument vectors: g++ 12 miscompiles braced lists inside co_await expressions.
        std::vector<std::string> get{"GET", key};
        auto r = co_await c.async_command(std::move(get), asio::use_awaitable);
        long long have = r.is_nil() ? 0 : std::stoll(r.str);
        if (have > 0) {
          std::vector<std::string> set{"SET", key, std::to_string(have - 1)};
          co_await c.async_command(std::move(set), asio::use_awaitable);
          ++sold;
          last_sale = steady::now();
        } else {
          empty[seg] = 1;
          ++empties;
        }
      }
      co_await l.async_unlock(owner, asio::use_awaitable);
    }
  };
  for (int b = 0; b < buyers; ++b) {
    asio::co_spawn(
        ioc,
        [&, owner = c.new_owner(), seed = static_cast<unsigned>(b)]() -> asio::awaitable<void> {
          try {
            co_await buyer(owner, seed);
          } catch (const std::system_error& e) {
            // The server's words are there only until this catch ends (docs/errors.md).
            const auto& words = last_error_text();
            throw std::runtime_error(std::string(e.what()) + (words.empty() ? "" : ": " + words));
          }
        },
        // Not asio::detached, which drops the exception a buyer ends with: the step fails on it.
        [&failure](std::exception_ptr e) {
          if (!e || !failure.empty()) return;
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& x) {
            failure = std::string("a buyer failed: ") + x.what();
          } catch (...) {
            failure = "a buyer failed";
          }
        });
  }
  ioc.run();
  if (failure.empty() && steady::now() >= give_up) failure = "not sold out after 30 s";
  sale_result r;
  r.total = total;
  r.orders = sold;
  double secs = ms_between(t0, last_sale) / 1000;
  r.per_s = secs > 0 ? static_cast<double>(sold) / secs : 0;
  bool all_zero = stock.remaining() == 0;
  for (std::size_t i = 0; i < segments; ++i) all_zero = all_zero && counter_value(c, stock.segment_key(i)) == 0;
  r.exact = failure.empty() && r.orders == total && all_zero;
  r.failure = failure;
  return r;
}

std::string sale_line(const sale_result& r) {
  std::string s = fmt("%8.0f", r.per_s) + " orders/s  (" + std::to_string(r.orders) + " of " +
                  std::to_string(r.total) + " sold, every unit once: " + (r.exact ? "yes" : "NO") + ")";
  if (!r.failure.empty()) s += "\n        " + r.failure;
  return s;
}

verdict step_flash_sale(const config& base) {
  const int buyers = 2000;
  const std::size_t n = 16;
  // Sized to sell out in well under a second each on a laptop, and within seconds in a sanitizer
  // build on a loaded 2-core machine (the 1-segment lock path sold 336 units/s there): the runs end
  // at the sell-out.
  const long long one_units = 400, many_units = 3'200, lua_units = 50'000;
  say("\n[5/5] Flash sale: " + std::to_string(buyers) +
      " concurrent buyers until sold out, segment locks vs one lock vs atomic Lua");
  auto one = run_sale(base, "demo:sale1", 1, false, buyers, one_units);
  say("      1 segment,  lock per segment : " + sale_line(one));
  auto many = run_sale(base, "demo:sale16", n, false, buyers, many_units);
  say("      16 segments, lock per segment: " + sale_line(many));
  auto lua = run_sale(base, "demo:sale16lua", n, true, buyers, lua_units);
  say("      16 segments, atomic Lua      : " + sale_line(lua));
  verdict v{"flash sale", one.exact && many.exact && lua.exact, ""};
  v.figure = "orders/s: 1 seg " + fmt("%.0f", one.per_s) + ", 16 seg " + fmt("%.0f", many.per_s) + " (x" +
             fmt("%.1f", one.per_s > 0 ? many.per_s / one.per_s : 0) + "), Lua " + fmt("%.0f", lua.per_s) +
             (v.pass ? "; sold out, nothing oversold" : "; the stock did NOT add up");
  say(std::string("      ") + (v.pass ? "PASS" : "FAIL") + "  " + v.figure);
  return v;
}

std::string self_path() {
  char buf[4096];
  auto n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "redlease";
  return std::string(buf, static_cast<std::size_t>(n));
}

int run_demo(const std::string& url_opt) {
  std::unique_ptr<local::redis_server> server;
  std::string url = url_opt;
  if (url.empty()) {
    if (!local::redis_server::available()) {
      std::cerr << "redlease demo: redis-server not found on PATH (install redis-server, or pass --redis URL)\n";
      return exit_code::unavailable;
    }
    server = std::make_unique<local::redis_server>();
    url = server->url();
    say("redlease demo: private redis-server (pid " + std::to_string(server->pid()) + ") on " + url +
        ", no persistence");
  } else {
    say("redlease demo: against " + make_config(url).redacted_url());
  }
  auto cfg = make_config(url);
  cfg.client_name = "redlease-demo";
  {
    client probe{cfg};
    probe.ping();
  }
  auto t0 = steady::now();
  std::vector<verdict> vs;
  vs.push_back(step_watchdog(cfg));
  vs.push_back(step_exclusion(cfg, url, self_path()));
  vs.push_back(step_lost(cfg));
  vs.push_back(step_fencing(cfg));
  vs.push_back(step_flash_sale(cfg));
  bool all = std::all_of(vs.begin(), vs.end(), [](const verdict& v) { return v.pass; });
  say("\nSummary (" + fmt("%.1f", ms_between(t0, steady::now()) / 1000) + " s)");
  say("  step                verdict  figure");
  for (auto& v : vs) {
    std::string name = v.step;
    name.resize(18, ' ');
    say("  " + name + "  " + (v.pass ? "PASS   " : "FAIL   ") + "  " + v.figure);
  }
  say(all ? "\nAll steps passed." : "\nSome steps FAILED.");
  return all ? exit_code::ok : 1;
}

}  // namespace

void setup_demo(CLI::App& app, action_t& action) {
  auto [cmd, url] = add_command<std::string>(
      app, action, "demo", "Show, live, what redlease does (starts a private redis-server unless --redis)",
      "Exit status: 0 every step passed; 1 some step FAILED; 64 usage; 69 no redis-server on PATH (without\n"
      "--redis), or Redis unavailable; 78 the server refuses a command the demo sends (an ACL permission,\n"
      "a renamed command); 70 an unexpected error.",
      run_demo);
  add_connection_flags(cmd, *url, "Run against this server instead of a private one");

  // The child process of step 2 (not shown in --help).
  auto* worker = app.add_subcommand("__worker", "")->group("");
  auto w = std::make_shared<std::tuple<std::string, std::string, std::string, int>>();
  add_connection_flags(worker, std::get<0>(*w), "")->required();
  worker->add_option("lock", std::get<1>(*w))->required();
  worker->add_option("counter", std::get<2>(*w))->required();
  worker->add_option("iterations", std::get<3>(*w))->required();
  worker->callback([&action, w] {
    action = [w] {
      client c{make_config(std::get<0>(*w))};
      auto l = c.lock(std::get<1>(*w));
      for (int i = 0; i < std::get<3>(*w); ++i) {
        std::lock_guard g(l);
        increment(c, std::get<2>(*w));
      }
      return exit_code::ok;
    };
  });
}

}  // namespace redlease::cli
