// SPDX-License-Identifier: MIT
// Release with its retries and latch, forced unlock, and the hold count read.
#include "lock/lock_service_state.hpp"
#include "lock/release_fsm.hpp"

namespace redlease::detail {

// ---- release -----------------------------------------------------------------------------------

namespace {

// Redis 6 has no script flags: it reads the shebang line as Lua and fails to compile it.
bool shebang_refused(const reply& r) {
  return r.is_error() && r.str.find("Error compiling script") != std::string::npos &&
         r.str.find("'#'") != std::string::npos;
}

}  // namespace

void lock_service::exec_release(std::string_view key, const lock_protocol& proto, arg_list a, reply_handler h) {
  // A release too few replicas acknowledged did run on the master: it stands (there is nothing to
  // roll back to), and the caller is told it worked.
  reply_handler done = [h = std::move(h)](std::error_code ec, reply r) mutable {
    h(ec == errc::not_replicated ? std::error_code{} : ec, std::move(r));
  };
  const lua_script* flagged = proto.release_script(true);
  if (allow_oom_ == probe::no || flagged == nullptr)
    return c_.exec_script_acked(key, *proto.release_script(false), std::move(a), std::move(done));
  // The first release probes the flag (no extra round trip): a server that cannot compile it gets
  // the plain script, and so does every later release of this client.
  // The probe keeps the arguments and the key (a new request, routed again, carries the fallback).
  std::optional<std::pair<arg_list, std::string>> copy;
  if (allow_oom_ == probe::unknown) copy.emplace(a, std::string(key));
  c_.exec_script_acked(key, *flagged, std::move(a),
                       [this, &proto, copy = std::move(copy), h = std::move(done)](std::error_code ec,
                                                                                   reply r) mutable {
                        if (copy && shebang_refused(r)) {
                          allow_oom_ = probe::no;
                          return c_.exec_script_acked(copy->second, *proto.release_script(false),
                                                      std::move(copy->first), std::move(h));
                        }
                        if (copy && !ec) allow_oom_ = probe::yes;
                        h(ec, std::move(r));
                      });
}

void lock_service::release(std::string name, lock_kind kind, owner_id owner, void_handler done) {
  if (closed_) return done(errc::client_closed);
  if (name.empty()) return done(errc::invalid_argument);
  const auto& proto = protocol_of(kind);
  std::shared_ptr<hold> h;
  if (auto it = holds_.find(key{name, owner, kind}); it != holds_.end()) h = *it;
  // Without the hold's token there is nothing this owner could release.
  if (!h && proto.release_needs_hold()) return done(errc::not_owner);
  long long expected = h ? static_cast<long long>(h->levels.size()) : 0;
  // An earlier unlock of this hold may have run without our knowing (its reply timed out): this one
  // continues it, in retry mode and under its request id, so the script does not take the same
  // level twice.
  int attempt_no = h && h->release_in_doubt ? 1 : 0;
  const bool go_on = attempt_no > 0 && h->in_doubt;
  std::string request = go_on ? h->in_doubt->request : random_token();
  const auto first_sent = go_on ? h->in_doubt->first_sent : clock::time_point{};
  if (h) ++h->releasing;
  release_hold(std::move(h), std::move(name), proto, owner, attempt_no, expected, std::move(request), first_sent,
               std::move(done));
}

// Drops one level of a hold whose lock is gone (marking it lost for `why` if nothing did yet); the
// hold goes with its last level, so every unlock of a lost reentrant hold reports lock_lost, not
// just the first.
void lock_service::drop_lost_level(hold& h, std::optional<lost_reason> why) {
  if (!h.lost && why) mark_lost(h, *why);
  if (!h.levels.empty()) h.levels.pop_back();
  if (h.levels.empty()) erase(&h);
}

// `first_sent`: when the first attempt of this release went out (empty: this one is the first). A
// retry that finds the release done does not set the TTL again: it counts from an earlier attempt.
void lock_service::release_hold(std::shared_ptr<hold> h, std::string name, const lock_protocol& proto, owner_id owner,
                                int attempt_no, long long expected, std::string request,
                                clock::time_point first_sent, void_handler done) {
  // The lease the remaining holds keep if this is not the last one.
  ms lease = c_.cfg().watchdog_timeout;
  if (h && h->levels.size() > 1) lease = lease_of_levels(h->levels, h->levels.size() - 1, lease);
  release_request q;
  q.name = name;
  q.field = scratch_field(owner);
  if (h) q.id = h->token;
  q.request = request;
  q.remaining_lease = lease;
  q.expected = expected;
  q.retry = attempt_no > 0;
  q.latch_ttl = latch_ttl();
  q.publish = c_.topo().publish_command();
  arg_list a;
  proto.encode_release(a, q);
  // The request's key must not view `name`, which the handler below takes: the hold's name (the
  // same), or a copy when there is no hold.
  const std::string spare = h ? std::string() : name;
  const std::string_view key = h ? std::string_view(h->name) : std::string_view(spare);
  // Only a release that leaves levels moves the hold's deadline: the last level's (the common
  // unlock) reads no clock.
  const bool leaves_levels = h && h->levels.size() > 1 && proto.release_sets_remaining_lease();
  const auto sent = first_sent != clock::time_point{} || !leaves_levels ? first_sent : clock::now();
  exec_release(
      key, proto, std::move(a),
      [this, h, name = std::move(name), &proto, owner, fsm = release_fsm(attempt_no, expected),
       request = std::move(request), done = std::move(done), sent, lease](std::error_code ec, reply r) mutable {
        // No keep_client here: this runs on every unlock, and mark_lost, the one call below that
        // reaches user code (on_lost, stop callbacks), keeps the client itself and defers its
        // destruction past this handler.
        release_facts now;
        now.has_hold = h != nullptr;
        now.removed = h && h->removed;
        now.lost = h && h->lost;
        now.closed = closed_;
        switch (fsm.resume(ec, now)) {
          case release_fsm::next::send_again:
            // The script may or may not have run: sent again in retry mode, expecting the same count.
            return release_hold(std::move(h), std::move(name), proto, owner, fsm.attempt(), fsm.expected(),
                                std::move(request), sent, std::move(done));
          case release_fsm::next::ask_type: {
            // WRONGTYPE from the lock's key (replaced by another type: the hold is gone, and the local
            // hold would refuse every acquisition), or from another key the script reads first (a
            // fair queue of another type: the hold stands). The key's type tells. The unlock stays
            // out until then (re-entries stay parked).
            std::string cmd;
            encode_command(cmd, {"TYPE", name});
            return c_.exec(name, std::move(cmd),
                           [this, h, &proto, fsm, words = error_text_slot(), done = std::move(done)](
                               std::error_code e, reply t) mutable {
                             const auto f = settle_release(*h);
                             const std::string_view type = !e && t.is_string() ? std::string_view(t.str) : "";
                             const auto o = fsm.settle_type(f, e, type, proto.key_type());
                             apply_release(h.get(), o, f, {}, {});
                             if (h->releasing == 0) send_after_release(*h);
                             scoped_error_text scope(std::move(words));  // after on_lost, which may set its own
                             done(o.result);
                           },
                           true);
          }
          case release_fsm::next::settle:
            break;
        }
        // A renewal that found the lock gone while this unlock was out waited for its verdict: on
        // another connection (the lane) the unlock can run first, and then "gone" means released.
        release_facts f;
        if (h) {
          f = settle_release(*h);
          if (h->releasing == 0) send_after_release(*h);
        }
        f.closed = closed_;
        f.not_held_reason = proto.not_held_reason();
        f.sets_remaining_lease = proto.release_sets_remaining_lease() && sent != clock::time_point{};
        const auto o = fsm.settle(f, ec, ec ? release_result::bad : proto.decode_release(r));
        if (o.set_in_doubt && h) h->in_doubt = std::make_unique<hold::doubt>(hold::doubt{request, sent});
        apply_release(h.get(), o, f, sent, lease);
        done(o.result);
      });
}

// The facts a release settles on, once its reply (or its TYPE check's) came: this unlock is no
// longer out, and a renewal's "gone" meanwhile is taken.
release_facts lock_service::settle_release(hold& h) {
  --h.releasing;
  release_facts f;
  f.has_hold = true;
  f.removed = h.removed;
  f.lost = h.lost;
  f.levels = h.levels.size();
  f.closed = closed_;
  f.seen = std::exchange(h.loss_seen, std::nullopt);
  return f;
}

// Does what release_fsm decided, in its order. `sent`/`lease`: the deadline of the levels left.
void lock_service::apply_release(hold* h, const release_outcome& o, const release_facts& f, clock::time_point sent,
                                 ms lease) {
  if (h == nullptr) return;
  if (o.set_in_doubt) h->release_in_doubt = true;
  if (o.clear_in_doubt) {
    h->release_in_doubt = false;
    h->in_doubt.reset();
  }
  switch (o.change) {
    case release_outcome::level::none: break;
    case release_outcome::level::drop_lost: drop_lost_level(*h, o.drop_reason); break;
    case release_outcome::level::erase: erase(h); break;
    case release_outcome::level::pop: h->levels.pop_back(); break;
  }
  if (o.mark_lost && !h->lost && !h->removed) mark_lost(*h, *o.mark_lost);
  if (o.set_deadline) {
    // The key's TTL now counts from this release, with the lease of the levels left: the deadline
    // of the level given back (longer or shorter) no longer applies.
    std::lock_guard<std::mutex> g(view_mu_);
    h->valid_until = sent + lease;
  }
  if (o.report_seen && f.seen && !h->lost && !h->removed && !closed_) mark_lost(*h, *f.seen);
  if (o.reschedule && !h->lost) reschedule(*h);
}

// Posted: they run once this reply's handler has settled the hold (erased it, or taken its level).
void lock_service::send_after_release(const hold& h) {
  auto it = after_release_.find(&h);
  if (it == after_release_.end()) return;
  auto parked = std::move(it->second);
  after_release_.erase(it);
  asio::post(c_.executor(), [life = c_.life(), parked = std::move(parked)]() mutable {
    keep_client keep(life);
    if (!keep) return;
    for (auto& f : parked) f();  // after close(), each completes with client_closed
  });
}

void lock_service::force_unlock(std::string name, lock_kind kind, bool_handler done) {
  if (closed_) return done(errc::client_closed, false);
  if (name.empty()) return done(errc::invalid_argument, false);
  const auto& proto = protocol_of(kind);
  arg_list a;
  proto.encode_force_unlock(a, name, c_.topo().publish_command());
  c_.exec_script(name, proto.force_unlock_script(), std::move(a),
                 [this, name, done = std::move(done)](std::error_code ec, reply r) mutable {
                   if (ec) return done(ec, false);
                   if (!r.is_integer()) return done(errc::bad_reply, false);
                   keep_client keep(c_);  // on_lost runs below
                   // Holds of this client on the name are gone too: tell their owners.
                   std::vector<std::shared_ptr<hold>> mine;
                   for (auto& h : holds_)
                     if (h->name == name && !h->lost) mine.push_back(h);
                   for (auto& h : mine) mark_lost(*h, lost_reason::deleted);
                   done({}, r.integer == 1);
                 });
}

void lock_service::hold_count(std::string name, lock_kind kind, owner_id owner, int_handler done) {
  if (closed_) return done(errc::client_closed, 0);
  if (name.empty()) return done(errc::invalid_argument, 0);
  const auto& proto = protocol_of(kind);
  hold* h = find(name, owner, kind);
  std::string token = h ? h->token : std::string{};
  std::string cmd;
  proto.encode_hold_count(cmd, name, scratch_field(owner), token);
  c_.exec(name, std::move(cmd), [&proto, token = std::move(token), done = std::move(done)](std::error_code ec, reply r) mutable {
    if (ec) return done(ec, 0);
    auto n = proto.decode_hold_count(r, token);
    if (!n) return done(errc::bad_reply, 0);
    done({}, *n);
  }, true);
}


}  // namespace redlease::detail
