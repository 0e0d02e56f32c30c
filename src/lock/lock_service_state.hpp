// SPDX-License-Identifier: MIT
// The lock engine's state, shared by its rooms (lock_service*.cpp): what a hold, a waiter and a
// channel are, and the error classes the rooms decide by. Internal to src/lock/.
#pragma once

#include <charconv>
#include <list>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "background.hpp"
#include "runtime/lock_runtime.hpp"
#include "lock/lock_service.hpp"
#include "lock/naming.hpp"
#include "lock/protocol.hpp"
#include "random.hpp"

namespace redlease::detail {

// A refusal that passes: out of memory, too few replicas, busy, loading. An acquisition with a wait
// retries it with backoff; one without fails at once. Configuration refusals (no_permission,
// unknown_command) never pass by themselves and fail at once.
// A grant too few replicas acknowledged (rolled back already) counts as one when the config says
// to retry it.
// READONLY from a node whose deployment promotes replicas (Sentinel): it was demoted, and the
// topology moves to the new master within a poll; elsewhere it is a configuration (a URL naming a
// replica).
inline bool refused_for_now(std::error_code ec, const config& cfg, bool promotes_replicas) {
  return ec == errc::server_oom || ec == errc::no_replicas || ec == errc::server_busy || ec == errc::server_loading ||
         (ec == errc::not_replicated && cfg.replica_ack.retry) ||
         (ec == errc::server_readonly && promotes_replicas);
}

// Worth trying again while a wait lasts: the network, or a refusal the server lifts by itself.
inline bool transient(std::error_code ec, const config& cfg, bool promotes_replicas) {
  // A port without TLS that stays silent looks like a stalled server: retried like connect_timeout.
  return ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::connect_failed ||
         ec == errc::connect_timeout || ec == errc::tls_not_offered_by_server ||
         refused_for_now(ec, cfg, promotes_replicas);
}

// A request written whose reply never came: it may have run. The connection dropped, it timed out
// (and may still run late), or the stream broke (a protocol error fails every request written on
// the connection, though the server ran them).
inline bool outcome_unknown(std::error_code ec) {
  return ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::protocol_error;
}

// An attempt whose outcome is unknown and whose connection is gone (dropped, or broken by a protocol
// error): its undo goes on a new connection, and the attempt may still be on its way in the old one
// (a proxy that reset the client's side but still delivers what it had, a stalled server's
// buffers), so the undo can run first. One that timed out keeps its place on its connection, and
// the undo queues right behind it.
inline bool attempt_left_its_connection(std::error_code ec) {
  return ec == errc::connection_lost || ec == errc::protocol_error;
}

inline bool valid_duration(ms d, bool allow_zero) {
  return (allow_zero ? d.count() >= 0 : d.count() > 0) && d <= max_duration;
}

// The client, kept alive for the rest of a handler of the engine that runs user code (on_lost, a
// stop callback of lost_token, config::on_error). That code may drop the client's last reference
// (a worker that tears itself down when it loses its lock): the engine must not be freed under the
// handler, which goes on using it. If the handler ends up holding the last reference, the client
// goes in a handler of its own, after the frames that called this one (a connection's, a
// subscriber's, a timer's) have returned. Empty inside the client's destructor (which closes the
// engine: the handlers it runs there finish before it is freed) and once the client is gone.
class keep_client {
 public:
  explicit keep_client(const std::weak_ptr<lock_runtime>& c) : p_(c.lock()) {}
  explicit keep_client(lock_runtime& c) : keep_client(c.life()) {}
  keep_client(const keep_client&) = delete;
  keep_client& operator=(const keep_client&) = delete;
  ~keep_client() {
    if (p_ && p_.use_count() == 1) {
      auto ex = p_->executor();
      asio::post(ex, [p = std::move(p_)]() mutable { p.reset(); });
    }
  }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  std::shared_ptr<lock_runtime> p_;
};


// ---- state ------------------------------------------------------------------------------------

// One acquisition level per lock()/try_lock() held: its fixed lease, or none (watchdog). The first
// level is stored inline: most holds have exactly one, and a hold is kept small because a client
// may hold a hundred thousand.
class level_stack {
 public:
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const std::optional<ms>& operator[](std::size_t i) const { return i == 0 ? first_ : rest_[i - 1]; }
  void push_back(std::optional<ms> l) {
    if (n_ == 0) first_ = l;
    else rest_.push_back(l);
    ++n_;
  }
  void pop_back() {
    if (n_ == 0) return;
    if (n_ > 1) rest_.pop_back();
    --n_;
  }

 private:
  std::optional<ms> first_;
  std::vector<std::optional<ms>> rest_;
  std::size_t n_ = 0;
};

// The lease the first `n` levels of a hold keep on the server once the others are given back: the
// watchdog's when any of them is renewed by it (or there is none), else the latest one's fixed lease
// (Redisson's: each acquisition sets the lease, each unlock of a re-entered hold its internal lease).
inline ms lease_of_levels(const level_stack& levels, std::size_t n, ms watchdog) {
  if (n == 0) return watchdog;
  for (std::size_t i = 0; i < n; ++i)
    if (!levels[i]) return watchdog;
  return *levels[n - 1];
}

struct lock_service::hold : watch_entry, std::enable_shared_from_this<lock_service::hold> {
  std::string name;
  owner_id owner = 0;
  lock_kind kind = lock_kind::reentrant;
  bool lost = false;
  bool removed = false;
  bool release_in_doubt = false;           // an unlock's reply never came: it may have run
  int releasing = 0;                       // unlocks of this hold whose replies have not come
  std::optional<lost_reason> loss_seen;    // a renewal found it gone while one was out
  std::string token;                       // mutex only (a reentrant hold's field derives from its owner)
  std::uint64_t fence = 0;                 // the latest fenced grant's token (view_mu_)
  clock::time_point since{};               // when its first level's grant was sent (hold time, max_hold)
  level_stack levels;
  struct doubt {
    std::string request;           // the request id of the unlock in doubt, reused by the next
    clock::time_point first_sent;  // when it was first sent (the earliest its TTL can count from)
  };
  std::unique_ptr<doubt> in_doubt;
  std::stop_source stop{std::nostopstate};     // made when someone asks for lost_token()
  std::shared_ptr<lost_slot> slot;

  bool watchdog() const {
    for (std::size_t i = 0; i < levels.size(); ++i)
      if (!levels[i]) return true;
    return false;
  }
};

struct lock_service::waiter : std::enable_shared_from_this<lock_service::waiter> {
  std::string name;
  lock_kind kind = lock_kind::reentrant;
  owner_id owner = 0;
  std::optional<ms> lease;
  std::optional<clock::time_point> deadline;
  std::shared_ptr<lost_slot> slot;
  std::string id;  // mutex only: this attempt's token (a reentrant field derives from the owner)
  bool fenced = false;  // each grant also takes a fencing token
  ms allowance{0};      // the place kept in a queue after each call, for kinds that declare it (fair lock)
  bool queue = true;    // false for one attempt without waiting (a fair lock does not queue it)
  long long amount = 1; // units one acquisition takes (a semaphore's permits)
  clock::time_point started{};   // the call (wait time)
  clock::time_point woken_at{};  // the latest message that woke it (hand-off time); epoch: none
  bool_handler done;
  asio::steady_timer timer;
  bool trying = false;
  bool again = false;     // a wake-up came while an attempt was on the wire
  bool woken = false;     // an unlock message woke this waiter alone: passed on if it gives up
  bool finished = false;
  bool cancelled = false;  // cancelled while an attempt was on the wire: ends when it answers
  bool poll_capped = false;
  bool behind = false;  // the last reply: queued behind another waiter (see acquire_result::behind)
  bool on_card = false; // the client's card records this wait (card_keeper::wait_started)
  wait_strategy how;
  ms next_delay{0};
  unsigned retries = 0;
  std::error_code last_error;
  std::string last_error_text;  // the server's words for last_error
  ms error_delay{0};            // backoff between attempts the server refused
  std::vector<channel_entry*> channels;

  explicit waiter(const asio::any_io_executor& ex) : timer(ex) {}
};

struct lock_service::channel_entry final : channel_listener {
  lock_service* svc = nullptr;
  std::string channel;
  // The subscriber it was added to, which it leaves: not looked up again by the channel (a topology
  // may move a channel to another node's subscriber meanwhile).
  subscriber* sub = nullptr;
  // The kind of the waiter that opened it (one kind's channel): what its messages mean. Keyspace
  // channels (nullptr) wake one waiter on a deletion or an expiry.
  const lock_protocol* proto = nullptr;
  bool keyspace = false;
  bool lingers = false;        // stays subscribed for a while without waiters (see join_channel)
  bool missed = false;         // a message came while nobody (who would try) waited on it
  clock::time_point idle_since{};
  std::list<waiter*> waiters;  // FIFO: a plain unlock wakes the longest waiting

  void on_message(std::string_view, std::string_view payload) override {
    if (keyspace) {
      if (payload == "del" || payload == "expired" || payload == "evicted") svc->wake(*this, wake_policy::one);
      return;
    }
    if (auto units = proto->units_available(payload)) return svc->wake_units(*this, *units);
    svc->wake(*this, proto->wakes(payload));
  }
  void on_subscribed() override { svc->wake(*this, wake_policy::all, false); }
  void on_refused(std::error_code ec, const std::string& text) override { svc->channel_refused(*this, ec, text); }
};

}  // namespace redlease::detail
