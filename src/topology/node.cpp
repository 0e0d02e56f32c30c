// SPDX-License-Identifier: MIT
#include "topology/node.hpp"

#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "background.hpp"
#include "runtime/io_guard.hpp"
#include "redlease/error.hpp"

namespace redlease::detail {
namespace {

std::string script_payload(const lua_script& s, const arg_list& args, bool full) {
  std::string out;
  out.reserve(args.buf.size() + (full ? s.body.size() : s.sha1.size()) + 32);
  encode_header(out, args.count + 2);
  encode_arg(out, full ? std::string_view("EVAL") : std::string_view("EVALSHA"));
  encode_arg(out, full ? s.body : s.sha1);
  out.append(args.buf);
  return out;
}

bool noscript(const reply& r) { return r.is_error() && r.str.compare(0, 8, "NOSCRIPT") == 0; }

// Completes `h` with the reply, an error reply mapped to its code and its words kept current.
void complete(reply_handler& h, std::error_code ec, reply r) {
  if (!r.is_error()) return h(ec, std::move(r));
  if (!ec) ec = error_from_reply_text(r.str);
  scoped_error_text scope(std::string(without_script_location(r.str)));
  h(ec, std::move(r));
}

}  // namespace

node::node(asio::any_io_executor ex, const config& cfg, std::string name_suffix, io_guard* guard)
    : ex_(ex), name_suffix_(name_suffix), conn_(std::make_shared<connection>(ex, cfg, std::move(name_suffix))),
      cfg_(&conn_->cfg()), guard_(guard) {}

void node::close() {
  closed_ = true;
  if (auto c = std::exchange(lane_conn_, nullptr)) c->close();
  drop_lane();
  conn_->close();
}

void node::submit(request r) {
  if (auto* l = lane_for_call()) {
    if (l->send(r)) return;
    // The lane broke before a byte of the request was written: it goes the usual way.
  }
  conn_->submit_here(std::move(r));
}

lane* node::lane_for_call() {
  // Only the guard's holder reads its call_lanes; a direct caller holds it (io_guard::direct).
  if (!guard_ || io_guard::held() != guard_ || !io_guard::direct() || !cfg_->sync_lane || closed_) return nullptr;
  auto* s = guard_->call_lanes();
  if (!s) return nullptr;
  if (s->held()) return s->held() == lane_ && lane_->usable() ? lane_.get() : nullptr;
  // Requests this thread made before (asynchronous ones) may still be queued or in flight on the
  // connection: the call's request must not overtake them on another socket.
  if (!conn_->is_up() || !conn_->idle()) return nullptr;
  auto generation = conn_->stats().connects.load(std::memory_order_relaxed);
  if (lane_ && (lane_->broken() || lane_->generation() != generation)) drop_lane();
  if (!lane_) {
    open_lane();
    return nullptr;
  }
  if (!lane_->take()) return nullptr;
  if (!lane_->usable()) {
    lane_->give_back();
    drop_lane();
    open_lane();
    return nullptr;
  }
  s->hold(lane_);
  return lane_.get();
}

void node::drop_lane() {
  if (auto l = std::exchange(lane_, nullptr)) l->interrupt();
}

// The lane's connection does the handshake the node's connection did (same address, same
// credentials, the same ROLE check), then hands its socket over.
void node::open_lane() {
  if (lane_conn_ || closed_ || conn_->is_tls() || clock::now() < lane_retry_at_) return;
  auto c = std::make_shared<connection>(ex_, *cfg_, name_suffix_ + ":lane");
  auto generation = conn_->stats().connects.load(std::memory_order_relaxed);
  std::weak_ptr<bool> alive = alive_;
  std::weak_ptr<connection> weak = c;
  auto later = [this, alive, weak, generation](bool up) {
    // Posted: the connection is inside its own handler when it calls back.
    asio::post(ex_, [this, alive, weak, generation, up] {
      auto c = weak.lock();
      if (alive.expired() || !c || c != lane_conn_) return;
      if (up) return adopt_lane(c, generation);
      // No lane for a while (maxclients, an ACL, a server going down): calls go the usual way.
      lane_conn_.reset();
      c->close();
      lane_retry_at_ = clock::now() + std::max<clock::duration>(cfg_->reconnect_max_delay, std::chrono::seconds(1));
    });
  };
  c->set_callbacks({[later] { later(true); }, [later] { later(false); }, {}, {}});
  if (conn_->requires_master()) c->require_master();
  c->share_role_report(*conn_);
  if (auto a = conn_->address(); !a.host.empty()) {
    c->set_resolver([a](connection::callbacks::resolved done) { done({}, {}, a); });
  }
  lane_conn_ = c;
  c->start();
}

void node::adopt_lane(const std::shared_ptr<connection>& c, std::uint64_t generation) {
  lane_conn_.reset();
  int fd = generation == conn_->stats().connects.load(std::memory_order_relaxed) ? c->release_socket() : -1;
  c->close();
  if (fd < 0) return;
  drop_lane();
  std::weak_ptr<bool> alive = alive_;
  lane_ = std::make_shared<lane>(fd, *cfg_, generation, conn_, [this, alive](std::shared_ptr<lane> l) {
    if (!alive.expired()) park_lane(std::move(l));
  }, lane_counters_);
}

struct node::parked {
  parked(asio::any_io_executor ex, std::shared_ptr<lane> ln) : l(std::move(ln)), d(ex), t(std::move(ex)) {}
  std::shared_ptr<lane> l;
  asio::posix::stream_descriptor d;
  asio::steady_timer t;
  std::uint64_t turn = 0;  // a wait of an earlier turn finds it changed and does nothing
};

void node::park_lane(std::shared_ptr<lane> l) {
  ++parked_lanes_;
  auto p = std::make_shared<parked>(ex_, l);
  std::error_code ec;
  p->d.assign(l->fd(), ec);
  if (ec || closed_) {
    // No reactor for it: the lane ends, and what it carried fails as on a dropped connection.
    l->interrupt();
  }
  serve_parked(p);
}

void node::serve_parked(const std::shared_ptr<parked>& p) {
  std::vector<lane_completion> done;
  p->l->collect(done);
  run_completions(done, conn_, closed_, closed_, *cfg_);
  ++p->turn;
  if (!p->l->pending() || !p->d.is_open()) {
    if (p->d.is_open()) p->d.release();  // out of the reactor; the lane keeps the descriptor
    p->t.cancel();
    p->l->give_back();
    --parked_lanes_;
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  auto again = [this, alive, p, turn = p->turn](std::error_code ec) {
    if (ec == asio::error::operation_aborted || alive.expired() || turn != p->turn) return;
    serve_parked(p);
  };
  std::error_code ignored;
  p->d.cancel(ignored);  // the wait that did not fire (its turn is over)
  p->t.expires_at(p->l->next_check());
  p->t.async_wait(again);
  p->d.async_wait(asio::posix::stream_descriptor::wait_read, again);
}

void node::exec(std::string payload, reply_handler h, bool idempotent) {
  submit(request{std::move(payload),
                             [h = std::move(h)](std::error_code ec, reply r) mutable { complete(h, ec, std::move(r)); },
                             idempotent});
}

std::string eval_payload(const lua_script& s, const arg_list& args) { return script_payload(s, args, true); }

void node::exec_asking(std::string payload, reply_handler h, bool idempotent) {
  std::string asking;
  encode_command(asking, {"ASKING"});
  conn_->submit_here(request{std::move(asking), [](std::error_code, reply) {}});
  conn_->submit_here(request{std::move(payload),
                             [h = std::move(h)](std::error_code ec, reply r) mutable { complete(h, ec, std::move(r)); },
                             idempotent});
}

void node::exec_script(const lua_script& s, arg_list args, reply_handler h, bool idempotent, bool always_eval) {
  if (always_eval) return exec(script_payload(s, args, true), std::move(h), idempotent);
  auto payload = script_payload(s, args, false);
  submit(request{
      std::move(payload),
      [this, &s, args = std::move(args), h = std::move(h), idempotent](std::error_code ec, reply r) mutable {
        // This node forgot the script (restart, failover: scripts are not replicated, SCRIPT
        // FLUSH): EVAL runs and caches it.
        if (!ec && noscript(r)) {
          noscript_fallbacks_.fetch_add(1, std::memory_order_relaxed);
          return exec(script_payload(s, args, true), std::move(h), idempotent);
        }
        complete(h, ec, std::move(r));
      },
      idempotent});
}

int node::replicas_wanted() const {
  if (wait_ == probe::no) return 0;
  int n = cfg_->replica_ack.replicas;
  if (n >= 0) return n;
  // Unable to see the replicas, assume the Sentinel-managed master has one, as it normally does:
  // a grant no replica has is what acknowledgement is there to refuse.
  return auto_ack_ && (replicas_ > 0 || role_refused_) ? 1 : 0;
}

void node::refresh_replicas() {
  // A refused ROLE stays refused until the ACL changes; the next handshake asks again.
  if (!auto_ack_ || cfg_->replica_ack.replicas >= 0 || wait_ == probe::no || closed_ || !conn_->is_up() ||
      role_refused_)
    return;
  std::string cmd;
  encode_command(cmd, {"ROLE"});
  exec(std::move(cmd), [this](std::error_code ec, reply r) {
    if (!ec) {
      role_refused_ = false;
      // A demoted master answers "slave": the topology's own checks move the connection on.
      if (int n = role_master_replicas(r); n >= 0) replicas_ = n;
    } else if (r.is_error() && role_refusal(r.str)) {
      role_refused_ = true;  // (a passing refusal, BUSY or LOADING, keeps the last count)
    }
  }, true);
}

void node::on_up() {
  replicas_ = conn_->replicas_at_handshake();
  role_refused_ = conn_->role_refused();
  int n = cfg_->replica_ack.replicas;
  if (wait_ != probe::unknown || n == 0 || (n < 0 && !auto_ack_)) return;
  // Managed proxies refuse WAIT: find out once, before it matters, in the same write as whatever is
  // queued (no round trip of its own).
  std::string cmd;
  encode_command(cmd, {"WAIT", "0", "0"});
  exec(std::move(cmd), [this](std::error_code ec, reply r) {
    if (!ec) {
      wait_ = probe::yes;
      return;
    }
    if (ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::client_closed) return;
    wait_ = probe::no;
    report_background(*cfg_, "replica acknowledgement", ec,
                      "the server refuses WAIT (" + r.str + "): locks go on without replica acknowledgement");
  });
}

void node::exec_script_acked(const lua_script& s, arg_list args, reply_handler h, bool idempotent,
                             bool always_eval) {
  int n = replicas_wanted();
  if (n <= 0) return exec_script(s, std::move(args), std::move(h), idempotent, always_eval);
  send_acked(s, std::move(args), std::move(h), idempotent, always_eval, n);
}

// The script and its WAIT go out back to back on one connection, so WAIT covers this very write.
// The script's reply waits for WAIT's; on NOSCRIPT the pair is sent again with EVAL (WAIT's answer
// to the failed EVALSHA is ignored).
void node::send_acked(const lua_script& s, arg_list args, reply_handler h, bool idempotent, bool eval, int n) {
  struct pair_state {
    reply script;
    std::error_code ec;
    bool resend = false;
    bool answered = false;
  };
  auto st = std::make_shared<pair_state>();
  auto payload = script_payload(s, args, eval);
  submit(request{std::move(payload),
                             [this, st](std::error_code ec, reply r) mutable {
                               st->answered = true;
                               st->ec = ec;
                               st->resend = !ec && noscript(r);
                               if (st->resend) noscript_fallbacks_.fetch_add(1, std::memory_order_relaxed);
                               st->script = std::move(r);
                             },
                             idempotent});
  std::string wait;
  auto count = std::to_string(n);
  auto timeout = std::to_string(cfg_->replica_ack.timeout.count());
  encode_command(wait, {"WAIT", count, timeout});
  submit(request{
      std::move(wait),
      [this, st, &s, args = std::move(args), h = std::move(h), idempotent, n](std::error_code ec, reply r) mutable {
        if (st->resend) return send_acked(s, std::move(args), std::move(h), idempotent, true, n);
        // On one socket the script's reply comes first. Not here: the script went on a blocking
        // caller's lane that broke before WAIT could follow it, and WAIT went on the connection,
        // where it says nothing about the script's write. The script's outcome is unknown.
        if (!st->answered) {
          scoped_error_text scope("the blocking caller's connection broke between the script and its WAIT");
          return complete(h, errc::connection_lost, {});
        }
        if (st->ec || st->script.is_error()) return complete(h, st->ec, std::move(st->script));
        if (!ec && r.is_error()) {
          // WAIT refused (a proxy, an ACL): the write stands; go on without acknowledgement.
          if (wait_ != probe::no) {
            wait_ = probe::no;
            report_background(*cfg_, "replica acknowledgement", error_from_reply_text(r.str),
                              "the server refuses WAIT (" + r.str + "): locks go on without replica acknowledgement");
          }
          return complete(h, {}, std::move(st->script));
        }
        if (ec) return complete(h, ec, std::move(st->script));
        if (r.is_integer() && r.integer >= n) return complete(h, {}, std::move(st->script));
        std::string words = std::to_string(r.integer) + " of " + std::to_string(n) + " replicas acknowledged within " +
                            std::to_string(cfg_->replica_ack.timeout.count()) + " ms";
        scoped_error_text scope(words);
        h(errc::not_replicated, std::move(st->script));
      },
      idempotent});
}

}  // namespace redlease::detail
