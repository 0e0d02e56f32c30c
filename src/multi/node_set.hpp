// SPDX-License-Identifier: MIT
// The clients of a composition above the lock engine (a RedLock's masters, a multi lock's members'
// clients): one client per node, and all the composition knows of them; the one file that knows
// the client is node_set.cpp. The first node is the home: its executor runs the composition's
// timers and completions. It keeps the clients' state alive, not their connections.
#pragma once

#include <asio/any_io_executor.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/command.hpp"
#include "base/script.hpp"
#include "base/handlers.hpp"
#include "redlease/detail/unique_function.hpp"

namespace redlease {
class client;
struct config;
}  // namespace redlease

namespace redlease::detail {

class client_impl;

class node_set {
 public:
  /// One node per client, in the order given (the nodes' indexes).
  /// @throws redlease::error `errc::invalid_argument` for a moved-from client.
  explicit node_set(const std::vector<std::reference_wrapper<client>>& clients);
  /// One node per client (a client may come more than once).
  explicit node_set(std::vector<std::shared_ptr<client_impl>> clients) noexcept;
  ~node_set();
  node_set(node_set&&) noexcept;
  node_set(const node_set&) = delete;
  node_set& operator=(const node_set&) = delete;
  node_set& operator=(node_set&&) = delete;

  std::size_t size() const noexcept { return nodes_.size(); }
  // Any thread.
  const asio::any_io_executor& home_executor() const noexcept;
  const config& home_cfg() const noexcept;
  bool home_closed() const noexcept;
  const config& cfg(std::size_t i) const noexcept;
  bool closed(std::size_t i) const noexcept;
  /// A blocking call on this thread would deadlock: it runs one of the clients' executors.
  bool blocking_forbidden() const noexcept;
  /// Posts `fn` to the home executor; false (and `fn` dropped) once the home client is closed.
  bool post_home(std::function<void()> fn) const;
  /// Runs `fn` on this thread as the home executor would (under the home client's I/O guard, its
  /// I/O thread being idle, or on that thread): no hand-off, no wake-up. False, `fn` not run,
  /// when it cannot (busy, closed, or a user executor): post it then.
  bool run_home_here(const std::function<void()>& fn) const;
  /// Runs the script on node `i` (EVALSHA with the NOSCRIPT fallback, keyed by `key`), `h` run on
  /// that node's executor. The request is written on this thread when it can be (on that node's
  /// thread, or under its guard while its I/O thread is idle), else handed to that thread; the
  /// requests of one thread to one node keep their order either way. False (nothing sent) once
  /// that client is closed.
  bool exec_script(std::size_t i, std::string key, const lua_script& s, arg_list args, reply_handler h) const;
  /// Runs `f(false)` on node `i`'s executor (at once when called there), or `f(true)` on the calling
  /// thread once that client is closed.
  void run_or_fail(std::size_t i, unique_function<void(bool closed)> f) const;

  // Home executor only.
  /// Runs `fn` when the home client closes, unless `alive` has expired by then.
  void on_home_close(std::weak_ptr<void> alive, std::function<void()> fn) const;

 private:
  std::vector<std::shared_ptr<client_impl>> nodes_;
};

}  // namespace redlease::detail
