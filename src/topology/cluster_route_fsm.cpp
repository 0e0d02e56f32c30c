// SPDX-License-Identifier: MIT
#include "topology/cluster_route_fsm.hpp"

#include <algorithm>

#include "redlease/error.hpp"

namespace redlease::detail {

route_answer route_answer::from_reply(const reply& r, const node_address& from) {
  route_answer a;
  a.from = from;
  if (!r.is_error()) return a;
  switch (classify_cluster_error(r.str)) {
    case cluster_error::none:
      return a;  // WRONGTYPE, NOSCRIPT, ...: the caller's reply
    case cluster_error::moved:
    case cluster_error::ask:
      if (auto redirect = parse_cluster_redirect(r.str, from.host)) {
        a.type = redirect->type == cluster_redirect::kind::moved ? kind::moved : kind::ask;
        a.slot = redirect->slot;
        a.node = std::move(redirect->node);
      } else {
        a.type = kind::other_error;
        a.ec = make_error_code(errc::bad_reply);
      }
      return a;
    case cluster_error::tryagain: a.type = kind::tryagain; return a;
    case cluster_error::clusterdown: a.type = kind::clusterdown; return a;
    case cluster_error::loading: a.type = kind::loading; return a;
    case cluster_error::readonly: a.type = kind::readonly; return a;
    case cluster_error::masterdown: a.type = kind::masterdown; return a;
  }
  return a;
}

route_action cluster_route_fsm::fail(std::error_code ec) {
  route_action act;
  act.type = route_action::kind::fail;
  act.ec = ec;
  return act;
}

route_action cluster_route_fsm::backoff(route_action::kind k, const node_address& node, std::error_code why,
                                        clock::time_point now) {
  last_ = why;
  // 10, 20, 40, 80, 160, 200, 200, ... ms (no shift past the cap).
  const auto delay = retries_ >= 5 ? backoff_max : std::min(backoff_first * (1 << retries_), backoff_max);
  // A retry that would start at or past the deadline could not be answered in time.
  if (now + delay >= deadline_) return fail(last_);
  ++retries_;
  route_action act;
  act.type = k;
  act.node = node;
  act.delay = delay;
  return act;
}

route_action cluster_route_fsm::resume(const route_answer& a, clock::time_point now) {
  using k = route_answer::kind;
  switch (a.type) {
    case k::ok:
      return {};
    case k::other_error:
      return fail(a.ec ? a.ec : make_error_code(errc::server_error));
    case k::error_after_write:
      // The request may have run: resending it elsewhere could acquire or release twice. The
      // lock layer re-checks ownership instead (docs/cluster.md, "ambiguous errors").
      return fail(a.ec ? a.ec : make_error_code(errc::connection_lost));
    case k::error_before_write:
      // Nothing was written, so resending is safe; the node may be gone (a failover): refresh.
      return backoff(route_action::kind::refresh_and_retry_after, {},
                     a.ec ? a.ec : make_error_code(errc::connect_failed), now);
    case k::tryagain:
    case k::masterdown:
      return backoff(route_action::kind::retry_after, a.from, make_error_code(errc::server_busy), now);
    case k::loading:
      return backoff(route_action::kind::retry_after, a.from, make_error_code(errc::server_loading), now);
    case k::clusterdown:
      return backoff(route_action::kind::refresh_and_retry_after, {}, make_error_code(errc::server_busy), now);
    case k::readonly:
      return backoff(route_action::kind::refresh_and_retry_after, {}, make_error_code(errc::server_readonly), now);
    case k::moved:
    case k::ask:
      break;
  }
  if (now >= deadline_) return fail(last_ ? last_ : make_error_code(errc::request_timeout));
  if (redirects_ >= max_redirects) return fail(make_error_code(errc::server_error));
  ++redirects_;
  route_action act;
  act.node = a.node;
  if (a.type == k::ask) {
    act.type = route_action::kind::asking_then_send;
    return act;
  }
  act.type = route_action::kind::send_to;
  act.patch_slot = a.slot;
  act.refresh = true;
  if (a.node == a.from) {
    // The node says another node serves the slot, at its own address: a managed service that kept
    // the name through a failover (the name now resolves elsewhere). One reconnect, then it is a
    // loop (Redisson's "MOVED redirection loop detected").
    if (reconnected_) return fail(make_error_code(errc::server_error));
    reconnected_ = true;
    act.reconnect = true;
  }
  return act;
}

refresh_gate::decision refresh_gate::want(clock::time_point now) noexcept {
  decision d;
  if (in_flight_) {
    d.type = decision::kind::in_flight;
    return d;
  }
  if (last_done_ && now < *last_done_ + timing_.min_interval) {
    d.type = decision::kind::at;
    d.when = *last_done_ + timing_.min_interval;
    return d;
  }
  in_flight_ = true;
  d.type = decision::kind::start_now;
  d.when = now;
  return d;
}

void refresh_gate::done(clock::time_point now) noexcept {
  in_flight_ = false;
  last_done_ = now;
}

refresh_gate::clock::time_point refresh_gate::next_due() const noexcept {
  return last_done_ ? *last_done_ + timing_.period : clock::time_point{};
}

}  // namespace redlease::detail
