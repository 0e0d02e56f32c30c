// SPDX-License-Identifier: MIT
// What the lock layer runs on, and all it knows of it: the configuration, the client's id, the
// executor its state lives on, the topology it hands keyed requests to, the lifetime of what owns
// it, and the counters it keeps. The client implements it; a test can implement it over a fake
// topology. Executor only, except the counters (any thread) and construction.
#pragma once

#include <asio/any_io_executor.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/metrics.hpp"
#include "topology/topology.hpp"

namespace redlease::detail {

class lock_runtime {
 public:
  virtual ~lock_runtime() = default;
  virtual const config& cfg() const noexcept = 0;
  /// The client's id: the first part of every owner field it writes.
  virtual const std::string& uuid() const noexcept = 0;
  virtual const asio::any_io_executor& executor() const noexcept = 0;
  virtual topology& topo() noexcept = 0;
  /// The owner's lifetime. A handler that runs user code (on_lost, a stop callback) holds it for the
  /// rest of its run: that code may drop the owner's last reference. Expired once it is gone.
  virtual std::weak_ptr<lock_runtime> life() noexcept = 0;

  /// A keyed request, handed whole to the topology (see keyed_request).
  void exec(keyed_request r) { topo().exec(std::move(r)); }
  /// A command on the node of `key`; `h` gets (ec, reply), an error reply mapped to its code.
  void exec(std::string_view key, std::string payload, reply_handler h, bool idempotent = false) {
    topo().exec(keyed_request::command(key, std::move(payload), std::move(h), idempotent));
  }
  /// EVALSHA with EVAL fallback on NOSCRIPT, on the node of `key` (the script's first key).
  void exec_script(std::string_view key, const lua_script& s, arg_list args, reply_handler h,
                   bool idempotent = false) {
    topo().exec(keyed_request::script_call(key, s, std::move(args), std::move(h), idempotent));
  }
  /// As exec_script, with replica acknowledgement (WAIT behind it when it is on).
  void exec_script_acked(std::string_view key, const lua_script& s, arg_list args, reply_handler h,
                         bool idempotent = false) {
    auto r = keyed_request::script_call(key, s, std::move(args), std::move(h), idempotent);
    r.what = keyed_request::kind::script_acked;
    topo().exec(std::move(r));
  }

  // What the lock layer counts (client::stats reads them from any thread).
  std::atomic<std::uint64_t> renew_calls{0};
  std::atomic<std::uint64_t> watchdog_ticks{0};
  std::atomic<std::uint64_t> renewed_locks{0};
  std::atomic<std::uint64_t> held_locks{0};
  std::atomic<std::uint64_t> watched_locks{0};
  lock_counters metrics;
};

}  // namespace redlease::detail
