// SPDX-License-Identifier: MIT
// A child process of the `redlease` binary, as the CLI tests run it (cli_test, doctor_test).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace redlease::test {

/// A `redlease` process (the binary at `binary`, with `args`); stdout and stderr go to the files
/// `out_path` and `err_path`, stdin is /dev/null, and only the REDLEASE_* variables in `env_extra`
/// are passed (the rest of the environment is). Signals are at their defaults and unblocked in the
/// child. Killed (SIGTERM, then SIGKILL after 5 s) and reaped if still running at the end. A failed
/// spawn is a test failure. Not thread-safe.
class cli_process {
 public:
  cli_process(const std::string& binary, const std::vector<std::string>& args,
              const std::vector<std::string>& env_extra, std::string out_path, std::string err_path);
  ~cli_process();
  cli_process(const cli_process&) = delete;
  cli_process& operator=(const cli_process&) = delete;

  /// The child's pid; -1 once reaped or if the spawn failed.
  pid_t pid() const noexcept { return pid_; }
  /// True until the exit is reaped.
  bool running() const noexcept { return pid_ > 0; }
  /// Waits up to `limit` for the exit; true if it exited (status() then holds the shell status:
  /// the exit code, or 128 + the signal).
  bool wait_for(std::chrono::milliseconds limit);
  /// Waits for the exit (failing the test and killing it after `limit`) and returns its status, -1
  /// when it had to be killed.
  int wait(std::chrono::milliseconds limit = std::chrono::milliseconds(20000));
  /// The shell status of a reaped process, -1 before.
  int status() const noexcept { return status_; }
  /// The signal that killed a reaped process; 0 if it exited (or before).
  int term_signal() const noexcept { return signal_; }
  /// What it wrote to stdout so far.
  std::string out() const;
  /// What it wrote to stderr so far.
  std::string err() const;

 private:
  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  int status_ = -1;
  int signal_ = 0;
};

/// The whole content of the file at `path` ("" if it cannot be read).
std::string read_whole_file(const std::string& path);

/// A fresh directory `/tmp/<prefix>-XXXXXX` (a test failure if it cannot be made), removed with
/// its content at destruction. Not thread-safe.
class scratch_dir {
 public:
  explicit scratch_dir(const std::string& prefix);
  ~scratch_dir();
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  /// The path of `file` in it.
  std::string path(const std::string& file) const { return dir_ + "/" + file; }

 private:
  std::string dir_;
};

}  // namespace redlease::test
