// SPDX-License-Identifier: MIT
// The decisions of a RedLock over N independent masters, sans-io, in the style of release_fsm and of
// boost.redis's `*_fsm`: the engine sends to every node, feeds each node's answer to `resume`, and
// does what the returned action says. Nothing here sends, reads a clock or draws a random number:
// times come in as steady_clock time points, the random part of a retry delay as a number in [0, 1).
//
// Three machines, one per operation: an acquisition (its attempts and the retries between them), the
// extension rounds of the watchdog that keeps the quorum, and a release. docs/redlock.md describes
// the composition above them (one client per master, the per-node layout, the CLI).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace redlease::detail {

/// The clock every time point of a RedLock is taken on.
using redlock_clock = std::chrono::steady_clock;

/// The end of a caller's wait from now; a wait of a century or more has none (`time_point::max()`).
/// The blocking and async calls of the compositions above the engine (RedLock, MultiLock) share it.
inline redlock_clock::time_point wait_end(std::chrono::milliseconds wait) {
  auto now = redlock_clock::now();
  return wait > std::chrono::hours(24 * 365 * 100) ? redlock_clock::time_point::max() : now + wait;
}

/// What one node answered to one request of a RedLock. Each request reads only some of them.
enum class node_answer {
  /// acquire, re-take: SET NX set our value; extend: our value's TTL was set; release: our value
  /// was deleted
  granted,
  /// acquire, re-take: the key already held our own value (a leftover of an earlier attempt); the
  /// node's script set its TTL again
  ours,
  missing,  ///< extend, release: there was no key there (restarted empty, evicted, expired)
  taken,    ///< the key holds another value: another client's
  unknown,  ///< an error or a timeout: the request may have run, or not
};

/// Where a node stands for the operation under way.
enum class node_state {
  pending,   ///< no answer yet
  held,      ///< our value is there with the operation's TTL (granted, ours, extended, re-taken)
  retaking,  ///< extension: the key was missing there; a SET NX of our value is on its way
  taken,     ///< another value is there
  missing,   ///< no key there (extension without re-take, release)
  unknown,   ///< the outcome is not known: the key may be ours or not
  released,  ///< release: our value was deleted there
};

/// Why a held RedLock was lost (the engine maps it to the public `lost_reason`).
enum class redlock_loss {
  taken,    ///< a majority of the nodes hold another value
  deleted,  ///< a majority of the nodes have no key and re-taking is off
  expired,  ///< the validity ran out before a majority extended the lease
  quorum,   ///< a majority is lost, partly taken and partly deleted
};

/// How many nodes make a majority of `nodes`: N/2 + 1.
constexpr std::size_t redlock_quorum(std::size_t nodes) noexcept { return nodes / 2 + 1; }

/// The allowance for the clocks of the nodes running at other rates than ours: 1 % of the TTL plus
/// 2 ms (the spec's, node-redlock's and rslock's).
constexpr redlock_clock::duration redlock_drift(redlock_clock::duration ttl) noexcept {
  return ttl / 100 + std::chrono::milliseconds(2);
}

/// Until when keys set with TTL `ttl` by requests sent at `sent` are surely ours on a node that
/// granted them: sent + ttl − drift. The validity at `now` is this minus `now`; an attempt whose
/// validity is ≤ 0 never succeeds.
constexpr redlock_clock::time_point redlock_valid_until(redlock_clock::time_point sent,
                                                        redlock_clock::duration ttl) noexcept {
  return sent + ttl - redlock_drift(ttl);
}

/// The retry schedule of an acquisition: a window that doubles from `first` up to `cap`; each
/// delay is drawn uniformly from the window's upper half, so contenders that failed together do
/// not retry together (no livelock) and none waits less than half the window.
struct redlock_backoff {
  redlock_clock::duration first = std::chrono::milliseconds(50);  ///< the first window
  redlock_clock::duration cap = std::chrono::milliseconds(400);   ///< the largest window

  /// The delay before retry number `retry` (0 for the first), `random` in [0, 1) (clamped).
  redlock_clock::duration delay(std::uint32_t retry, double random) const noexcept;
};

/// An acquisition of a RedLock: attempts over every node, each decided as early as possible, with
/// a release on every node and a delayed retry after each failed one.
///
/// The engine calls `start(sent)` and sends `SET key value NX PX ttl` to every node in parallel with
/// a per-node timeout far below the TTL; feeds each answer to `resume` with the attempt number
/// `start` returned (answers of an earlier attempt are dropped: its release was sent before this
/// attempt on each node's connection, and a key of ours it left is counted as ours by this one); and
/// calls `resume(now)` at `decide_by()`, in case not enough answers came by then. One value is used
/// for every attempt of one acquisition, so that leftovers count as ours.
class redlock_acquire_fsm {
 public:
  /// `nodes` ≥ 1 masters; keys set with TTL `ttl`; retries spaced by `backoff`.
  redlock_acquire_fsm(std::size_t nodes, redlock_clock::duration ttl, redlock_backoff backoff = {});

  /// What the engine does next.
  enum class next {
    wait,         ///< undecided: feed the next answer, or `resume(now)` at `decide_by()`
    acquired,     ///< a majority granted within the validity: held until `valid_until()`
    release_all,  ///< the attempt failed: release on every node, answered or not, then `after_release`
    none,         ///< nothing to do: an answer after the decision (recorded) or of an earlier attempt
  };

  /// What to do once a failed attempt's releases were sent.
  struct retry_decision {
    bool again = false;                   ///< start another attempt after `delay`; otherwise give up
    redlock_clock::duration delay{};      ///< how long to wait before it
  };

  /// Starts an attempt whose requests are sent at `sent`; returns its number (1 for the first).
  std::uint32_t start(redlock_clock::time_point sent);
  /// Node `node`'s answer `a` to attempt `attempt`, received at `now`.
  next resume(std::uint32_t attempt, std::size_t node, node_answer a, redlock_clock::time_point now);
  /// Time passed: the attempt fails if still undecided once its validity ran out.
  next resume(redlock_clock::time_point now);
  /// After a failed attempt's releases were sent at `now`: retry if an attempt started after the
  /// delay (`random` its random part, in [0, 1)) still starts before `wait_until`; the delay is cut
  /// to fit the wait. `wait_until` ≤ `now` (a try without wait) gives up.
  retry_decision after_release(redlock_clock::time_point now, redlock_clock::time_point wait_until,
                               double random);

  /// The current attempt's number (0 before the first).
  std::uint32_t attempt() const noexcept { return attempt_; }
  /// The latest time the current attempt can succeed; once acquired, until when the lock is ours.
  redlock_clock::time_point valid_until() const noexcept { return redlock_valid_until(sent_, ttl_); }
  /// When to call `resume(now)` if the attempt is still undecided.
  redlock_clock::time_point decide_by() const noexcept { return valid_until(); }
  /// Where node `node` stands in the current attempt.
  node_state state(std::size_t node) const { return nodes_.at(node); }
  /// How many nodes hold our value in the current attempt.
  std::size_t held() const noexcept { return held_; }
  /// How many nodes make a majority.
  std::size_t quorum() const noexcept { return redlock_quorum(nodes_.size()); }

 private:
  next decide(redlock_clock::time_point now);

  std::vector<node_state> nodes_;  // in the current attempt
  redlock_clock::duration ttl_;
  redlock_backoff backoff_;
  redlock_clock::time_point sent_{};  // the current attempt's send time
  std::uint32_t attempt_ = 0;
  std::uint32_t retries_ = 0;  // delays handed out so far: the backoff's step
  std::size_t held_ = 0;
  std::size_t against_ = 0;  // refused or unknown: cannot count for this attempt
  bool decided_ = false;
};

/// The watchdog of a held RedLock: extension rounds that keep a majority of the nodes.
///
/// Each round (`start(sent)`) extends the key on every node (compare-and-pexpire with our value).
/// A node that answers `missing` (restarted empty, evicted) is taken again with our value
/// (`next::retake`, a SET NX PX), so that the quorum does not erode; a node held by another value is
/// lost there; an error leaves it unknown. The lease moves to the round's validity only once a
/// majority holds it (extended or re-taken) before the current validity ran out. The RedLock is
/// lost when a majority is lost for good (taken, or missing with re-taking off) or when the validity
/// runs out first; afterwards every call returns `none`. Rounds are not counted against any cap.
class redlock_extend_fsm {
 public:
  /// `nodes` masters, TTL `ttl`, held until `valid_until` (the acquisition's); `retake`: take a
  /// missing key again (off: a missing key is lost there, as in redsync without WithSetNXOnExtend).
  redlock_extend_fsm(std::size_t nodes, redlock_clock::duration ttl,
                     redlock_clock::time_point valid_until, bool retake = true);

  /// What the engine does next.
  enum class next {
    wait,          ///< undecided: feed the next answer, or `resume(now)` at `valid_until()`
    retake,        ///< the node answered `missing`: SET NX PX our value there; feed its answer to `resume`
    extended,      ///< a majority holds the key: `valid_until()` moved to this round's validity
    not_extended,  ///< no majority this round (errors, timeouts): the lease stands until `valid_until()`
    lost,          ///< the RedLock is lost (`loss()` says why): tell the holder, release on every node
    none,          ///< nothing to do (an answer after the round's decision, or after the loss)
  };

  /// Starts a round whose requests are sent at `sent`; `lost` (expired) if the validity already ran
  /// out, else `wait`. The round's number is then `round()`.
  next start(redlock_clock::time_point sent);
  /// Node `node`'s answer `a` in round `round` (to the extension, or to its re-take), at `now`.
  next resume(std::uint64_t round, std::size_t node, node_answer a, redlock_clock::time_point now);
  /// Time passed: `lost` (expired) once the validity ran out, else `none` (or `wait` mid-round).
  next resume(redlock_clock::time_point now);

  /// When the next round is due, rounds `interval` apart (a third of the TTL): `interval` after the
  /// last round's send time (the acquisition's before the first); after a round that did not extend
  /// the lease, no later than halfway from `now` to `valid_until()`, so that another chance comes
  /// before the lease ends. Never before `now`; `time_point::max()` once lost.
  redlock_clock::time_point due(redlock_clock::time_point now, redlock_clock::duration interval) const;
  /// The current round's number (0 before the first).
  std::uint64_t round() const noexcept { return round_; }
  /// Until when the lock is surely ours: the last validity a majority gave.
  redlock_clock::time_point valid_until() const noexcept { return valid_until_; }
  /// Why it was lost, once lost.
  std::optional<redlock_loss> loss() const noexcept { return loss_; }
  /// How many rounds extended the lease.
  std::uint64_t extensions() const noexcept { return extensions_; }
  /// Where node `node` stands in the current round.
  node_state state(std::size_t node) const { return nodes_.at(node); }

 private:
  next decide(redlock_clock::time_point now);
  next lose(redlock_loss why);
  std::size_t count(node_state s) const;

  std::vector<node_state> nodes_;  // in the current round
  redlock_clock::duration ttl_;
  redlock_clock::time_point valid_until_;
  redlock_clock::time_point sent_;  // the last round's send time (the acquisition's before it)
  bool retake_;
  std::uint64_t round_ = 0;
  std::uint64_t extensions_ = 0;
  bool decided_ = true;  // no round under way
  bool behind_ = false;  // the last decided round did not extend the lease
  std::optional<redlock_loss> loss_;
};

/// A release: compare-and-delete of our value on every node, those that never answered included.
class redlock_release_fsm {
 public:
  /// A release over `nodes` masters, sent to every one of them.
  explicit redlock_release_fsm(std::size_t nodes) : nodes_(nodes, node_state::pending) {}

  /// What the engine does next.
  enum class next {
    wait,  ///< answers are still to come
    done,  ///< every node answered: read `outcome()` and `state(node)`
  };
  /// What the release found, once every node answered.
  enum class result {
    released,  ///< a majority deleted our value: the lock was ours until released
    not_held,  ///< a majority had no value of ours (missing or taken): it was lost before
    unknown,   ///< neither: too many errors or timeouts to tell
  };

  /// Node `node`'s answer `a` (`granted`: our value deleted; `missing`, `taken`: not ours there).
  next resume(std::size_t node, node_answer a);
  /// The release's result as far as the answers so far tell (final once `done`).
  result outcome() const;
  /// What node `node` said.
  node_state state(std::size_t node) const { return nodes_.at(node); }

 private:
  std::vector<node_state> nodes_;
  std::size_t answered_ = 0;  // nodes that answered (once each)
};

}  // namespace redlease::detail
