// SPDX-License-Identifier: MIT
#include "bench_support.hpp"

#include "redlease/layout.hpp"
#include "redlease_lua.hpp"
#include "tls_raw.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

namespace redlease::cli::bench {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void append_bulk(std::string& out, std::string_view a) {
  char num[24];
  auto [p, ec] = std::to_chars(num, num + sizeof num, a.size());
  (void)ec;
  out += '$';
  out.append(num, p);
  out += "\r\n";
  out.append(a);
  out += "\r\n";
}

void append_header(std::string& out, std::size_t n) {
  char num[24];
  auto [p, ec] = std::to_chars(num, num + sizeof num, n);
  (void)ec;
  out += '*';
  out.append(num, p);
  out += "\r\n";
}

[[noreturn]] void io_fail(const std::string& what) {
  throw std::runtime_error("bench raw connection: " + what + ": " + std::strerror(errno));
}

// Parses one reply in [p, end). Returns the end of it, or nullptr when incomplete. `type`, `ival`
// and `text` describe the top-level reply only.
const char* parse_reply(const char* p, const char* end, char& type, long long& ival, std::string_view& text) {
  if (p >= end) return nullptr;
  const char* eol = static_cast<const char*>(std::memchr(p, '\r', static_cast<std::size_t>(end - p)));
  if (eol == nullptr || eol + 1 >= end) return nullptr;
  char t = *p;
  std::string_view line(p + 1, static_cast<std::size_t>(eol - p - 1));
  const char* next = eol + 2;
  type = t;
  switch (t) {
    case '+':
    case '-':
      text = line;
      return next;
    case ':': {
      long long v = 0;
      std::from_chars(line.data(), line.data() + line.size(), v);
      ival = v;
      return next;
    }
    case '$': {
      long long len = 0;
      std::from_chars(line.data(), line.data() + line.size(), len);
      if (len < 0) {
        type = 'n';
        return next;
      }
      if (end - next < len + 2) return nullptr;
      text = std::string_view(next, static_cast<std::size_t>(len));
      return next + len + 2;
    }
    case '*': {
      long long n = 0;
      std::from_chars(line.data(), line.data() + line.size(), n);
      if (n < 0) {
        type = 'n';
        return next;
      }
      ival = n;
      for (long long i = 0; i < n; ++i) {
        char et;
        long long ev;
        std::string_view es;
        next = parse_reply(next, end, et, ev, es);
        if (next == nullptr) return nullptr;
      }
      return next;
    }
    default:
      throw std::runtime_error(std::string("bench raw connection: protocol error at byte '") + t + "'");
  }
}

}  // namespace

void encode(std::string& out, std::initializer_list<std::string_view> args) {
  append_header(out, args.size());
  for (auto a : args) append_bulk(out, a);
}

void encode(std::string& out, const std::vector<std::string>& args) {
  append_header(out, args.size());
  for (auto& a : args) append_bulk(out, a);
}

raw_conn::raw_conn(const config& cfg) : buf_(1 << 20) {
  if (!cfg.unix_socket.empty()) {
    if (cfg.tls.enabled) throw std::runtime_error("bench: TLS on a unix socket is not supported");
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) io_fail("socket");
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (cfg.unix_socket.size() >= sizeof a.sun_path) throw std::runtime_error("bench: unix socket path too long");
    std::memcpy(a.sun_path, cfg.unix_socket.c_str(), cfg.unix_socket.size() + 1);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      io_fail("connect " + cfg.unix_socket);
    }
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    auto port = std::to_string(cfg.port);
    if (int rc = ::getaddrinfo(cfg.host.c_str(), port.c_str(), &hints, &res); rc != 0)
      throw std::runtime_error("bench: cannot resolve " + cfg.host + ": " + ::gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, &::freeaddrinfo);
    for (auto* ai = res; ai != nullptr; ai = ai->ai_next) {
      int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        fd_ = fd;
        break;
      }
      ::close(fd);
    }
    if (fd_ < 0) io_fail("connect " + cfg.host + ":" + port);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (cfg.tls.enabled) {
      try {
        tls_ = std::make_unique<tls_session>(fd_, cfg.tls, cfg.host);
      } catch (...) {
        ::close(fd_);
        fd_ = -1;
        throw;
      }
    }
  }
  if (!cfg.password.empty()) {
    auto r = cfg.username.empty() ? command({"AUTH", cfg.password}) : command({"AUTH", cfg.username, cfg.password});
    if (r.type == '-') throw std::runtime_error("bench: AUTH failed: " + r.str);
  }
  if (cfg.database != 0) {
    auto r = command({"SELECT", std::to_string(cfg.database)});
    if (r.type == '-') throw std::runtime_error("bench: SELECT failed: " + r.str);
  }
}

raw_conn::~raw_conn() {
  tls_.reset();
  if (fd_ >= 0) ::close(fd_);
}

void raw_conn::set_spin(bool on) {
  spin_ = on;
  // OpenSSL reads the socket itself: busy-polling needs it non-blocking (plain recv() is told so
  // per call with MSG_DONTWAIT).
  if (tls_) {
    int fl = ::fcntl(fd_, F_GETFL);
    ::fcntl(fd_, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
  }
}

void raw_conn::send(std::string_view data) {
  if (tls_) return tls_->write_all(data);
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      io_fail("send");
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

void raw_conn::fill() {
  if (rpos_ == wpos_) rpos_ = wpos_ = 0;
  if (wpos_ == buf_.size()) {
    if (rpos_ > 0) {
      std::memmove(buf_.data(), buf_.data() + rpos_, wpos_ - rpos_);
      wpos_ -= rpos_;
      rpos_ = 0;
    } else {
      buf_.resize(buf_.size() * 2);
    }
  }
  if (tls_) {
    for (;;) {
      if (std::size_t n = tls_->read_some(buf_.data() + wpos_, buf_.size() - wpos_); n > 0) {
        wpos_ += n;
        return;
      }
      cpu_relax();
    }
  }
  for (;;) {
    ssize_t n = ::recv(fd_, buf_.data() + wpos_, buf_.size() - wpos_, spin_ ? MSG_DONTWAIT : 0);
    if (n < 0 && (errno == EINTR || (spin_ && (errno == EAGAIN || errno == EWOULDBLOCK)))) {
      if (spin_) cpu_relax();
      continue;
    }
    if (n < 0) io_fail("recv");
    if (n == 0) throw std::runtime_error("bench raw connection: closed by the server");
    wpos_ += static_cast<std::size_t>(n);
    return;
  }
}

bool raw_conn::parse(simple_reply* keep, tally* t) {
  char type = 0;
  long long ival = 0;
  std::string_view text;
  const char* b = buf_.data();
  const char* end = parse_reply(b + rpos_, b + wpos_, type, ival, text);
  if (end == nullptr) return false;
  rpos_ = static_cast<std::size_t>(end - b);
  if (keep) {
    keep->type = type;
    keep->integer = ival;
    keep->str.assign(text);
  }
  if (t) {
    switch (type) {
      case 'n': ++t->nil; break;
      case ':':
        t->int_min = t->integer == 0 ? ival : std::min(t->int_min, ival);
        ++t->integer;
        t->int_sum += ival;
        break;
      case '+': ++t->status; break;
      case '$': ++t->bulk; break;
      case '*': ++t->array; break;
      case '-':
        if (t->error++ == 0) t->first_error.assign(text);
        break;
      default: break;
    }
  }
  return true;
}

tally raw_conn::read(std::size_t n) {
  tally t;
  for (std::size_t i = 0; i < n;) {
    if (parse(nullptr, &t)) {
      ++i;
      continue;
    }
    fill();
  }
  return t;
}

std::size_t raw_conn::read_some(std::size_t max, tally& t) {
  std::size_t got = 0;
  while (got < max) {
    if (parse(nullptr, &t)) {
      ++got;
      continue;
    }
    if (got > 0) break;
    fill();
  }
  return got;
}

namespace {
void futex_wait(std::atomic<std::uint32_t>& a, std::uint32_t old) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&a), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
}
void futex_wake(std::atomic<std::uint32_t>& a) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&a), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}
}  // namespace

shared_conn::shared_conn(const config& cfg) : rc_(cfg), reader_([this] { read_replies(); }) {}

shared_conn::~shared_conn() {
  try {
    if (reader_.joinable()) close();
  } catch (...) {
  }
}

void shared_conn::call(std::string_view request) {
  waiter w;
  bool writer = false;
  {
    std::lock_guard g(m_);
    queued_ += request;
    fifo_.push_back(&w);
    writer = !std::exchange(writing_, true);
  }
  if (writer) {
    // This caller writes whatever is queued, its own request first, until the queue stays empty.
    std::string out;
    for (;;) {
      {
        std::lock_guard g(m_);
        if (queued_.empty()) {
          writing_ = false;
          break;
        }
        out.swap(queued_);
      }
      rc_.send(out);
      out.clear();
    }
  }
  while (w.done.load(std::memory_order_acquire) == 0) futex_wait(w.done, 0);
}

void shared_conn::read_replies() {
  try {
    for (;;) {
      {
        std::lock_guard g(m_);
        if (fifo_.empty() && quit_) return;
      }
      std::size_t n = rc_.read_some(256, got_);
      std::lock_guard g(m_);
      for (std::size_t i = 0; i < n && !fifo_.empty(); ++i) {
        waiter* w = fifo_.front();
        fifo_.pop_front();
        w->done.store(1, std::memory_order_release);
        futex_wake(w->done);
      }
    }
  } catch (const std::exception& e) {
    // Callers still waiting would sleep for ever: they are released, and close() reports it.
    std::lock_guard g(m_);
    error_ = e.what();
    for (waiter* w : fifo_) {
      w->done.store(1, std::memory_order_release);
      futex_wake(w->done);
    }
    fifo_.clear();
  }
}

tally shared_conn::close() {
  bool failed = false;
  {
    std::lock_guard g(m_);
    quit_ = true;
    failed = !error_.empty();
  }
  // The reader sleeps in recv() whenever no reply is due: one more reply wakes it to leave.
  if (!failed) {
    std::string ping;
    encode(ping, {"PING"});
    call(ping);
  }
  reader_.join();
  if (!error_.empty()) throw std::runtime_error("bench shared connection: " + error_);
  return got_;
}

tally pump(raw_conn& c, std::string_view payload, const std::vector<std::size_t>& offsets, std::size_t depth,
           std::size_t chunk, std::vector<float>* lat_us) {
  const std::size_t n = offsets.size() - 1;
  std::vector<steady::time_point> sent_at;
  if (lat_us) sent_at.resize(n);
  tally t;
  std::size_t sent = 0, done = 0;
  auto send_upto = [&](std::size_t k) {
    if (k <= sent) return;
    auto now = steady::now();
    if (lat_us)
      for (std::size_t i = sent; i < k; ++i) sent_at[i] = now;
    c.send(payload.substr(offsets[sent], offsets[k] - offsets[sent]));
    sent = k;
  };
  send_upto(std::min(n, depth));
  while (done < n) {
    std::size_t got = c.read_some(sent - done, t);
    if (lat_us) {
      auto now = steady::now();
      for (std::size_t i = done; i < done + got; ++i)
        lat_us->push_back(std::chrono::duration<float, std::micro>(now - sent_at[i]).count());
    }
    done += got;
    std::size_t room = std::min(n, done + depth);
    if (room - sent >= chunk || room == n) send_upto(room);
  }
  return t;
}

void add_pair_requests(stream& acq, stream& rel, const std::string& key, std::size_t i, bool mutex, bool fenced,
                       const std::string& fake_uuid) {
  namespace lua = redlease::detail::lua;
  const std::string lease = "30000";
  const auto l = describe(mutex ? lock_kind::mutex : lock_kind::reentrant, key);
  const std::string& ch = l.channel();
  if (mutex) {
    char token[40];  // random_token(): 32 hex characters
    std::snprintf(token, sizeof token, "%016llx%016llx", static_cast<unsigned long long>(i) * 0x9e3779b97f4a7c15ULL,
                  static_cast<unsigned long long>(i) + 1);
    if (fenced)
      acq.add({"EVALSHA", lua::mutex_fenced_acquire.sha1, "2", key, l.token_key, token, lease});
    else
      acq.add({"EVALSHA", lua::mutex_acquire.sha1, "1", key, token, lease});
    rel.add({"EVALSHA", lua::mutex_release.sha1, "1", key, ch, token});
  } else {
    std::string field = fake_uuid + ":" + std::to_string(100 + i);
    if (fenced)
      acq.add({"EVALSHA", lua::fenced_acquire.sha1, "2", key, l.token_key, lease, field});
    else
      acq.add({"EVALSHA", lua::acquire.sha1, "1", key, lease, field});
    // As the library sends it: a latch key per request (read, not written, by a first attempt).
    std::string latch = l.latch_key(std::to_string(i) + "0123456789abcdef");
    rel.add({"EVALSHA", lua::release.sha1, "2", key, latch, ch, "0", lease, field, "1", "0", "60000"});
  }
}

void pair_round(raw_conn& c, const stream& acq, const stream& rel, std::size_t window, std::size_t chunk,
                const pair_check& check, double& t_acq, double& t_rel, std::vector<float>* lat_acq,
                std::vector<float>* lat_rel) {
  auto t0 = steady::now();
  auto ta = pump(c, acq.payload, acq.offsets, window, chunk, lat_acq);
  auto t1 = steady::now();
  auto tr = pump(c, rel.payload, rel.offsets, window, chunk, lat_rel);
  auto t2 = steady::now();
  check(ta, tr);
  t_acq += std::chrono::duration<double>(t1 - t0).count();
  t_rel += std::chrono::duration<double>(t2 - t1).count();
}

void pair_round(raw_conn& c, const stream& acq, const stream& rel, std::size_t window, std::size_t chunk,
                bool fenced, double& t_acq, double& t_rel, std::vector<float>* lat_acq, std::vector<float>* lat_rel) {
  const std::size_t k = acq.size();
  auto check = [&](const tally& ta, const tally& tr) {
    if ((fenced ? ta.bulk : ta.nil) != k)
      throw std::runtime_error("ceiling: acquire script did not acquire: " +
                               (ta.first_error.empty() ? std::string("lock held") : ta.first_error));
    if (tr.integer != k || tr.int_sum != static_cast<long long>(k))
      throw std::runtime_error("ceiling: release script did not free: " + tr.first_error);
  };
  pair_round(c, acq, rel, window, chunk, check, t_acq, t_rel, lat_acq, lat_rel);
}

simple_reply raw_conn::command(std::initializer_list<std::string_view> args) {
  std::string p;
  encode(p, args);
  send(p);
  simple_reply r;
  while (!parse(&r, nullptr)) fill();
  return r;
}

simple_reply raw_conn::command(const std::vector<std::string>& args) {
  std::string p;
  encode(p, args);
  send(p);
  simple_reply r;
  while (!parse(&r, nullptr)) fill();
  return r;
}

double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

long long process_context_switches() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw + u.ru_nivcsw;
}

std::size_t heap_in_use() {
  struct mallinfo2 m = ::mallinfo2();
  return m.uordblks + m.hblkhd;
}

std::size_t rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

std::string info_field(raw_conn& c, std::string_view section, std::string_view field) {
  auto r = c.command({"INFO", section});
  std::string key = std::string(field) + ":";
  auto pos = r.str.find(key);
  while (pos != std::string::npos && pos != 0 && r.str[pos - 1] != '\n') pos = r.str.find(key, pos + 1);
  if (pos == std::string::npos) return {};
  auto start = pos + key.size();
  auto stop = r.str.find('\r', start);
  return r.str.substr(start, stop == std::string::npos ? std::string::npos : stop - start);
}

std::string num(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

row attempt_row(const std::string& name, const std::function<row()>& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    row r;
    r.name = name;
    r.error = e.what();
    return r;
  }
}

double redis_cpu_seconds(raw_conn& c) {
  auto r = c.command({"INFO", "cpu"});
  auto get = [&](std::string_view k) {
    std::string key = std::string(k) + ":";
    auto pos = r.str.find(key);
    while (pos != std::string::npos && pos != 0 && r.str[pos - 1] != '\n') pos = r.str.find(key, pos + 1);
    if (pos == std::string::npos) return 0.0;
    return std::strtod(r.str.c_str() + pos + key.size(), nullptr);
  };
  return get("used_cpu_sys") + get("used_cpu_user");
}

async_chains::async_chains(std::size_t owners, std::function<void(std::size_t)> start)
    : owners_(owners), start_(std::move(start)), t0_(owners) {}

std::pair<double, std::vector<float>> async_chains::run(double secs, bool record, const std::function<void()>& before,
                                                        const std::function<void()>& after) {
  stop_ = false;
  live_ = owners_;
  done_ = std::promise<void>();
  lat_.clear();
  if (record) lat_.reserve(1 << 20);
  pairs_ = 0;
  record_ = record;
  error_.clear();
  auto fut = done_.get_future();
  if (before) before();
  for (std::size_t i = 0; i < owners_; ++i) next(i);
  std::this_thread::sleep_for(std::chrono::duration<double>(secs));
  stop_ = true;
  fut.wait();
  if (after) after();
  if (!error_.empty()) throw std::runtime_error(error_);
  return {pairs_, std::move(lat_)};
}

void async_chains::next(std::size_t i) {
  if (stop_.load(std::memory_order_relaxed)) {
    if (live_.fetch_sub(1) == 1) done_.set_value();
    return;
  }
  t0_[i] = steady::now();
  start_(i);
}

void async_chains::pair_done(std::size_t i) {
  if (record_) lat_.push_back(std::chrono::duration<float, std::micro>(steady::now() - t0_[i]).count());
  pairs_ += 1;
  next(i);
}

void async_chains::retry(std::size_t i) { next(i); }

void async_chains::failed(std::size_t i, std::string why) {
  if (error_.empty()) error_ = std::move(why);
  stop_ = true;
  next(i);
}

void fill_pair_rates(row& r, int depth, double pairs, double t_acq, double t_rel, std::vector<float>& lat_acq,
                     std::vector<float>& lat_rel) {
  r.ops_per_s = pairs / (t_acq + t_rel);
  r.p50_us = percentile(lat_acq, 0.5) + percentile(lat_rel, 0.5);
  r.p99_us = percentile(lat_acq, 0.99) + percentile(lat_rel, 0.99);
  r.num("depth", depth);
  r.num("acquire_per_s", pairs / t_acq);
  r.num("release_per_s", pairs / t_rel);
}

double percentile(std::vector<float>& v, double p) {
  if (v.empty()) return 0;
  auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  k = std::min(k, v.size() - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace redlease::cli::bench
