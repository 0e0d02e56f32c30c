// SPDX-License-Identifier: MIT
#include "fault_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <stdexcept>

extern char** environ;

namespace redlease::test {
namespace {

using steady = std::chrono::steady_clock;

std::runtime_error sys_error(const std::string& what) {
  return std::runtime_error("fault_proxy: " + what + ": " + std::strerror(errno));
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Close with RST: the peer's next read or write fails with ECONNRESET.
void reset_fd(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

constexpr std::size_t chunk_size = 64 * 1024;
constexpr std::size_t max_buffered = 8 * 1024 * 1024;  // per direction: stop reading beyond this

}  // namespace

// ---- fault_proxy -------------------------------------------------------------------------------

struct fault_proxy::pair {
  struct chunk {
    steady::time_point due;
    std::string data;
    std::size_t off = 0;
  };
  struct side {
    int fd = -1;
    bool eof = false;            // the peer closed its write side
    std::deque<chunk> to;        // bytes waiting to be written to this side
    std::size_t queued = 0;
  };
  side client, server;
  std::uint64_t number = 0;  // accepted() before this connection was accepted
  bool dead = false;
};

fault_proxy::fault_proxy(std::uint16_t upstream_port) : upstream_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw sys_error("socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto addr = loopback(0);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0 || ::listen(listen_fd_, 128) < 0) {
    auto e = sys_error("bind/listen 127.0.0.1");
    ::close(listen_fd_);
    throw e;
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    auto e = sys_error("eventfd");
    ::close(listen_fd_);
    throw e;
  }
  thread_ = std::thread([this] { run(); });
}

fault_proxy::~fault_proxy() {
  post({command::stop});
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_fd_);
}

void fault_proxy::post(command c) {
  std::unique_lock<std::mutex> g(mu_);
  if (exited_) return;
  inbox_.push_back(c);
  auto gen = ++posted_;
  std::uint64_t one = 1;
  ssize_t n = ::write(wake_fd_, &one, sizeof one);
  (void)n;
  cv_.wait(g, [&] { return applied_ >= gen || exited_; });
}

void fault_proxy::set_latency(ms to_server, ms to_client) {
  post({command::latency, to_server.count(), to_client.count()});
}
void fault_proxy::stall(bool on) { post({command::stall, on ? 1 : 0}); }
void fault_proxy::hold_replies(std::uint64_t connection, bool on) {
  post({command::hold_replies, static_cast<long long>(connection), on ? 1 : 0});
}
void fault_proxy::drop_all() { post({command::drop_all}); }
void fault_proxy::reset_clients() { post({command::reset_clients}); }
void fault_proxy::lose_next_reply() { post({command::lose_reply}); }
void fault_proxy::blackhole(bool on) { post({command::blackhole, on ? 1 : 0}); }
void fault_proxy::refuse(bool on) { post({command::refuse, on ? 1 : 0}); }

bool fault_proxy::wait_for(const std::function<bool()>& pred, ms limit) {
  std::unique_lock<std::mutex> g(mu_);
  return cv_.wait_for(g, limit, pred);
}

void fault_proxy::notify_changed() {
  {
    std::lock_guard<std::mutex> g(mu_);
    ++changes_;
  }
  cv_.notify_all();
}

void fault_proxy::apply(const command& c) {
  switch (c.what) {
    case command::latency:
      lat_up_ = ms(c.a);
      lat_down_ = ms(c.b);
      break;
    case command::stall:
      stalled_ = c.a != 0;
      break;
    case command::hold_replies:
      if (c.b != 0) held_.insert(static_cast<std::uint64_t>(c.a));
      else held_.erase(static_cast<std::uint64_t>(c.a));
      break;
    case command::lose_reply:
      lose_reply_ = true;
      break;
    case command::blackhole:
      blackhole_ = c.a != 0;
      break;
    case command::refuse:
      refuse_ = c.a != 0;
      break;
    case command::reset_clients:
      // The pair closes once the server side has what was on its way (the loop's "a side that
      // closed" rule); replies for the gone client are dropped.
      for (auto& p : pairs_) {
        if (p->dead || p->client.fd < 0) continue;
        reset_fd(p->client.fd);
        p->client.fd = -1;
        p->client.eof = true;
        p->client.to.clear();
        p->client.queued = 0;
        ++resets_;
      }
      break;
    case command::stop:
      stop_ = true;
      [[fallthrough]];
    case command::drop_all:
      for (auto& p : pairs_) {
        if (p->dead) continue;
        reset_fd(p->client.fd);
        reset_fd(p->server.fd);
        p->client.fd = p->server.fd = -1;
        p->dead = true;
        ++resets_;
      }
      pairs_.clear();
      live_ = 0;
      for (int fd : holes_fds_) reset_fd(fd);
      holes_fds_.clear();
      holes_ = 0;
      break;
  }
}

void fault_proxy::run() noexcept {
  std::vector<pollfd> fds;
  std::vector<std::pair<pair*, bool>> owners;  // per pollfd from index 2: (pair, is_client) or hole
  std::vector<char> buf(chunk_size);
  while (!stop_) {
    auto now = steady::now();
    fds.clear();
    owners.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    int timeout = -1;
    auto held = [&](const pair& p, const pair::side& s) { return &s == &p.client && held_.count(p.number) != 0; };
    auto consider = [&](const pair& p, const pair::side& s) -> short {
      if (stalled_ || s.to.empty() || held(p, s)) return 0;
      if (s.to.front().due <= now) return POLLOUT;
      auto left = std::chrono::ceil<ms>(s.to.front().due - now).count();
      int t = static_cast<int>(std::clamp<long long>(left, 1, 1 << 30));
      timeout = timeout < 0 ? t : std::min(timeout, t);
      return 0;
    };
    for (auto& p : pairs_) {
      short ce = consider(*p, p->client), se = consider(*p, p->server);
      // Read a side unless it closed, or the other direction has too much buffered.
      if (!p->client.eof && p->server.queued < max_buffered) ce |= POLLIN;
      if (!p->server.eof && p->client.queued < max_buffered) se |= POLLIN;
      fds.push_back({p->client.fd, ce, 0});
      owners.push_back({p.get(), true});
      fds.push_back({p->server.fd, se, 0});
      owners.push_back({p.get(), false});
    }
    for (int fd : holes_fds_) {
      fds.push_back({fd, POLLIN, 0});
      owners.push_back({nullptr, false});
    }
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    bool changed = false;

    // Control commands first: after a command is acknowledged, the loop honours it.
    if (fds[0].revents & POLLIN) {
      std::uint64_t v;
      ssize_t r = ::read(wake_fd_, &v, sizeof v);
      (void)r;
      std::vector<command> todo;
      {
        std::lock_guard<std::mutex> g(mu_);
        todo.swap(inbox_);
      }
      for (auto& c : todo) apply(c);
      {
        std::lock_guard<std::mutex> g(mu_);
        applied_ += todo.size();
        ++changes_;
      }
      cv_.notify_all();
      if (stop_) break;
      // Pairs may be gone: poll again with a fresh set.
      continue;
    }

    now = steady::now();
    // Existing pairs.
    for (std::size_t i = 2; i < fds.size(); ++i) {
      // Not a structured binding: the lambdas below use `p`, and clang before 16 cannot capture one.
      pair* const p = owners[i - 2].first;
      const bool is_client = owners[i - 2].second;
      short re = fds[i].revents;
      if (re == 0) continue;
      if (p == nullptr) {  // a blackholed connection: swallow, never answer
        ssize_t r = ::read(fds[i].fd, buf.data(), buf.size());
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
          ::close(fds[i].fd);
          std::erase(holes_fds_, fds[i].fd);
          holes_ = holes_fds_.size();
          changed = true;
        }
        continue;
      }
      if (p->dead) continue;
      auto& self = is_client ? p->client : p->server;
      auto& other = is_client ? p->server : p->client;
      auto kill_pair = [&] {
        reset_fd(p->client.fd);
        reset_fd(p->server.fd);
        p->client.fd = p->server.fd = -1;
        p->dead = true;
        changed = true;
      };
      if (re & POLLOUT) {
        while (!self.to.empty() && self.to.front().due <= now && !stalled_ && !held(*p, self)) {
          auto& c = self.to.front();
          ssize_t w = ::send(self.fd, c.data.data() + c.off, c.data.size() - c.off, MSG_NOSIGNAL);
          if (w < 0) {
            if (errno == EAGAIN || errno == EINTR) break;
            kill_pair();
            break;
          }
          c.off += static_cast<std::size_t>(w);
          self.queued -= static_cast<std::size_t>(w);
          (is_client ? fwd_down_ : fwd_up_) += static_cast<std::uint64_t>(w);
          changed = true;
          if (c.off == c.data.size()) self.to.pop_front();
        }
        if (p->dead) continue;
      }
      if (re & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t r = ::recv(self.fd, buf.data(), buf.size(), 0);
        if (r > 0) {
          if (!is_client && lose_reply_) {
            lose_reply_ = false;
            ++replies_lost_;
            ++resets_;
            kill_pair();
            continue;
          }
          (is_client ? bytes_up_ : bytes_down_) += static_cast<std::uint64_t>(r);
          other.to.push_back({now + (is_client ? lat_up_ : lat_down_), std::string(buf.data(), static_cast<std::size_t>(r)), 0});
          other.queued += static_cast<std::size_t>(r);
          changed = true;
        } else if (r == 0) {
          self.eof = true;
          changed = true;
        } else if (errno != EAGAIN && errno != EINTR) {
          kill_pair();  // a reset on one side is passed on as a reset
          continue;
        }
      }
    }
    // A side that closed: once what it sent is delivered, close the pair.
    for (auto& p : pairs_) {
      if (p->dead) continue;
      if ((p->client.eof && p->server.to.empty()) || (p->server.eof && p->client.to.empty())) {
        if (p->client.fd >= 0) ::close(p->client.fd);  // reset_clients() closed it already
        ::close(p->server.fd);
        p->client.fd = p->server.fd = -1;
        p->dead = true;
        changed = true;
      }
    }
    std::erase_if(pairs_, [](const std::unique_ptr<pair>& p) { return p->dead; });
    live_ = pairs_.size();

    // New connections.
    if (fds[1].revents & POLLIN) {
      for (;;) {
        int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) break;
        std::uint64_t number = accepted_++;
        changed = true;
        if (refuse_) {
          reset_fd(c);
          continue;
        }
        if (blackhole_) {
          holes_fds_.push_back(c);
          holes_ = holes_fds_.size();
          continue;
        }
        int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        auto addr = loopback(upstream_);
        if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
          // The server is down: the client sees its connection reset.
          if (s >= 0) ::close(s);
          reset_fd(c);
          continue;
        }
        set_nonblocking(s);
        set_nodelay(s);
        set_nodelay(c);
        auto p = std::make_unique<pair>();
        p->client.fd = c;
        p->server.fd = s;
        p->number = number;
        pairs_.push_back(std::move(p));
        live_ = pairs_.size();
      }
    }
    if (changed) notify_changed();
  }
  // Stopped (or poll failed): release everything and wake any caller.
  command stop{command::stop};
  apply(stop);
  {
    std::lock_guard<std::mutex> g(mu_);
    exited_ = true;
    applied_ = posted_;
  }
  cv_.notify_all();
}

// ---- child_process -----------------------------------------------------------------------------

child_process::child_process(const std::vector<std::string>& argv) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) < 0) throw sys_error("pipe");
  if (::pipe2(out, O_CLOEXEC) < 0) {
    ::close(in[0]);
    ::close(in[1]);
    throw sys_error("pipe");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  int rc = ::posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    pid_ = -1;
    errno = rc;
    throw sys_error("posix_spawn " + argv.at(0));
  }
  in_ = in[1];
  out_ = out[0];
}

child_process::~child_process() {
  if (pid_ > 0) kill_now();
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
}

bool child_process::send(const std::string& line) {
  if (in_ < 0) return false;
  std::string s = line + "\n";
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    ssize_t n = ::write(in_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

void child_process::close_stdin() {
  if (in_ >= 0) ::close(in_);
  in_ = -1;
}

std::optional<std::string> child_process::read_line(ms timeout) {
  auto end = steady::now() + timeout;
  for (;;) {
    auto nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    if (eof_ || out_ < 0) return std::nullopt;
    auto left = std::chrono::ceil<ms>(end - steady::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd pfd{out_, POLLIN, 0};
    int n = ::poll(&pfd, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    char tmp[4096];
    ssize_t r = ::read(out_, tmp, sizeof tmp);
    if (r > 0) buf_.append(tmp, static_cast<std::size_t>(r));
    else if (r == 0 || errno != EINTR) eof_ = true;
  }
}

std::optional<std::string> child_process::read_line_starting(const std::string& prefix, ms timeout) {
  for (auto it = skipped_.begin(); it != skipped_.end(); ++it) {
    if (it->compare(0, prefix.size(), prefix) == 0) {
      std::string line = *it;
      skipped_.erase(it);
      return line;
    }
  }
  auto end = steady::now() + timeout;
  for (;;) {
    auto left = std::chrono::ceil<ms>(end - steady::now());
    if (left.count() <= 0) return std::nullopt;
    auto line = read_line(left);
    if (!line) return std::nullopt;
    if (line->compare(0, prefix.size(), prefix) == 0) return line;
    skipped_.push_back(*line);
  }
}

bool child_process::freeze() {
  if (pid_ <= 0 || ::kill(pid_, SIGSTOP) != 0) return false;
  int st = 0;
  for (;;) {
    pid_t r = ::waitpid(pid_, &st, WUNTRACED);
    if (r < 0 && errno == EINTR) continue;
    return r == pid_ && WIFSTOPPED(st);
  }
}

bool child_process::thaw() {
  if (pid_ <= 0 || ::kill(pid_, SIGCONT) != 0) return false;
  int st = 0;
  for (;;) {
    pid_t r = ::waitpid(pid_, &st, WCONTINUED);
    if (r < 0 && errno == EINTR) continue;
    return r == pid_ && WIFCONTINUED(st);
  }
}

int child_process::kill_now() {
  if (pid_ <= 0) return 0;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGKILL);
  int st = 0;
  for (;;) {
    pid_t r = ::waitpid(pid_, &st, 0);
    if (r < 0 && errno == EINTR) continue;
    break;
  }
  pid_ = -1;
  return st;
}

std::optional<int> child_process::wait_exit(ms timeout) {
  if (pid_ <= 0) return std::nullopt;
  auto end = steady::now() + timeout;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_ && (WIFEXITED(st) || WIFSIGNALED(st))) {
      pid_ = -1;
      return st;
    }
    if (steady::now() >= end) return std::nullopt;
    std::this_thread::sleep_for(ms(5));
  }
}

}  // namespace redlease::test
