// SPDX-License-Identifier: MIT
#include "redis_server.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace redlease::test {
namespace {

// The binary the tests run: $REDLEASE_TEST_REDIS_SERVER, else "" (local::redis_server's default).
std::string test_binary() {
  const char* env = std::getenv("REDLEASE_TEST_REDIS_SERVER");
  return env != nullptr ? env : "";
}

void write_config_file(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::trunc);
  for (const std::string& line : lines) out << line << '\n';
  out.flush();
  if (!out) throw std::runtime_error("redis_server: cannot write " + path);
}

}  // namespace

bool redis_server::available() { return local::redis_server::available(test_binary()); }

redis_server::redis_server(server_options opts)
    : local::redis_server(deferred{}, test_binary()), opts_(std::move(opts)) {
  password_ = opts_.password;
  if (uses_config_file()) {
    try {
      write_config_file(config_path(), opts_.config_lines);
    } catch (...) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      throw;
    }
  }
  launch();
}

bool redis_server::uses_config_file() const noexcept { return opts_.sentinel || !opts_.config_lines.empty(); }

std::string redis_server::config_path() const { return dir_ + "/redis.conf"; }

std::string redis_server::unix_path() const { return opts_.unix_socket ? dir_ + "/redis.sock" : std::string(); }

std::string redis_server::tls_url() const {
  if (tls_port_ == 0) return {};
  std::string auth = password_.empty() ? std::string() : ":" + password_ + "@";
  return "rediss://" + auth + host() + ":" + std::to_string(tls_port_);
}

// With TLS, a second free port (picked the same way) for the TLS listener; in cluster mode, one
// more for the cluster bus. start() keeps them: the other nodes know them.
void redis_server::pick_ports() {
  local::redis_server::pick_ports();
  const std::uint16_t plain = port_;
  auto another = [this, plain](std::uint16_t other) {
    do local::redis_server::pick_ports();
    while (port_ == plain || port_ == other);
    const std::uint16_t picked = port_;
    port_ = plain;
    return picked;
  };
  if (!opts_.tls.cert_file.empty()) tls_port_ = another(0);
  if (opts_.cluster) bus_port_ = another(tls_port_);
}

std::vector<std::string> redis_server::arguments() const {
  std::vector<std::string> args;
  if (uses_config_file()) args.push_back(config_path());
  if (opts_.sentinel) args.emplace_back("--sentinel");
  auto base = base_arguments();
  args.insert(args.end(), base.begin(), base.end());
  auto add = [&args](std::string option, std::string value) {
    args.push_back(std::move(option));
    args.push_back(std::move(value));
  };
  if (opts_.unix_socket) {
    add("--unixsocket", unix_path());
    add("--unixsocketperm", "700");
  }
  if (!opts_.password.empty()) add("--requirepass", opts_.password);
  if (!opts_.tls.cert_file.empty()) {
    add("--tls-port", std::to_string(tls_port_));
    add("--tls-cert-file", opts_.tls.cert_file);
    add("--tls-key-file", opts_.tls.key_file);
    if (!opts_.tls.ca_file.empty()) add("--tls-ca-cert-file", opts_.tls.ca_file);
    add("--tls-auth-clients", opts_.tls.auth_clients ? "yes" : "no");
  }
  if (opts_.cluster) {
    add("--cluster-enabled", "yes");
    add("--cluster-config-file", dir_ + "/nodes.conf");
    add("--cluster-port", std::to_string(bus_port_));
  }
  args.insert(args.end(), opts_.extra_args.begin(), opts_.extra_args.end());
  return args;
}

void redis_server::kill() { kill_and_reap(); }

void redis_server::start() {
  if (running()) return;
  std::string why;
  for (int attempt = 0; attempt < 10; ++attempt) {
    // Back off before retrying: the previous process's listening socket may still linger.
    if (attempt != 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (spawn(why) == spawn_result::ready) return;
  }
  throw std::runtime_error("redis_server: could not restart redis-server on port " + std::to_string(port_) + ": " +
                           why + log_tail());
}

void redis_server::restart() {
  stop();
  start();
}

void redis_server::pause() {
  if (pid_ <= 0 || paused_) return;
  ::kill(pid_, SIGSTOP);
  // Wait for the stop to take effect so that callers can rely on the server being frozen.
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WUNTRACED);
    if (r < 0 && errno == EINTR) continue;
    if (r == pid_ && WIFSTOPPED(status)) {
      paused_ = true;
      return;
    }
    forget();
    throw std::runtime_error("redis_server: redis-server ended while being paused");
  }
}

void redis_server::resume() {
  if (pid_ <= 0 || !paused_) return;
  ::kill(pid_, SIGCONT);
  paused_ = false;
}

std::string redis_server::redis_log_tail(std::size_t max_bytes) const { return file_tail("redis.log", max_bytes); }

raw_client redis_server::client() const { return raw_client(host(), port(), password()); }

std::vector<std::unique_ptr<redis_server>> start_servers(int n, server_options opts) {
  std::vector<std::unique_ptr<redis_server>> servers;
  servers.reserve(static_cast<std::size_t>(n > 0 ? n : 0));
  for (int i = 0; i < n; ++i) servers.push_back(std::make_unique<redis_server>(opts));
  return servers;
}

}  // namespace redlease::test
