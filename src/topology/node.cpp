// SPDX-License-Identifier: MIT
#include "topology/node.hpp"

#include "background.hpp"
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
  scoped_error_text scope(r.str);
  h(ec, std::move(r));
}

}  // namespace

node::node(asio::any_io_executor ex, const config& cfg, std::string name_suffix)
    : conn_(std::make_shared<connection>(std::move(ex), cfg, std::move(name_suffix))), cfg_(&conn_->cfg()) {}

void node::exec(std::string payload, reply_handler h, bool idempotent) {
  conn_->submit_here(request{std::move(payload),
                             [h = std::move(h)](std::error_code ec, reply r) mutable { complete(h, ec, std::move(r)); },
                             idempotent});
}

void node::exec_script(const lua_script& s, arg_list args, reply_handler h, bool idempotent, bool always_eval) {
  if (always_eval) return exec(script_payload(s, args, true), std::move(h), idempotent);
  auto payload = script_payload(s, args, false);
  conn_->submit_here(request{
      std::move(payload),
      [this, &s, args = std::move(args), h = std::move(h), idempotent](std::error_code ec, reply r) mutable {
        // This node forgot the script (restart, failover: scripts are not replicated, SCRIPT
        // FLUSH): EVAL runs and caches it.
        if (!ec && noscript(r)) return exec(script_payload(s, args, true), std::move(h), idempotent);
        complete(h, ec, std::move(r));
      },
      idempotent});
}

int node::replicas_wanted() const {
  if (wait_ == probe::no) return 0;
  int n = cfg_->replica_ack.replicas;
  if (n >= 0) return n;
  return auto_ack_ && conn_->replicas_at_handshake() > 0 ? 1 : 0;
}

void node::on_up() {
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
  };
  auto st = std::make_shared<pair_state>();
  auto payload = script_payload(s, args, eval);
  conn_->submit_here(request{std::move(payload),
                             [st](std::error_code ec, reply r) mutable {
                               st->ec = ec;
                               st->resend = !ec && noscript(r);
                               st->script = std::move(r);
                             },
                             idempotent});
  std::string wait;
  auto count = std::to_string(n);
  auto timeout = std::to_string(cfg_->replica_ack.timeout.count());
  encode_command(wait, {"WAIT", count, timeout});
  conn_->submit_here(request{
      std::move(wait),
      [this, st, &s, args = std::move(args), h = std::move(h), idempotent, n](std::error_code ec, reply r) mutable {
        if (st->resend) return send_acked(s, std::move(args), std::move(h), idempotent, true, n);
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
