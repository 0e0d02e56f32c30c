// SPDX-License-Identifier: MIT
// Everything a client knows about its locks: the holds, the waiters and their channels, and the
// watchdog that renews the holds. Runs on the client's executor only.
#pragma once

#include <asio/steady_timer.hpp>

#include <atomic>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "callback_slot.hpp"
#include "lock/client_card.hpp"
#include "lock/latch_sweeper.hpp"
#include "base/command.hpp"
#include "base/handlers.hpp"
#include "base/script.hpp"
#include "redlease/lock.hpp"
#include "watchdog/scheduler.hpp"

namespace redlease::detail {

class lock_runtime;
class lock_protocol;
class renewal_codec;
struct release_facts;
struct release_outcome;
enum class wake_policy;
class node;
struct prefix_cell;

/// The on_lost callback of a handle (and its copies): called on the executor, set from any thread,
/// cleared when the last copy of the handle goes (see callback_slot's teardown promise).
struct lost_slot {
  std::atomic<int> handles{0};  // copies of the handle alive
  callback_slot<const lost_info&> cb;
};

/// The cancellation state of one async acquisition (executor only). A cancellation that arrives
/// before the acquisition started is remembered in `requested`.
struct acquire_cancel {
  bool requested = false;
  std::weak_ptr<void> waiter;
  // Set while the acquisition waits for an unlock of the same hold to settle (no waiter yet):
  // completes it at once.
  unique_function<void()> parked;
};

// max_duration (redlease/lock.hpp): the longest lease or wait, and the longest delay the engine
// adds to the clock.

class lock_service {
 public:
  explicit lock_service(lock_runtime& c);
  ~lock_service();

  /// Acquires; `wait` empty = wait forever, 0 = one attempt. `lease` empty = watchdog. `amount`: the
  /// units one acquisition takes (a semaphore's permits; at least 1).
  void acquire(std::string name, lock_kind kind, owner_id owner, std::optional<ms> wait, std::optional<ms> lease,
               std::shared_ptr<lost_slot> slot, const wait_strategy& how, bool_handler h,
               std::shared_ptr<acquire_cancel> cancel = nullptr, bool fenced = false, long long amount = 1);
  /// Ends the acquisition with `errc::operation_aborted`: at once if no attempt is on the wire, else
  /// when its reply comes (a grant it brought is released first).
  void cancel_acquire(acquire_cancel& x);
  void release(std::string name, lock_kind kind, owner_id owner, void_handler h);
  void force_unlock(std::string name, lock_kind kind, bool_handler h);
  void hold_count(std::string name, lock_kind kind, owner_id owner, int_handler h);

  struct local_view {
    bool held = false;
    bool valid = false;
    clock::time_point valid_until = clock::time_point::min();
    std::stop_token token;
    std::uint64_t fence = 0;  // the fencing token of the hold's latest fenced grant (0: none)
  };
  /// What the client knows of a hold. `want_token` makes the hold's stop source (on first use).
  /// Any thread (the I/O thread included): it reads under `view_mu_`, never waits for the executor.
  local_view view(std::string_view name, owner_id owner, lock_kind kind, bool want_token);
  /// The hold as `redlease status` shows its holder (lock_protocol::holder_field); empty if `owner` holds none.
  /// Any thread, as view().
  std::string holder(std::string_view name, owner_id owner, lock_kind kind);

  /// How long a lost hold that its owner never unlocks is kept (so that its next unlock or
  /// acquisition can say lock_lost): five minutes. Tests shorten it, before making a client.
  static ms lost_hold_kept;

  void on_command_connection_up();
  /// The master changed (topology_events::on_failover): checks every hold on the new one at once.
  void on_failover(const std::string& what);
  void close();
  /// The client's settled exactly-once keys (latch_sweeper.hpp): the semaphore's releases add theirs
  /// and take some to delete in passing, as its acquisitions do. Executor only.
  latch_sweeper& sweeper() { return sweeper_; }

 private:
  struct hold;
  struct waiter;
  struct channel_entry;
  struct key {
    std::string_view name;
    owner_id owner;
    lock_kind kind;  // one owner may hold both sides of a read-write lock
    bool operator==(const key&) const = default;
  };
  // The holds are a set of shared pointers looked up by (name, owner): one pointer per node.
  struct hold_hash {
    using is_transparent = void;
    std::size_t operator()(const key& k) const noexcept;
    std::size_t operator()(const std::shared_ptr<hold>& h) const noexcept;
  };
  struct hold_eq {
    using is_transparent = void;
    bool operator()(const key& a, const std::shared_ptr<hold>& b) const noexcept;
    bool operator()(const std::shared_ptr<hold>& a, const key& b) const noexcept;
    bool operator()(const std::shared_ptr<hold>& a, const std::shared_ptr<hold>& b) const noexcept;
  };
  // (ec, pttl: empty when granted, the fencing token of a fenced grant, when the attempt was sent)
  using attempt_handler =
      unique_function<void(std::error_code, std::optional<long long> pttl, std::uint64_t fence, clock::time_point sent)>;

  void append_field(std::string& out, owner_id owner) const;
  std::string field_of(owner_id owner) const;
  // The owner field in a buffer reused by every call (no allocation): valid until the next call.
  std::string_view scratch_field(owner_id owner);
  void attempt(const std::shared_ptr<waiter>& w, attempt_handler h);
  bool stale_grant(waiter& w, clock::time_point sent);
  void finish_grant(const std::shared_ptr<waiter>& w, std::uint64_t fence, clock::time_point sent);
  ms queue_allowance(std::optional<ms> wait) const;
  ms poll_interval(const waiter& w) const;
  bool end_if_cancelled(const std::shared_ptr<waiter>& w, bool granted);
  void end_attempt_after_close(const std::shared_ptr<waiter>& w, std::error_code ec, bool granted);
  void give_up(const waiter& w);
  // `unordered`: the undo may run before the attempt (see undo_round::unordered).
  void undo_acquire(const waiter& w, unique_function<void()> then = nullptr, bool unordered = false);
  // `request`: the id of an earlier sending of the same undo, whose reply never came.
  void undo_acquire(const std::string& name, lock_kind kind, owner_id owner, const std::string& id, bool queued,
                    ms allowance, unique_function<void()> then = nullptr, std::string request = {},
                    bool unordered = false, long long amount = 1);
  struct undo_round;
  void send_behind(std::string_view key, const lua_script& s, arg_list a, reply_handler h);
  void undo_answered(const std::shared_ptr<undo_round>& r, std::error_code ec);
  bool undo_may_race(const undo_round& r) const;
  void sweep_later(std::shared_ptr<undo_round> r, ms wait, ms step, int left);
  // Records a grant as a hold (a new one, or a level of the owner's). False, recording nothing, for a
  // re-entry whose hold was found lost while the attempt was on the wire.
  [[nodiscard]] bool on_acquired(const std::string& name, lock_kind kind, owner_id owner, std::optional<ms> lease,
                                 const std::string& id, std::uint64_t fence, clock::time_point sent,
                                 const std::shared_ptr<lost_slot>& slot);
  hold* find(std::string_view name, owner_id owner, lock_kind kind) const;
  void erase(hold* h);
  void mark_lost(hold& h, lost_reason why);
  // Drops the lost holds lost lost_hold_kept ago or more.
  void prune_lost(clock::time_point now);
  // Observability (lock_service_observe.cpp): the lock metrics and config::on_event.
  void note_acquisition(lock_kind kind, std::error_code ec, bool granted, const waiter* w = nullptr,
                        prefix_cell* by_prefix = nullptr);
  void note_hold_end(const hold& h, std::optional<lost_reason> lost, const std::error_code& cause,
                     const std::string& detail);
  void note_renewal_failed(const hold& h, std::error_code ec);
  void note_failover(const std::string& what);
  // True past config::max_hold since the hold's grant (a watchdog hold), and then marks it lost.
  bool past_max_hold(hold& h, clock::time_point now);
  void reschedule(hold& h);
  void arm_watchdog();
  void on_watchdog_timer();
  // A batch of renewals: a watchdog tick, or the check of every hold after a failover.
  struct renew_context {
    std::string failover;      // what happened, when this checks holds after a failover
    bool verify_only = false;  // check ownership, leave the lease (fixed-lease holds)
  };
  void send_renewals(std::vector<std::shared_ptr<hold>> batch, const renew_context& ctx);
  void on_renewed(const std::vector<std::shared_ptr<hold>>& batch, clock::time_point sent, const renew_context& ctx,
                  std::error_code ec, const reply& r, const renewal_codec& codec);
  void verify_later(std::shared_ptr<hold> h, const renew_context& ctx);
  void drop_lost_level(hold& h, std::optional<lost_reason> why = std::nullopt);
  // One release of a hold, of any kind, and its retries (exactly once: see release.lua's latch).
  void send_after_release(const hold& h);  // the acquisitions parked while an unlock of h was out
  void release_hold(std::shared_ptr<hold> h, std::string name, const lock_protocol& proto, owner_id owner,
                    int attempt_no, long long expected, std::string request, clock::time_point first_sent,
                    void_handler done);
  release_facts settle_release(hold& h);
  void apply_release(hold* h, const release_outcome& o, const release_facts& f, clock::time_point sent, ms lease);
  ms latch_ttl() const;
  // The release script: with Redis 7's allow-oom flag where the server takes it (probed once).
  void exec_release(std::string_view key, const lock_protocol& proto, arg_list a, reply_handler h);

  // waiting
  void start_waiter(std::shared_ptr<waiter> w, std::optional<long long> pttl);
  void waiter_sleep(const std::shared_ptr<waiter>& w, std::optional<long long> pttl);
  void waiter_try(const std::shared_ptr<waiter>& w);
  void finish_waiter(const std::shared_ptr<waiter>& w, std::error_code ec, bool acquired);
  void join_channel(const std::shared_ptr<waiter>& w, const std::string& channel, bool keyspace);
  void leave_channels(waiter& w);
  void channel_refused(channel_entry& ch, std::error_code ec, const std::string& text);
  void fall_back_to_backoff(const std::shared_ptr<waiter>& w);
  void poll_instead(waiter& w);
  void leave_channel(waiter& w, channel_entry& e);
  static waiter* channel_head(const channel_entry& e, const waiter* leaving);
  bool polls(const waiter& w) const;
  void arm_linger();
  static constexpr ms linger_for{5000};
  bool channel_refused_lately(const std::string& channel);
  // `message`: a message on the channel woke them (counted, and timed to their grant as a hand-off),
  // not the subscription's confirmation.
  void wake(channel_entry& ch, wake_policy how, bool message = true);
  // Counts the waiters a message woke and has each try again.
  void woke(const std::vector<std::shared_ptr<waiter>>& targets);
  // A message saying `units` are available: wakes, in order, the waiters whose amount fits.
  void wake_units(channel_entry& ch, long long units);
  void with_keyspace_state(std::string_view key, unique_function<void()> then);

  lock_runtime& c_;
  // Guards what view() reads from other threads: the set's structure and each hold's valid_until,
  // lost flag and stop source. Written on the executor only, always under it; never held while
  // user code runs.
  mutable std::mutex view_mu_;
  std::unordered_set<std::shared_ptr<hold>, hold_hash, hold_eq> holds_;
  std::deque<std::pair<clock::time_point, std::weak_ptr<hold>>> lost_;  // lost holds, for cleanup
  // Why the last renewal of a hold failed, while it has not renewed since (only holds in trouble).
  std::unordered_map<const hold*, std::pair<std::error_code, std::string>> renew_errors_;
  std::unordered_set<std::shared_ptr<waiter>> waiters_;
  std::unordered_map<std::string, std::unique_ptr<channel_entry>> channels_;
  schedule schedule_;
  asio::steady_timer wd_timer_;
  clock::time_point wd_armed_at_ = clock::time_point::max();
  ms interval_;
  enum class keyspace { unknown, querying, on, off } keyspace_ = keyspace::unknown;
  std::vector<unique_function<void()>> keyspace_waiting_;
  // Acquisitions by an owner of a hold whose unlock is still out (`hold::releasing`): they go out
  // once it is settled (or complete with client_closed at close()).
  std::unordered_map<const hold*, std::vector<unique_function<void()>>> after_release_;
  std::minstd_rand rng_{std::random_device{}()};
  bool closed_ = false;
  enum class probe { unknown, yes, no } allow_oom_ = probe::unknown;
  bool subscribe_refusal_reported_ = false;
  // SUBSCRIBE refused, and when: new waiters on them poll for a minute, then try again.
  std::unordered_map<std::string, clock::time_point> refused_channels_;
  std::deque<std::pair<clock::time_point, std::string>> refused_order_;  // the same, oldest first
  std::string field_scratch_;
  asio::steady_timer linger_timer_;
  bool linger_armed_ = false;
  // One-shot timers (a hold to check again after a failover, an undo to send again), cancelled by
  // close(): a pending wait would hold up the end of the I/O thread, and its handler must not run
  // on an engine that may be gone.
  std::unordered_set<std::shared_ptr<asio::steady_timer>> timers_;
  int first_attempts_out_ = 0;  // acquisitions whose first attempt is on the wire (not yet waiters)
  int undos_out_ = 0;           // undo rounds not answered yet
  card_keeper card_;      // the client's card (client_card.hpp)
  latch_sweeper sweeper_;
  std::string failover_;  // the last failover, and when: a hold found gone soon after it names it
  clock::time_point failover_at_{};
};

}  // namespace redlease::detail
