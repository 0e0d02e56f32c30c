// SPDX-License-Identifier: MIT
#include "multi/redlock_fsm.hpp"

#include <algorithm>

namespace redlease::detail {
namespace {

std::size_t count_of(const std::vector<node_state>& nodes, node_state s) {
  return static_cast<std::size_t>(std::count(nodes.begin(), nodes.end(), s));
}

}  // namespace

redlock_clock::duration redlock_backoff::delay(std::uint32_t retry, double random) const noexcept {
  auto window = std::max(first, redlock_clock::duration(1));
  // Doubling stops at the cap, so a long wait with many retries never overflows the duration, nor
  // does a cap near its maximum.
  for (std::uint32_t i = 0; i < retry && window < cap; ++i) window = window > cap / 2 ? cap : window * 2;
  window = std::min(window, std::max(cap, first));
  if (!(random >= 0.0)) random = 0.0;  // NaN too
  random = std::min(random, 1.0);
  const auto half = window / 2;
  return half + std::chrono::duration_cast<redlock_clock::duration>(half * random);
}

redlock_acquire_fsm::redlock_acquire_fsm(std::size_t nodes, redlock_clock::duration ttl,
                                         redlock_backoff backoff)
    : nodes_(nodes, node_state::pending), ttl_(ttl), backoff_(backoff) {}

std::uint32_t redlock_acquire_fsm::start(redlock_clock::time_point sent) {
  std::fill(nodes_.begin(), nodes_.end(), node_state::pending);
  sent_ = sent;
  held_ = 0;
  against_ = 0;
  decided_ = false;
  return ++attempt_;
}

redlock_acquire_fsm::next redlock_acquire_fsm::resume(std::uint32_t attempt, std::size_t node, node_answer a,
                                                      redlock_clock::time_point now) {
  // An earlier attempt's answer: that attempt was released on every node before this one was sent.
  if (attempt_ == 0 || attempt != attempt_ || node >= nodes_.size()) return next::none;
  auto& s = nodes_[node];
  if (s != node_state::pending) return next::none;
  switch (a) {
    case node_answer::granted:
    case node_answer::ours:  // a leftover of an earlier attempt: SET refused it, yet it is ours
      s = node_state::held;
      ++held_;
      break;
    case node_answer::taken:
      s = node_state::taken;
      ++against_;
      break;
    case node_answer::missing:  // not an answer a SET NX gives: believe nothing of it
    case node_answer::unknown:
      // The key may have been set there: it cannot count for us, and the release must go there too.
      s = node_state::unknown;
      ++against_;
      break;
  }
  // Recorded after the decision too: a late grant still tells where the key is ours.
  if (decided_) return next::none;
  return decide(now);
}

redlock_acquire_fsm::next redlock_acquire_fsm::resume(redlock_clock::time_point now) {
  if (attempt_ == 0 || decided_) return next::none;
  return decide(now);
}

redlock_acquire_fsm::next redlock_acquire_fsm::decide(redlock_clock::time_point now) {
  // Validity first: a quorum granted too late is worth nothing, the keys may already expire.
  if (now >= valid_until()) {
    decided_ = true;
    return next::release_all;
  }
  if (held_ >= quorum()) {
    decided_ = true;
    return next::acquired;
  }
  // Refusals and unknowns are final for this attempt: once they leave too few nodes, stop waiting.
  if (against_ + quorum() > nodes_.size()) {
    decided_ = true;
    return next::release_all;
  }
  return next::wait;
}

redlock_acquire_fsm::retry_decision redlock_acquire_fsm::after_release(redlock_clock::time_point now,
                                                                       redlock_clock::time_point wait_until,
                                                                       double random) {
  if (now >= wait_until) return {};
  auto delay = backoff_.delay(retries_++, random);
  // The last attempt starts when the wait ends rather than not at all.
  if (delay > wait_until - now) delay = wait_until - now;
  return {true, delay};
}

redlock_extend_fsm::redlock_extend_fsm(std::size_t nodes, redlock_clock::duration ttl,
                                       redlock_clock::time_point valid_until, bool retake)
    : nodes_(nodes, node_state::held),
      ttl_(ttl),
      valid_until_(valid_until),
      sent_(valid_until - (ttl - redlock_drift(ttl))),  // the acquisition's send time
      retake_(retake) {}

redlock_extend_fsm::next redlock_extend_fsm::start(redlock_clock::time_point sent) {
  if (loss_) return next::none;
  // Past the validity a majority may have expired and been taken meanwhile: re-taking would then
  // make two holders, so the lease is not revived.
  if (sent >= valid_until_) return lose(redlock_loss::expired);
  std::fill(nodes_.begin(), nodes_.end(), node_state::pending);
  sent_ = sent;
  decided_ = false;
  ++round_;
  return next::wait;
}

redlock_extend_fsm::next redlock_extend_fsm::resume(std::uint64_t round, std::size_t node, node_answer a,
                                                    redlock_clock::time_point now) {
  if (loss_ || round != round_ || round_ == 0 || node >= nodes_.size()) return next::none;
  if (now >= valid_until_) return lose(redlock_loss::expired);
  auto& s = nodes_[node];
  if (s == node_state::retaking) {
    // The re-take's answer: SET NX PX of our value where the key was missing.
    if (a == node_answer::granted || a == node_answer::ours) {
      s = node_state::held;
    } else if (a == node_answer::taken) {
      s = node_state::taken;  // someone took it between our extension and our re-take
    } else {
      s = node_state::unknown;
    }
  } else if (s == node_state::pending) {
    switch (a) {
      case node_answer::granted:
      case node_answer::ours:
        s = node_state::held;
        break;
      case node_answer::missing:
        if (retake_) {
          // Taken again even after the round was decided: the next round needs that node.
          s = node_state::retaking;
          return next::retake;
        }
        s = node_state::missing;
        break;
      case node_answer::taken:
        s = node_state::taken;
        break;
      case node_answer::unknown:
        s = node_state::unknown;
        break;
    }
  } else {
    return next::none;  // a second answer from the same node in one round
  }
  if (decided_) return next::none;
  return decide(now);
}

redlock_extend_fsm::next redlock_extend_fsm::resume(redlock_clock::time_point now) {
  if (loss_) return next::none;
  if (now >= valid_until_) return lose(redlock_loss::expired);
  return decided_ ? next::none : next::wait;
}

redlock_clock::time_point redlock_extend_fsm::due(redlock_clock::time_point now,
                                                  redlock_clock::duration interval) const {
  if (loss_) return redlock_clock::time_point::max();
  // Counted from the last round's send time, failed or not: counted from the last success, a
  // failed round would be due again at once, and again, while the lease lasts.
  auto at = sent_ + interval;
  if (behind_ && now < valid_until_) at = std::min(at, now + (valid_until_ - now) / 2);
  return std::max(at, now);
}

std::size_t redlock_extend_fsm::count(node_state s) const { return count_of(nodes_, s); }

redlock_extend_fsm::next redlock_extend_fsm::decide(redlock_clock::time_point now) {
  const auto q = redlock_quorum(nodes_.size());
  if (now >= valid_until_) return lose(redlock_loss::expired);
  if (count(node_state::held) >= q) {
    decided_ = true;
    behind_ = false;
    ++extensions_;
    // The round's keys were set at `sent_` at the earliest, so its validity counts from there.
    valid_until_ = std::max(valid_until_, redlock_valid_until(sent_, ttl_));
    return next::extended;
  }
  const auto taken = count(node_state::taken);
  const auto missing = count(node_state::missing);
  if (taken + missing + q > nodes_.size()) {
    // Lost for good on too many nodes: no later round can bring a majority back without a window
    // in which another client may have held one.
    if (taken >= q) return lose(redlock_loss::taken);
    if (missing >= q) return lose(redlock_loss::deleted);
    return lose(redlock_loss::quorum);
  }
  if (count(node_state::held) + count(node_state::pending) + count(node_state::retaking) < q) {
    // Unknowns only stand in the way: the lease stays valid until its deadline, and the next round
    // may still find the keys there.
    decided_ = true;
    behind_ = true;
    return next::not_extended;
  }
  return next::wait;
}

redlock_extend_fsm::next redlock_extend_fsm::lose(redlock_loss why) {
  decided_ = true;
  loss_ = why;
  return next::lost;
}

redlock_release_fsm::next redlock_release_fsm::resume(std::size_t node, node_answer a) {
  if (node < nodes_.size() && nodes_[node] == node_state::pending) {
    switch (a) {
      case node_answer::granted:
        nodes_[node] = node_state::released;
        break;
      case node_answer::missing:
        nodes_[node] = node_state::missing;
        break;
      case node_answer::taken:
        nodes_[node] = node_state::taken;
        break;
      case node_answer::ours:  // not an answer a compare-and-delete gives
      case node_answer::unknown:
        nodes_[node] = node_state::unknown;
        break;
    }
    ++answered_;
  }
  return answered_ == nodes_.size() ? next::done : next::wait;
}

redlock_release_fsm::result redlock_release_fsm::outcome() const {
  const auto q = redlock_quorum(nodes_.size());
  const auto n = [&](node_state s) { return count_of(nodes_, s); };
  if (n(node_state::released) >= q) return result::released;
  if (n(node_state::missing) + n(node_state::taken) >= q) return result::not_held;
  return result::unknown;
}

}  // namespace redlease::detail
