// SPDX-License-Identifier: MIT
#include "cli_process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

extern char** environ;

namespace redlease::test {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

scratch_dir::scratch_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << tmpl << ": " << std::strerror(errno);
  else dir_ = tmpl;
}

scratch_dir::~scratch_dir() {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

cli_process::cli_process(const std::string& binary, const std::vector<std::string>& args,
                         const std::vector<std::string>& env_extra, std::string out_path, std::string err_path)
    : out_path_(std::move(out_path)), err_path_(std::move(err_path)) {
  std::vector<std::string> argv_s{binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    std::string_view v(*e);
    if (v.starts_with("REDLEASE_")) continue;  // only what the test passes
    env_s.emplace_back(v);
  }
  env_s.insert(env_s.end(), env_extra.begin(), env_extra.end());
  std::vector<char*> argv, envp;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // nothing of the test leaks into redlease
  // The test's own signal mask and dispositions (gtest, a test that blocks SIGTERM) must not reach
  // the child: the signal tests check what redlease does with the defaults.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGPIPE}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  int rc = posix_spawn(&pid_, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    pid_ = -1;
    ADD_FAILURE() << "posix_spawn " << binary << ": " << std::strerror(rc);
  }
}

cli_process::~cli_process() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);  // redlease forwards it to its command
  if (!wait_for(5000ms)) {
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
  }
}

bool cli_process::wait_for(std::chrono::milliseconds limit) {
  if (pid_ <= 0) return true;
  auto end = steady::now() + limit;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
      signal_ = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
      pid_ = -1;
      return true;
    }
    if (r < 0 && errno != EINTR) {
      pid_ = -1;
      return true;
    }
    if (steady::now() >= end) return false;
    std::this_thread::sleep_for(2ms);
  }
}

int cli_process::wait(std::chrono::milliseconds limit) {
  if (!wait_for(limit)) {
    ADD_FAILURE() << "redlease did not exit within " << limit.count() << " ms; stderr:\n" << err();
    ::kill(pid_, SIGKILL);
    wait_for(5000ms);
    return -1;
  }
  return status_;
}

std::string cli_process::out() const { return read_whole_file(out_path_); }
std::string cli_process::err() const { return read_whole_file(err_path_); }

}  // namespace redlease::test
