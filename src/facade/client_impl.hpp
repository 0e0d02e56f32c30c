// SPDX-License-Identifier: MIT
// The state behind `redlease::client` and its lock handles: a runtime (io_runtime: the executor, the
// inbox, blocking calls) with the client's topology and lock engine on it (it is their lock_runtime).
#pragma once

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/io_guard.hpp"
#include "net/connection.hpp"
#include "net/lane.hpp"
#include "net/resp.hpp"
#include "base/script.hpp"
#include "net/subscriber.hpp"
#include "runtime/one_shot.hpp"
#include "runtime/io_runtime.hpp"
#include "runtime/lock_runtime.hpp"
#include "topology/node.hpp"
#include "runtime/delivery.hpp"
#include "topology/topology.hpp"
#include "redlease/config.hpp"
#include "redlease/error.hpp"

namespace redlease::detail {

class lock_service;

class client_impl : public std::enable_shared_from_this<client_impl>, public io_runtime, public lock_runtime {
 public:
  // With `user_ex` empty the client runs its own io_context on its own thread.
  client_impl(config cfg, std::optional<asio::any_io_executor> user_ex);
  ~client_impl() override;
  void start();
  // Closes everything (on the executor) and joins the own thread. Idempotent, noexcept.
  void shutdown() noexcept;

  const config& cfg() const noexcept override { return io_runtime::cfg(); }
  const std::string& uuid() const noexcept override { return uuid_; }
  const asio::any_io_executor& executor() const noexcept override { return io_runtime::executor(); }
  topology& topo() noexcept override { return *topo_; }
  std::weak_ptr<lock_runtime> life() noexcept override { return std::weak_ptr<lock_runtime>(weak_from_this()); }
  lock_service& locks() noexcept { return *locks_; }

  // Executor (or guard holder) only: no command connection has anything queued, in flight, being
  // written or read.
  bool quiet() const override;
  // Executor only: a command connection has a request queued, or in flight and not yet timed out.
  bool answers_pending() const;
  // After run_direct: waits, on this thread, for the replies to what the call sent on the lane `s`
  // holds, and runs their handlers under the I/O guard (their follow-up requests may go on the lane
  // too), until the call is `answered` or none of its requests there waits for a reply; then gives
  // the lane back, or hands it to its node while requests are still in flight. Each wait spins for
  // the budget of config::sync_wait (see lane_spin), then sleeps in poll().
  void pump_lane(lane_session& s, const one_shot& answered) override;

  // The threads that run client::subscribe's callbacks (runtime/delivery.hpp), started by the
  // first call; null once the client has closed. Any thread.
  std::shared_ptr<delivery_pool> delivery();

  // Executor only: runs `fn` when the client closes, unless `alive` has expired by then.
  void on_close(std::weak_ptr<void> alive, std::function<void()> fn) {
    std::erase_if(close_hooks_, [](auto& h) { return h.first.expired(); });
    close_hooks_.emplace_back(std::move(alive), std::move(fn));
  }

 private:
  std::string uuid_;
  std::unique_ptr<topology> topo_;
  std::unique_ptr<lock_service> locks_;
  std::mutex life_mu_;
  std::mutex delivery_mu_;
  std::shared_ptr<delivery_pool> delivery_;
  bool delivery_stopped_ = false;
  // Executor only: closes the connections once nothing sent or queued waits for its answer, or at
  // `until` (config::close_timeout).
  void close_when_answered(clock::time_point until);
  void close_topology() noexcept;
  bool topo_closed_ = false;  // executor only
  std::optional<asio::steady_timer> close_timer_;  // executor only: close_when_answered's next look
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // expires in the destructor
  std::vector<std::pair<std::weak_ptr<void>, std::function<void()>>> close_hooks_;  // executor only
};

// One encoded command on the node of `route`, as a blocking call (see sync_call); an error reply
// sets `ec` to its code and is returned.
inline reply sync_command(client_impl& c, std::string route, std::string payload, std::error_code& ec,
                          bool idempotent = false) {
  return sync_call<reply>(c, ec, [c = &c, route = std::move(route), p = std::move(payload), idempotent](auto done) mutable {
    c->exec(route, std::move(p), std::move(done), idempotent);
  });
}

}  // namespace redlease::detail
