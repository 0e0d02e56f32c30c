// SPDX-License-Identifier: MIT
// Support for redlease-bench: a minimal blocking RESP client for the ceiling measurements (no lock
// logic, no allocation per reply), and the process/server meters every case reads before and after.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <initializer_list>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "redlease/config.hpp"

namespace redlease::cli::bench {

using steady = std::chrono::steady_clock;

/// `d` in microseconds.
inline float us(steady::duration d) { return std::chrono::duration<float, std::micro>(d).count(); }
/// The seconds from `a` to `b`.
inline double seconds(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
/// One number in the printf format `f` ("%.2f").
std::string num(const char* f, double v);

/// One case's results: a line of the human table, an object of --json.
struct row {
  std::string name;
  double ops_per_s = 0, p50_us = 0, p99_us = 0, rt_per_op = 0;
  double redis_us_per_op = 0, client_us_per_op = 0;
  bool has_ceiling = false;
  double ceiling = 0, ratio = 0;
  std::vector<std::pair<std::string, double>> nums;         // extra numeric JSON fields, in order
  std::vector<std::pair<std::string, std::string>> strs;    // extra string JSON fields
  std::string note;                                         // for the human table
  std::string error;

  void num(std::string k, double v) { nums.emplace_back(std::move(k), v); }
  double get(std::string_view k, double dflt = -1) const {
    for (auto& [key, v] : nums)
      if (key == k) return v;
    return dflt;
  }
};

/// What a section that brings its own servers (RedLock, Redis Cluster) takes from the run.
struct section_run {
  config cfg;          // the run's client settings; each private server's address replaces its own
  std::string prefix;  // every key of the run starts with it
  double case_s = 3, warm_s = 0.3, ceiling_s = 1;
  bool json = false;   // the human lines of the section's ceilings are printed unless true
  std::function<bool(std::string_view)> wanted;  // --only
  std::function<void(row)> emit;                 // prints a row and keeps it
  std::string fake_uuid;  // the ceilings' owner id (36 characters, like a client's)
  // The locks of B4-cluster (cluster_bench.cpp), the permits of B5-permits-watchdog
  // (permit_bench.cpp); 0: no such case.
  std::size_t watchdog_locks = 0;
  double watchdog_window_s = 10;   // how long they are held
  /// The single-server B4 (redlease_bench.cpp) as row `name`: `n` locks held for `window_s` against
  /// the server at `url`, which the section starts for it.
  std::function<row(const std::string& url, const std::string& name, std::size_t n, double window_s)>
      watchdog_single;
};

/// The row `fn` makes for the case `name`, or, if it throws, a row of that name with the error.
row attempt_row(const std::string& name, const std::function<row()>& fn);

/// Appends one RESP command (array of bulk strings).
void encode(std::string& out, std::initializer_list<std::string_view> args);
void encode(std::string& out, const std::vector<std::string>& args);

/// What a batch of replies contained.
struct tally {
  std::size_t nil = 0;
  std::size_t integer = 0;
  std::size_t status = 0;
  std::size_t bulk = 0;
  std::size_t array = 0;
  std::size_t error = 0;
  long long int_sum = 0;     // sum of the integer replies
  long long int_min = 0;     // smallest integer reply (0 if none)
  std::string first_error;   // text of the first error reply
};

/// One reply of a simple command (INFO, SCRIPT LOAD, EXISTS, ...): top level only.
struct simple_reply {
  char type = 0;  // '+', '-', ':', '$', '*', or 'n' for nil
  long long integer = 0;
  std::string str;
};

class tls_session;

/// A blocking connection over TCP, TLS (`config::tls.enabled`, as `rediss://` sets it; see
/// tls_raw.hpp) or a Unix socket (from a redlease config: host/port or unix_socket, AUTH, SELECT).
/// Writes a whole batch with one send() loop, then reads its replies.
/// Not thread-safe. Throws std::runtime_error on I/O or protocol errors.
class raw_conn {
 public:
  explicit raw_conn(const config& cfg);
  ~raw_conn();
  raw_conn(const raw_conn&) = delete;
  raw_conn& operator=(const raw_conn&) = delete;

  /// Writes `payload` (any number of encoded commands) completely.
  void send(std::string_view payload);
  /// Reads `n` replies and counts them by type (bulk/array contents are skipped, not copied).
  tally read(std::size_t n);
  /// Reads the replies already received, at most `max`; waits (one recv) only if none is complete.
  /// Returns how many were taken, counted into `t`.
  std::size_t read_some(std::size_t max, tally& t);
  /// Busy-poll for replies (non-blocking recv in a loop) instead of sleeping in recv: takes the
  /// client's own wake-up latency out of the measurement (it costs a core while waiting).
  void set_spin(bool on);
  /// One command, one reply.
  simple_reply command(std::initializer_list<std::string_view> args);
  simple_reply command(const std::vector<std::string>& args);

 private:
  bool parse(simple_reply* keep, tally* t);  // one reply from the buffer; false if incomplete
  void fill();                               // one recv() into the buffer
  int fd_ = -1;
  bool spin_ = false;
  std::unique_ptr<tls_session> tls_;  // null on a plaintext connection
  std::vector<char> buf_;
  std::size_t rpos_ = 0, wpos_ = 0;
};

/// One raw connection that blocking threads share, with none of a client's own costs: the design
/// of the library's blocking calls reduced to what it cannot do without. A caller appends its
/// request to a queue and, when no other caller is writing, writes the whole queue itself (flat
/// combining: a batch forms while a write is under way, and no thread is woken to write); a reader
/// thread reads the replies and wakes each caller with a futex. Nothing spins (16 spinning callers on
/// two vCPUs take the cores from the reader and the server). `call` is thread-safe; the rest is not.
/// Throws std::runtime_error on I/O errors (from the constructor, or `close` for the reader's).
class shared_conn {
 public:
  explicit shared_conn(const config& cfg);
  /// Stops the reader (see `close`); never throws.
  ~shared_conn();
  shared_conn(const shared_conn&) = delete;
  shared_conn& operator=(const shared_conn&) = delete;

  /// Sends one encoded command and sleeps until its reply has been read.
  void call(std::string_view request);
  /// Stops the reader (a PING wakes it) once every call has returned, and counts every reply it read,
  /// that PING's included. Rethrows the reader's I/O error.
  tally close();

 private:
  struct waiter {
    std::atomic<std::uint32_t> done{0};
  };
  void read_replies();
  raw_conn rc_;
  std::mutex m_;
  std::string queued_;         // requests not yet written, in order
  std::deque<waiter*> fifo_;   // one per request written or queued, in wire order
  bool writing_ = false;       // a caller is writing the queue
  bool quit_ = false;
  tally got_;
  std::string error_;          // the reader's
  std::thread reader_;
};

/// Sends the commands of `payload` (their start offsets in `offsets`, plus the end as the last
/// element) keeping at most `depth` of them unanswered: the first `depth` go out in one write, then
/// each read of replies is followed by one write of as many new commands as replies came back.
/// `sent_at`/`lat_us`, when given, receive each command's latency (reply time - its write time).
tally pump(raw_conn& c, std::string_view payload, const std::vector<std::size_t>& offsets, std::size_t depth,
           std::size_t chunk, std::vector<float>* lat_us);

/// A stream of commands, encoded back to back, with the offset where each starts (and the end).
struct stream {
  std::string payload;
  std::vector<std::size_t> offsets{0};
  void add(std::initializer_list<std::string_view> args) {
    encode(payload, args);
    offsets.push_back(payload.size());
  }
  std::size_t size() const { return offsets.size() - 1; }
};

/// Appends to `acq` and `rel` the exact requests redlease sends to acquire and release the free lock
/// `key` (same scripts, arguments and sizes, lease 30 s), the `i`-th of a ceiling's phase: the
/// reentrant lock (owner field `fake_uuid:<100+i>`, a latch key per release) or the mutex, plain or
/// taking a fencing token. The scripts must be loaded (EVALSHA).
void add_pair_requests(stream& acq, stream& rel, const std::string& key, std::size_t i, bool mutex, bool fenced,
                       const std::string& fake_uuid);

/// One round of a pair ceiling on `c`: every acquisition of `acq` pumped `depth` deep (see pump:
/// `window` unanswered at most, written `chunk` at a time), then every release of `rel`. Checks that
/// each acquired and each freed its key (throws std::runtime_error otherwise), adds the two phases'
/// durations to `t_acq` and `t_rel` and the latencies to `lat_acq`, `lat_rel` when given.
void pair_round(raw_conn& c, const stream& acq, const stream& rel, std::size_t window, std::size_t chunk,
                bool fenced, double& t_acq, double& t_rel, std::vector<float>* lat_acq, std::vector<float>* lat_rel);
/// What the replies of a pair round must be (`acquired`: the acquisitions', `released`: the
/// releases'): throws std::runtime_error otherwise.
using pair_check = std::function<void(const tally& acquired, const tally& released)>;
/// The same round for requests other than the locks' (a semaphore's), `check` judging its replies.
void pair_round(raw_conn& c, const stream& acq, const stream& rel, std::size_t window, std::size_t chunk,
                const pair_check& check, double& t_acq, double& t_rel, std::vector<float>* lat_acq,
                std::vector<float>* lat_rel);

/// One thread's part of a run of `run_threads`: the operations it did and their latencies (µs).
struct thread_results {
  long long ops = 0;
  std::vector<float> lat;
};

/// Runs `threads` threads for `secs`; `body(t, stop, out)` loops until `stop`. Snapshots around the
/// measured run are taken by the caller through `before` / `after`. Throws the first exception a
/// body threw (the others stop then).
template <class Body>
std::vector<thread_results> run_threads(int threads, double secs, Body body, const std::function<void()>& before,
                                        const std::function<void()>& after) {
  std::vector<thread_results> res(static_cast<std::size_t>(threads));
  std::atomic<bool> stop{false};
  std::latch ready(threads + 1);
  std::vector<std::thread> ts;
  std::mutex err_mu;
  std::string error;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      ready.arrive_and_wait();
      try {
        body(t, stop, res[static_cast<std::size_t>(t)]);
      } catch (const std::exception& e) {
        std::lock_guard g(err_mu);
        if (error.empty()) error = e.what();
        stop = true;
      }
    });
  if (before) before();
  ready.arrive_and_wait();
  std::this_thread::sleep_for(std::chrono::duration<double>(secs));
  stop = true;
  for (auto& t : ts) t.join();
  if (after) after();
  if (!error.empty()) throw std::runtime_error(error);
  return res;
}

/// The pair figures of a pair ceiling's row at `depth`: `pairs` pairs in `t_acq` seconds of acquire
/// phases and `t_rel` of release phases (pair rate = pairs / both; acquire_per_s, release_per_s),
/// the pair latency as an acquisition's plus a release's (p50, p99) from their latencies.
void fill_pair_rates(row& r, int depth, double pairs, double t_acq, double t_rel, std::vector<float>& lat_acq,
                     std::vector<float>& lat_rel);

/// Owners chaining asynchronous pairs (acquire, then release, then the next) until told to stop: the
/// driver of the B2-async cases. `start(i)` begins owner i's next pair; its completions end it with
/// `pair_done(i)`, `retry(i)` (no pair: try again) or `failed(i, why)`, each of which starts the
/// owner's next pair unless the run is stopping. Every completion must run on one thread at a time
/// (the handlers' executor: a client's I/O thread).
class async_chains {
 public:
  async_chains(std::size_t owners, std::function<void(std::size_t)> start);
  /// Starts every owner, lets them run `secs`, stops them and waits until each chain ended.
  /// `before` and `after` run just before the first start and after the last chain ended. Returns
  /// the pairs done and, with `record`, each pair's latency. Throws the first failure.
  std::pair<double, std::vector<float>> run(double secs, bool record, const std::function<void()>& before,
                                            const std::function<void()>& after);
  void pair_done(std::size_t i);
  void retry(std::size_t i);
  void failed(std::size_t i, std::string why);

 private:
  void next(std::size_t i);
  std::size_t owners_;
  std::function<void(std::size_t)> start_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> live_{0};
  std::promise<void> done_;
  std::vector<steady::time_point> t0_;
  std::vector<float> lat_;
  double pairs_ = 0;
  bool record_ = false;
  std::string error_;
};

/// CPU seconds of this process (all threads), user + system.
double process_cpu_seconds();
/// Context switches of this process (all threads), voluntary + involuntary.
long long process_context_switches();
/// Bytes of heap in use (mallinfo2: uordblks + hblkhd).
std::size_t heap_in_use();
/// Resident set size in bytes (/proc/self/statm).
std::size_t rss_bytes();

/// used_cpu_sys + used_cpu_user of the server, in seconds (INFO cpu).
double redis_cpu_seconds(raw_conn& c);
/// A field of INFO <section> ("redis_version", ...), empty if absent.
std::string info_field(raw_conn& c, std::string_view section, std::string_view field);

/// Percentile (0..1) of `v`, which it partially sorts. 0 for an empty vector.
double percentile(std::vector<float>& v, double p);

}  // namespace redlease::cli::bench
