// SPDX-License-Identifier: MIT
#include "local_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>

namespace redlease::local {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr int exec_failed_status = 127;

// Children still running, with the pid of the process that started each (a forked copy of the
// process, e.g. a gtest death test, calling exit() must not kill its parent's servers) and the
// directory to remove if the atexit hook has to kill them.
struct registry {
  struct entry {
    pid_t owner;
    std::string dir;
  };
  std::mutex mu;
  std::map<pid_t, entry> children;
};

// Leaked on purpose: it must still be usable from the atexit hook, after static destructors.
registry& the_registry() {
  static registry* r = new registry;
  return *r;
}

void kill_leftovers() {
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  const pid_t self = ::getpid();
  for (const auto& [pid, e] : r.children) {
    if (e.owner != self) continue;
    ::kill(pid, SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(e.dir, ec);
  }
}

void register_child(pid_t pid, const std::string& dir) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(kill_leftovers); });
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  r.children[pid] = registry::entry{::getpid(), dir};
}

void unregister_child(pid_t pid) {
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  r.children.erase(pid);
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

const char* const default_binary = "redis-server";

// The path of `binary` (a path, or a name looked up on PATH), or "" if it is not found.
std::string find_binary(const std::string& binary) {
  const std::string& name = binary.empty() ? std::string(default_binary) : binary;
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? name : std::string();
  std::string dirs;
  if (const char* path = std::getenv("PATH"); path != nullptr) dirs = path;
  // Debian installs redis-server in /usr/bin; a stripped-down PATH should not hide it.
  dirs += ":/usr/local/bin:/usr/bin:/usr/sbin";
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    std::size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    // No `dir + "/" + name`, no `= "."`: g++ 12 -O3 reports a false -Wrestrict on both.
    std::string candidate(dirs, begin, end - begin);
    if (candidate.empty()) candidate.push_back('.');
    candidate.push_back('/');
    candidate.append(name);
    if (is_executable_file(candidate)) return candidate;
    begin = end + 1;
  }
  return {};
}

std::string errno_text(int err) { return std::string(std::strerror(err)); }

// A blocking connection to the child on 127.0.0.1 that knows just enough RESP for the readiness
// check: one command at a time, replies of type + - : and $ (the test harness has a full client).
// Throws std::runtime_error on I/O errors, timeouts and anything else.
class probe {
 public:
  struct reply {
    char type = 0;    // '+', '-', ':', '$', or 'n' for a nil bulk string
    std::string str;  // the line, or the bulk string's contents
  };

  probe(std::uint16_t port, std::chrono::milliseconds timeout) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket: " + errno_text(errno));
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      const int err = errno;
      ::close(fd_);
      throw std::runtime_error("connect: " + errno_text(err));
    }
  }
  ~probe() { ::close(fd_); }
  probe(const probe&) = delete;
  probe& operator=(const probe&) = delete;

  reply command(std::initializer_list<std::string_view> args) {
    std::string out;
    out.append("*").append(std::to_string(args.size())).append("\r\n");
    for (std::string_view a : args) {
      out.append("$").append(std::to_string(a.size())).append("\r\n").append(a).append("\r\n");
    }
    for (std::size_t sent = 0; sent < out.size();) {
      const ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("send: " + errno_text(errno));
      sent += static_cast<std::size_t>(n);
    }
    reply r;
    std::string line = read_line();
    if (line.empty()) throw std::runtime_error("empty reply line");
    r.type = line[0];
    r.str = line.substr(1);
    if (r.type == '$') {
      const long long len = std::strtoll(r.str.c_str(), nullptr, 10);
      r.str.clear();
      if (len < 0) {
        r.type = 'n';
      } else {
        fill(static_cast<std::size_t>(len) + 2);
        r.str = buf_.substr(0, static_cast<std::size_t>(len));
        buf_.erase(0, static_cast<std::size_t>(len) + 2);
      }
    } else if (r.type != '+' && r.type != '-' && r.type != ':') {
      throw std::runtime_error("unexpected reply type");
    }
    return r;
  }

 private:
  std::string read_line() {
    std::size_t end;
    while ((end = buf_.find("\r\n")) == std::string::npos) fill(buf_.size() + 1);
    std::string line = buf_.substr(0, end);
    buf_.erase(0, end + 2);
    return line;
  }
  // Receives until the buffer holds at least `n` bytes.
  void fill(std::size_t n) {
    char chunk[4096];
    while (buf_.size() < n) {
      const ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
      if (got == 0) throw std::runtime_error("connection closed");
      if (got < 0) throw std::runtime_error("recv: " + errno_text(errno));
      buf_.append(chunk, static_cast<std::size_t>(got));
    }
  }

  int fd_ = -1;
  std::string buf_;
};

std::uint16_t pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("redis_server: socket failed: " + errno_text(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error("redis_server: cannot find a free port: " + errno_text(err));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string make_temp_dir() {
  std::string base = "/tmp";
  // The unix socket path must fit in sockaddr_un::sun_path (108 bytes).
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0' && std::strlen(t) < 64)
    base = t;
  std::string tmpl = base + "/redlease-redis-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("redis_server: mkdtemp(" + tmpl + ") failed: " + errno_text(errno));
  }
  return tmpl;
}

pid_t wait_blocking(pid_t pid, int& status) {
  for (;;) {
    pid_t r = ::waitpid(pid, &status, 0);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

std::string describe_status(int status) {
  if (WIFEXITED(status))
    return "redis-server exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "redis-server was killed by signal " + std::to_string(WTERMSIG(status));
  return "redis-server ended (status " + std::to_string(status) + ")";
}

long long info_field(const std::string& info, const std::string& field) {
  const std::string key = field + ":";
  std::size_t pos = info.find(key);
  if (pos == std::string::npos) return -1;
  return std::strtoll(info.c_str() + pos + key.size(), nullptr, 10);
}

std::string tail_of_file(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > static_cast<std::streamoff>(max_bytes)
                                  ? size - static_cast<std::streamoff>(max_bytes)
                                  : 0;
  in.seekg(from);
  std::string out(static_cast<std::size_t>(size - from), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  return out;
}

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void exec_child(pid_t parent, const char* out_path, char* const* argv) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent may have died before prctl took effect.
  if (::getppid() != parent) ::_exit(exec_failed_status - 1);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int in = ::open("/dev/null", O_RDONLY);
  // Truncated: only the last attempt's early output is of interest.
  int out = ::open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (in >= 0) ::dup2(in, STDIN_FILENO);
  if (out >= 0) {
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
  }
  // Sockets of this process (e.g. clients of other servers) must not stay open in redis-server.
  if (::close_range(3, ~0U, 0) != 0) {
    rlimit lim{};
    int max_fd = ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 65536
                     ? static_cast<int>(lim.rlim_cur)
                     : 65536;
    for (int fd = 3; fd < max_fd; ++fd) ::close(fd);
  }
  ::execv(argv[0], argv);
  ::_exit(exec_failed_status);
}

}  // namespace

bool redis_server::available(const std::string& binary) { return !find_binary(binary).empty(); }

redis_server::redis_server(deferred, const std::string& binary) : binary_(find_binary(binary)) {
  if (binary_.empty()) {
    throw std::runtime_error("redis_server: " + (binary.empty() ? std::string(default_binary) : binary) +
                             " not found (not executable, or not on PATH)");
  }
  dir_ = make_temp_dir();
}

redis_server::redis_server(const std::string& binary) : redis_server(deferred{}, binary) { launch(); }

void redis_server::launch() {
  std::string why;
  try {
    for (int attempt = 0; attempt < 10; ++attempt) {
      pick_ports();
      if (spawn(why) == spawn_result::ready) return;
    }
    why = "could not start redis-server: " + why + log_tail();
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  throw std::runtime_error("redis_server: " + why);
}

void redis_server::pick_ports() { port_ = pick_free_port(); }

redis_server::~redis_server() {
  try {
    stop();
  } catch (...) {
  }
  kill_and_reap();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string redis_server::url() const {
  std::string auth = password_.empty() ? std::string() : ":" + password_ + "@";
  return "redis://" + auth + host() + ":" + std::to_string(port_);
}

std::vector<std::string> redis_server::base_arguments() const {
  return {"--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
          "--daemonize", "no", "--dir", dir_, "--enable-debug-command", "yes", "--logfile", dir_ + "/redis.log",
          "--protected-mode", "no"};
}

std::vector<std::string> redis_server::arguments() const { return base_arguments(); }

redis_server::spawn_result redis_server::spawn(std::string& why) {
  std::vector<std::string> args = arguments();
  args.insert(args.begin(), binary_);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out_path = dir_ + "/redis.out";
  const pid_t parent = ::getpid();

  pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("redis_server: fork failed: " + errno_text(errno));
  if (child == 0) exec_child(parent, out_path.c_str(), argv.data());
  pid_ = child;
  paused_ = false;
  register_child(child, dir_);
  return wait_ready(why);
}

redis_server::spawn_result redis_server::wait_ready(std::string& why) {
  const auto deadline = clock_type::now() + 10s;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      forget();
      if (WIFEXITED(status) && WEXITSTATUS(status) == exec_failed_status) {
        throw std::runtime_error("redis_server: cannot execute " + binary_ + log_tail());
      }
      why = describe_status(status);
      return spawn_result::exited;
    }
    try {
      // A short timeout: a stuck foreign process on our port must not stall the poll.
      probe c(port_, 1s);
      bool authed = password_.empty() || c.command({"AUTH", password_}).type != '-';
      if (authed) {
        probe::reply pong = c.command({"PING"});
        if (pong.type == '+' && pong.str == "PONG") {
          // The port may have been taken by some other redis-server (another process) between
          // picking and binding; only our own child counts.
          probe::reply info = c.command({"INFO", "server"});
          if (info_field(info.str, "process_id") == pid_) return spawn_result::ready;
          why = "port " + std::to_string(port_) + " was taken by another redis-server";
          kill_and_reap();
          return spawn_result::foreign;
        }
      }
    } catch (const std::exception&) {
      // Not listening yet.
    }
    if (clock_type::now() >= deadline) {
      kill_and_reap();
      throw std::runtime_error("redis_server: redis-server on port " + std::to_string(port_) +
                               " did not answer PING within 10 s" + log_tail());
    }
    std::this_thread::sleep_for(5ms);
  }
}

void redis_server::forget() noexcept {
  if (pid_ > 0) unregister_child(pid_);
  pid_ = -1;
  paused_ = false;
}

void redis_server::kill_and_reap() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  wait_blocking(pid_, status);
  forget();
}

void redis_server::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGTERM);
  const auto deadline = clock_type::now() + 5s;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      forget();
      return;
    }
    if (clock_type::now() >= deadline) {
      kill_and_reap();
      return;
    }
    std::this_thread::sleep_for(2ms);
  }
}

std::string redis_server::file_tail(const std::string& name, std::size_t max_bytes) const {
  return tail_of_file(dir_ + "/" + name, max_bytes);
}

std::string redis_server::log_tail() const {
  std::string out;
  for (const char* name : {"redis.log", "redis.out"}) {
    std::string tail = file_tail(name, 2000);
    if (!tail.empty()) out += "\n--- " + std::string(name) + " (tail) ---\n" + tail;
  }
  return out;
}

}  // namespace redlease::local
