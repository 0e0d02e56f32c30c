// SPDX-License-Identifier: MIT
#include "net/connection.hpp"

#include <asio/connect.hpp>
#include <asio/error.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/post.hpp>

#include <fcntl.h>

#include <algorithm>
#include <utility>

#include "background.hpp"
#include "runtime/io_guard.hpp"
#include "redlease/error.hpp"

namespace redlease::detail {
namespace {

constexpr std::size_t read_chunk = 64 * 1024;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Failures that no reconnect heals: a request made while the client backs off fails at once with
// the reason rather than waiting for the next attempt (a wrong port or certificate stays wrong).
bool needs_configuration(std::error_code ec) {
  return ec == errc::protocol_error || ec == errc::tls_untrusted_certificate || ec == errc::tls_name_mismatch ||
         ec == errc::tls_certificate_expired || ec == errc::tls_client_certificate_required ||
         ec == errc::tls_bad_files || ec == errc::tls_not_supported || ec == errc::tls_expected_by_server;
}

// The first bytes of a TLS record (alert or handshake, version 3.x): a TLS server answering plaintext.
bool looks_like_tls_record(const char* p, std::size_t n) {
  return n >= 2 && (p[0] == '\x15' || p[0] == '\x16') && p[1] == '\x03';
}

// Opens the socket close-on-exec: a program that forks and execs (redlease run, any user's) must not
// hand its Redis connections to the child.
std::error_code open_cloexec(asio::generic::stream_protocol::socket& sock,
                             const asio::generic::stream_protocol::endpoint& ep) {
  std::error_code ec;
  sock.open(ep.protocol(), ec);
  if (ec) return ec;
  int fd = sock.native_handle();
  int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  return {};
}

// The OS's reason for a failed connect or resolution, in the words a user looks for: "connection
// refused", "name not found", "timed out"; anything else as the OS says it.
std::string connect_reason(std::error_code ec) {
  if (ec == asio::error::connection_refused) return "connection refused";
  if (ec == asio::error::timed_out) return "timed out";
  if (ec == asio::error::host_not_found || ec == asio::error::host_not_found_try_again ||
      ec == asio::error::no_data)
    return "name not found (" + ec.message() + ")";
  return ec.message();
}

}  // namespace

connection::connection(asio::any_io_executor ex, const config& cfg, std::string name_suffix)
    : ex_(std::move(ex)),
      cfg_(cfg),
      client_name_(cfg.client_name.empty() ? std::string{} : cfg.client_name + name_suffix),
      sock_(ex_),
      attempt_timer_(ex_),
      timeout_timer_(ex_),
      liveness_timer_(ex_),
      rbuf_(new char[read_chunk]),
      reader_(resp_limits{cfg.max_reply_depth, cfg.max_reply_elements}),
      jitter_(std::random_device{}()) {}

connection::~connection() = default;

void connection::start() {
  if (state_ == state::idle) connect_attempt();
}

void connection::connect_attempt() {
  ++gen_;
  auto gen = gen_;
  auto self = shared_from_this();
  sock_.close();
  reader_.reset();
  wbuf_.clear();
  wnext_.clear();
  woff_ = 0;
  writing_ = false;

  attempt_timer_.expires_after(cfg_.connect_timeout);
  attempt_timer_.async_wait([this, self, gen](std::error_code ec) {
    if (ec || gen != gen_ || state_ == state::up || state_ == state::closed || state_ == state::backoff)
      return;
    on_attempt_timeout();
  });

  if (cfg_.tls.enabled && !cfg_.unix_socket.empty()) {
    return attempt_failed(errc::tls_not_supported,
                          "TLS is not supported on a unix socket (" + cfg_.unix_socket + "): connect over TCP");
  }
  if (cfg_.tls.enabled && !tls_ctx_) {
    tls_failure err;
    tls_ctx_ = make_tls_context(cfg_.tls, err);
    if (!tls_ctx_) return attempt_failed(err.code, std::move(err.text));
  }
  if (cb_.resolve) {
    state_ = state::resolving;
    cb_.resolve([this, self, gen](std::error_code ec, std::string text, node_address a) {
      if (gen != gen_ || state_ != state::resolving) return;
      if (ec) return attempt_failed(ec, std::move(text));
      addr_ = std::move(a);
      connect_to(addr_, gen);
    });
    return;
  }

  if (!cfg_.unix_socket.empty()) {
    state_ = state::connecting;
    asio::generic::stream_protocol::endpoint ep{asio::local::stream_protocol::endpoint(cfg_.unix_socket)};
    if (auto ec = open_cloexec(sock_.plain(), ep))
      return attempt_failed(errc::connect_failed, cfg_.unix_socket + ": " + connect_reason(ec));
    sock_.plain().async_connect(ep, [this, self, gen](std::error_code ec) {
      if (gen != gen_ || state_ != state::connecting) return;
      if (ec) return attempt_failed(errc::connect_failed, cfg_.unix_socket + ": " + connect_reason(ec));
      on_connected(gen);
    });
    return;
  }
  addr_ = node_address{cfg_.host, cfg_.port};
  connect_to(addr_, gen);
}

void connection::connect_to(const node_address& a, std::uint64_t gen) {
  state_ = state::resolving;
  // The one place the host is chosen (the config's, or the resolver's answer): resolution, TLS SNI
  // and the certificate's name all use host_.
  host_ = a.host;
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(ex_);
  resolver->async_resolve(
      host_, std::to_string(a.port),
      [this, self = shared_from_this(), gen, resolver](std::error_code ec,
                                                       asio::ip::tcp::resolver::results_type results) {
        if (gen != gen_ || state_ != state::resolving) return;
        if (ec || results.empty()) {
          const std::string why = ec ? connect_reason(ec) : std::string("name not found (no address)");
          return attempt_failed(errc::connect_failed, where() + ": " + why);
        }
        state_ = state::connecting;
        auto eps = std::make_shared<std::vector<asio::ip::tcp::endpoint>>();
        for (auto& r : results) eps->push_back(r.endpoint());
        connect_endpoint(std::move(eps), 0, gen, {});
      });
}

void connection::connect_endpoint(std::shared_ptr<std::vector<asio::ip::tcp::endpoint>> eps, std::size_t i,
                                  std::uint64_t gen, std::error_code last) {
  // Every address failed: the last one's reason (all of them, for a name with several, say the
  // same as a rule: nothing listens).
  if (i >= eps->size()) return attempt_failed(errc::connect_failed, where() + ": " + connect_reason(last));
  sock_.close();
  auto ep = asio::generic::stream_protocol::endpoint((*eps)[i]);
  if (auto ec = open_cloexec(sock_.plain(), ep)) return connect_endpoint(eps, i + 1, gen, ec);
  sock_.plain().async_connect(ep, [this, self = shared_from_this(), eps, i, gen, ep](std::error_code ec) {
    if (gen != gen_ || state_ != state::connecting) return;
    if (ec) return connect_endpoint(eps, i + 1, gen, ec);
    peer_ = ep;
    std::error_code ignored;
    sock_.plain().set_option(asio::ip::tcp::no_delay(true), ignored);
    on_tcp_connected(gen);
  });
}

void connection::on_tcp_connected(std::uint64_t gen) {
  if (!cfg_.tls.enabled) return on_connected(gen);
  // A fresh TLS stream per attempt; the Redis handshake (AUTH first) only ever runs inside it.
  state_ = state::tls_handshake;
  tls_failure err = prepare_tls_stream(sock_.start_tls(*tls_ctx_), cfg_.tls, host_);
  if (err.code) return attempt_failed(err.code, std::move(err.text));
  sock_.async_handshake([this, self = shared_from_this(), gen](std::error_code ec) {
    if (gen != gen_ || state_ != state::tls_handshake) return;
    if (ec) {
      tls_failure f = classify_handshake_failure(ec, sock_.tls(), cfg_.tls, where());
      return attempt_failed(f.code, std::move(f.text));
    }
    on_connected(gen);
  });
}

void connection::on_attempt_timeout() {
  if (state_ == state::tls_handshake && sock_.is_tls() && tls_bytes_received(sock_.tls()) == 0) {
    // Not one byte in answer to the TLS hello: a Redis port without TLS waits like this for the end
    // of a line that never comes. (So would a stalled server: the text says both.)
    return attempt_failed(errc::tls_not_offered_by_server,
                          "TLS: " + where() + " did not answer the TLS hello within " +
                              std::to_string(cfg_.connect_timeout.count()) +
                              " ms: it does not seem to speak TLS on this port (a Redis port without TLS stays "
                              "silent); use redis://, or check that the server is not stalled");
  }
  if (state_ == state::tls_handshake)
    return attempt_failed(errc::connect_timeout, "timed out in the TLS handshake with " + where());
  // The probe did not finish: the reset stands as it was.
  if (state_ == state::probing)
    return attempt_failed(errc::connect_failed, where() + ": closed the connection before any reply");
  const std::string within = " within " + std::to_string(cfg_.connect_timeout.count()) + " ms";
  if (state_ == state::handshake)
    return attempt_failed(errc::connect_timeout,
                          where() + ": timed out: connected, but no answer to the handshake" + within);
  if (state_ == state::resolving)
    return attempt_failed(errc::connect_timeout, where() + ": timed out: the name was not resolved" + within);
  attempt_failed(errc::connect_timeout, where() + ": timed out: no connection" + within);
}

void connection::handshake_io_failed(std::error_code ec) {
  if (state_ == state::probing) return;  // the failed connection's other operation
  if (sock_.is_tls() && attempt_bytes_ == 0) {
    tls_failure f =
        classify_failure_after_handshake(ec, cfg_.tls, where(), tls_client_certificate_requested(sock_.tls()));
    return attempt_failed(f.code, std::move(f.text));
  }
  // A Redis TLS port resets a plaintext connection at its first bytes, before any reply; so do a
  // refusing proxy and a server going down. A TLS handshake on a new connection tells them apart.
  if (!sock_.is_tls() && cfg_.unix_socket.empty() && attempt_bytes_ == 0 &&
      (ec == asio::error::connection_reset || ec == asio::error::eof || ec == asio::error::broken_pipe)) {
    return probe_for_tls(ec);
  }
  attempt_failed(errc::connect_failed, where() + ": the connection failed during the handshake (" + ec.message() + ")");
}

void connection::probe_for_tls(std::error_code first) {
  state_ = state::probing;
  sock_.close();
  probe_ = std::make_shared<tls_probe>(ex_);
  probe_->start(peer_, [this, self = shared_from_this(), gen = gen_, first](bool tls) {
    if (gen != gen_ || state_ != state::probing) return;
    if (!tls)
      return attempt_failed(errc::connect_failed,
                            where() + ": closed the connection before any reply (" + first.message() + ")");
    attempt_failed(errc::tls_expected_by_server,
                   where() + " closed the plaintext connection before any reply (" + first.message() +
                       ") and answers a TLS handshake: it is a TLS port; use rediss://");
  });
}

std::string connection::where() const {
  if (!cfg_.unix_socket.empty() && !cb_.resolve) return cfg_.unix_socket;
  return to_string(addr_);
}

void connection::on_connected(std::uint64_t gen) {
  state_ = state::handshake;
  attempt_bytes_ = 0;
  start_read();
  // The handshake runs before any queued request: a request must never run unauthenticated or on the
  // wrong database. It costs one round trip per connection.
  std::deque<inflight> hs;
  auto push = [&](std::initializer_list<std::string_view> args) {
    encode_command(wbuf_, args);
    inflight e;
    e.internal = true;
    e.deadline = clock::now() + cfg_.connect_timeout;
    hs.push_back(std::move(e));
  };
  if (!cfg_.password.empty()) {
    if (cfg_.username.empty()) push({"AUTH", cfg_.password});
    else push({"AUTH", cfg_.username, cfg_.password});
  }
  std::string db;
  if (cfg_.database != 0) {
    db = std::to_string(cfg_.database);
    push({"SELECT", db});
    hs.back().select = true;
  }
  // SETNAME doubles as the probe that tells us a password is required (NOAUTH).
  if (!client_name_.empty()) push({"CLIENT", "SETNAME", client_name_});
  else push({"PING"});
  if (require_master_) {
    push({"ROLE"});
    hs.back().role = true;
  }
  handshake_pending_ = static_cast<int>(hs.size());
  handshake_error_.clear();
  handshake_text_.clear();
  // In-flight entries of the previous connection were settled in connection_lost; the handshake
  // goes first on the new one.
  for (auto& e : hs) inflight_.push_back(std::move(e));
  stats_.commands += hs.size();
  (void)gen;
  start_write();
}

bool role_refusal(std::string_view text) {
  auto ec = error_from_reply_text(text);
  return ec == errc::no_permission || ec == errc::unknown_command;
}

int role_master_replicas(const reply& r) noexcept {
  if (!r.is_array() || r.elements.empty() || r.elements[0].str != "master") return -1;
  return r.elements.size() >= 3 && r.elements[2].is_array() ? static_cast<int>(r.elements[2].elements.size()) : 0;
}

// ROLE's first element names what the server is now: only a master takes our writes. (A node the
// resolver named may have been demoted since, or the Sentinels' answer may lag.)
bool connection::check_role(reply& r) {
  if (r.is_error()) {
    // An ACL without +role, or a proxy without the command: go on unchecked, saying so once.
    role_refused_ = role_refusal(r.str);
    replicas_ = -1;
    if (!*role_refusal_reported_) {
      *role_refusal_reported_ = true;
      std::string acks = role_refused_ && cfg_.replica_ack.replicas < 0 && !cfg_.sentinel.nodes.empty()
                             ? ", nor count its replicas (replica_ack asks 1 of them, up or not)"
                             : "";
      report_background(cfg_, "connection", error_from_reply_text(r.str),
                        "ROLE refused (" + r.str + "): cannot check that " + to_string(addr_) + " is the master" +
                            acks + "; grant +role to the client's ACL user");
    }
    return true;
  }
  role_refused_ = false;
  if (int n = role_master_replicas(r); n >= 0) {
    replicas_ = n;
    return true;
  }
  std::string what = r.is_array() && !r.elements.empty() ? r.elements[0].str : std::string("an unexpected reply");
  if (!handshake_error_) {
    handshake_error_ = errc::server_readonly;
    handshake_text_ = to_string(addr_) + " is a " + what + ", not the master (ROLE)";
  }
  return false;
}

void connection::on_handshake_reply(std::error_code ec, reply& r, bool role, bool select) {
  if (!ec && role) {
    check_role(r);
  } else if (!ec && r.is_error()) {
    auto mapped = error_from_reply_text(r.str);
    std::error_code fatal;
    if (mapped == errc::auth_failed) fatal = mapped;
    else if (mapped == errc::server_full || mapped == errc::server_loading || mapped == errc::server_busy) fatal = mapped;
    // Protected mode: the server refuses clients from other addresses, and says how to fix it (it
    // says so at once, so the first command of the handshake, SELECT maybe, gets the words).
    else if (starts_with(r.str, "DENIED")) fatal = errc::connect_failed;
    // Any other refusal of SELECT (a database out of range, an ACL without +select, a renamed
    // SELECT): every command would run on database 0 instead, among others' keys and locks.
    else if (select) fatal = errc::select_failed;
    // CLIENT SETNAME may be forbidden by ACL or renamed away; that is not worth failing for.
    // An AUTH refusal outranks the other failures; the first words win among equals (a refused
    // AUTH makes the pipelined CLIENT SETNAME answer NOAUTH, which would hide WRONGPASS).
    if (fatal && (!handshake_error_ || (fatal == errc::auth_failed && handshake_error_ != errc::auth_failed))) {
      handshake_error_ = fatal;
      handshake_text_ = r.str;
    }
  }
  if (--handshake_pending_ > 0) return;
  if (handshake_error_) return attempt_failed(handshake_error_, std::move(handshake_text_));
  state_ = state::up;
  up_since_ = clock::now();
  last_error_.clear();
  attempt_timer_.cancel();
  ++stats_.connects;
  if (cb_.on_up) cb_.on_up();
  flush();
}

void connection::attempt_failed(std::error_code ec, std::string text) {
  if (state_ == state::closed) return;
  if (auto p = std::exchange(probe_, nullptr)) p->cancel();
  last_error_ = ec;
  last_error_text_ = std::move(text);
  ++gen_;
  sock_.close();
  // Settle what was written on this attempt (handshake only: user requests are not sent before
  // the handshake completes).
  inflight_.clear();
  batches_out_ = 0;
  writing_ = false;
  wbuf_.clear();
  wnext_.clear();
  woff_ = 0;
  // Requests waiting for this attempt fail now, with the reason, rather than at their timeout.
  fail_queued(ec);
  if (cb_.on_down) cb_.on_down();
  schedule_reconnect();
}

void connection::connection_lost(std::error_code ec, bool at_once) {
  if (state_ == state::closed) return;
  ++stats_.connection_losses;
  ++gen_;
  sock_.close();
  writing_ = false;
  wbuf_.clear();
  wnext_.clear();
  woff_ = 0;
  // Requests already written: resend the idempotent ones after reconnecting (in their order, ahead
  // of everything queued later); the others may or may not have run, so they fail.
  std::deque<inflight> lost;
  lost.swap(inflight_);
  batches_out_ = 0;
  std::vector<queued> resend;
  std::vector<reply_handler> failed;
  // After a protocol error nothing is resent: the peer may not be Redis at all.
  bool broken = ec == errc::protocol_error;
  for (auto& e : lost) {
    if (!e.handler || e.internal) continue;
    if (e.idempotent && !broken) resend.push_back({request{std::move(e.payload), std::move(e.handler), true}, e.deadline});
    else failed.push_back(std::move(e.handler));
  }
  for (auto it = resend.rbegin(); it != resend.rend(); ++it) queued_.push_front(std::move(*it));
  state_ = state::backoff;
  if (cb_.on_down) cb_.on_down();
  // A liveness drop fails what was written with request_timeout: the server did not answer in time.
  std::error_code why = broken || ec == errc::request_timeout ? ec : std::error_code(errc::connection_lost);
  for (auto& h : failed) call(h, why, failure_reply(why));
  // Reconnect at once after a drop of a connection that had proved itself (the server may just
  // have restarted). One that died soon after its handshake keeps backing off: a peer that accepts
  // and drops every connection (or answers the handshake, then garbage) would otherwise get a
  // reconnect loop at full speed.
  if (at_once || clock::now() - up_since_ >= cfg_.reconnect_max_delay) {
    attempt_ = 0;
    return connect_attempt();
  }
  schedule_reconnect();
}

void connection::drop(std::error_code why) {
  if (state_ == state::up) connection_lost(why);
}

void connection::reconnect_now(std::error_code why) {
  if (state_ == state::closed || state_ == state::idle) return;
  // Asked for (a failover, a Sentinel passed over): now, whatever the backoff says.
  if (state_ == state::up) return connection_lost(why, true);
  // Connecting (to the old address, perhaps) or waiting to: start over, resolving afresh. Only
  // handshake commands can be in flight before the connection is up.
  inflight_.clear();
  batches_out_ = 0;
  attempt_ = 0;
  connect_attempt();
}

void connection::schedule_reconnect() {
  state_ = state::backoff;
  auto base = cfg_.reconnect_min_delay.count();
  auto cap = std::max(cfg_.reconnect_max_delay.count(), base);
  long long delay = base;
  for (int i = 0; i < attempt_ && delay < cap; ++i) delay *= 2;
  delay = std::min<long long>(delay, cap);
  // Jitter in [delay/2, delay], so that many clients do not reconnect in lockstep.
  std::uniform_int_distribution<long long> dist(delay / 2, std::max(delay / 2, delay));
  ++attempt_;
  auto gen = gen_;
  auto self = shared_from_this();
  attempt_timer_.expires_after(std::chrono::milliseconds(dist(jitter_)));
  attempt_timer_.async_wait([this, self, gen](std::error_code ec) {
    if (ec || gen != gen_ || state_ != state::backoff) return;
    connect_attempt();
  });
}

void connection::submit(request r) {
  asio::post(ex_, [self = shared_from_this(), r = std::move(r)]() mutable { self->submit_here(std::move(r)); });
}

void connection::submit_here(request r) {
  if (state_ == state::closed) {
    call(r.handler, errc::client_closed, reply{});
    return;
  }
  // The peer answered the last attempt with something that is not RESP: say so at once rather than
  // after a reconnect delay (a wrong port does not heal by waiting).
  if (state_ == state::backoff && needs_configuration(last_error_)) {
    call(r.handler, last_error_, failure_reply(last_error_));
    return;
  }
  auto deadline = clock::now() + cfg_.request_timeout;
  queued_.push_back({std::move(r), deadline});
  if (!timeout_armed_) arm_timeout();
  if (state_ == state::idle) connect_attempt();
  schedule_flush();
}

void connection::schedule_flush() {
  if (state_ != state::up || writing_ || flush_scheduled_) return;
  // A caller writing its own request (io_guard::direct) is alone: nothing else would join the write.
  if (io_guard::direct() && !sock_.is_tls()) return flush();
  // Deferred, so that every request already posted to the executor joins this write.
  flush_scheduled_ = true;
  asio::post(ex_, [self = shared_from_this(), gen = gen_] {
    self->flush_scheduled_ = false;
    if (gen == self->gen_) self->flush();
  });
}

void connection::send_untracked(std::string payload) {
  if (state_ != state::up) return;
  ++stats_.commands;
  if (writing_) {
    wnext_.append(payload);
    return;
  }
  wbuf_.append(payload);
  start_write();
}

void connection::flush() {
  if (state_ != state::up || writing_ || queued_.empty()) return;
  if (batches_out_ >= max_batches_out && queued_.size() < full_batch) return;
  std::size_t n = queued_.size();
  for (auto& q : queued_) {
    wbuf_.append(q.req.payload);
    inflight e;
    e.handler = std::move(q.req.handler);
    e.deadline = q.deadline;
    e.idempotent = q.req.idempotent;
    if (e.idempotent) e.payload = std::move(q.req.payload);
    inflight_.push_back(std::move(e));
  }
  inflight_.back().batch_end = true;
  ++batches_out_;
  queued_.clear();
  stats_.commands += n;
  start_write();
}

void connection::start_write() {
  if (writing_ || woff_ >= wbuf_.size()) return;
  ++stats_.writes;
  if (io_guard::direct()) {
    // On the caller's thread: an async write would complete through the executor, waking the I/O
    // thread for nothing. Whatever the socket does not take at once goes the usual way.
    auto n = sock_.try_write_now(wbuf_.data() + woff_, wbuf_.size() - woff_);
    stats_.bytes_written += n;
    woff_ += n;
    if (woff_ == wbuf_.size()) {
      wbuf_.clear();
      woff_ = 0;
      ++stats_.direct_writes;
      return;
    }
  }
  writing_ = true;
  auto gen = gen_;
  sock_.async_write_some(asio::buffer(wbuf_.data() + woff_, wbuf_.size() - woff_),
                         [this, self = shared_from_this(), gen](std::error_code ec, std::size_t n) {
                           if (gen != gen_) return;
                           writing_ = false;
                           if (ec) return state_ == state::up ? connection_lost(ec) : handshake_io_failed(ec);
                           stats_.bytes_written += n;
                           woff_ += n;
                           if (woff_ < wbuf_.size()) return start_write();
                           wbuf_.clear();
                           // A large burst (a watchdog tick over 100k locks) must not pin its buffer.
                           if (wbuf_.capacity() > 256 * 1024) std::string().swap(wbuf_);
                           woff_ = 0;
                           wbuf_.swap(wnext_);
                           flush();
                           start_write();
                         });
}

void connection::start_read() {
  auto gen = gen_;
  sock_.async_read_some(asio::buffer(rbuf_.get(), read_chunk),
                        [this, self = shared_from_this(), gen](std::error_code ec, std::size_t n) {
                          if (gen != gen_) return;
                          if (ec) {
                            if (state_ == state::up) connection_lost(ec);
                            else handshake_io_failed(ec);
                            return;
                          }
                          if (state_ == state::handshake && attempt_bytes_ == 0 && !sock_.is_tls() &&
                              looks_like_tls_record(rbuf_.get(), n)) {
                            return attempt_failed(errc::tls_expected_by_server,
                                                  where() + " answered the Redis handshake with a TLS record: "
                                                            "this is a TLS port; use rediss://");
                          }
                          attempt_bytes_ += n;
                          reply r;
                          bool whole = false;  // a whole reply came in this read (one clock read per read)
                          for (bool fed = false;;) {
                            auto st = resp_reader::status::error;
                            try {
                              if (!fed && !reader_.feed(rbuf_.get(), n)) return protocol_fault(reader_.error_text());
                              fed = true;
                              st = reader_.next(r);
                            } catch (const std::bad_alloc&) {
                              return protocol_fault("a reply larger than the memory available");
                            }
                            if (st == resp_reader::status::incomplete) break;
                            if (st == resp_reader::status::error) return protocol_fault(reader_.error_text());
                            ++stats_.replies;
                            // Liveness counts whole replies: a peer that trickles one declared
                            // reply a byte at a time is as stuck as a silent one.
                            if (!whole) last_read_ = clock::now();
                            whole = true;
                            try {
                              on_reply(r);
                            } catch (...) {
                              report_exception(cfg_, "reply handler");
                            }
                            // A handler may have closed or reset the connection.
                            if (gen != gen_) return;
                          }
                          start_read();
                        });
}

void connection::on_reply(reply& r) {
  if (inflight_.empty()) {
    if (cb_.on_push) cb_.on_push(r);
    return;
  }
  inflight e = std::move(inflight_.front());
  inflight_.pop_front();
  if (e.batch_end && --batches_out_ < max_batches_out && !queued_.empty()) schedule_flush();
  if (e.internal) return on_handshake_reply({}, r, e.role, e.select);
  if (e.handler) e.handler({}, std::move(r));
}

void connection::arm_timeout() {
  clock::time_point next = clock::time_point::max();
  if (!queued_.empty()) next = queued_.front().deadline;
  for (auto& e : inflight_) {
    if (e.handler) {
      next = std::min(next, e.deadline);
      break;
    }
  }
  if (next == clock::time_point::max()) {
    timeout_armed_ = false;
    return;
  }
  if (timeout_armed_ && timeout_at_ <= next) return;
  timeout_armed_ = true;
  timeout_at_ = next;
  timeout_timer_.expires_at(next);
  timeout_timer_.async_wait([this, self = shared_from_this(), next](std::error_code ec) {
    if (ec || !timeout_armed_ || timeout_at_ != next) return;
    timeout_armed_ = false;
    on_timeout();
  });
}

void connection::on_timeout() {
  auto now = clock::now();
  std::vector<reply_handler> expired;
  while (!queued_.empty() && queued_.front().deadline <= now) {
    expired.push_back(std::move(queued_.front().req.handler));
    queued_.pop_front();
  }
  // A written request keeps its slot (replies match by position); its late reply is dropped.
  for (auto& e : inflight_) {
    if (e.handler && !e.internal && e.deadline <= now) expired.push_back(std::move(e.handler));
  }
  bool written = false;
  for (auto& e : inflight_) written = written || (!e.handler && !e.internal);
  for (auto& h : expired) call(h, errc::request_timeout, reply{});
  if (state_ == state::closed) return;
  if (written && state_ == state::up) check_liveness();
  else arm_timeout();
}

// Liveness: written requests ran out of time and no whole reply has arrived for twice the request
// timeout. The link or the server is stuck, and a fresh connection is the only way to find out (the
// pub/sub connection has its PING for this). Twice, so that one slow reply that does come (a stall
// that clears) keeps its connection.
void connection::check_liveness() {
  auto silent_until = last_read_ + 2 * cfg_.request_timeout;
  if (clock::now() >= silent_until) {
    ++stats_.stalled_drops;
    report_background(cfg_, "connection", errc::request_timeout,
                      "no whole reply received for " + std::to_string(2 * cfg_.request_timeout.count()) +
                          " ms with requests timed out: dropping the connection and reconnecting");
    return connection_lost(errc::request_timeout);
  }
  arm_timeout();
  liveness_timer_.expires_at(silent_until);
  liveness_timer_.async_wait([this, self = shared_from_this(), gen = gen_](std::error_code ec) {
    if (ec || gen != gen_ || state_ != state::up) return;
    for (auto& e : inflight_)
      if (!e.handler && !e.internal) return check_liveness();  // still waiting for a timed-out reply
  });
}

void connection::protocol_fault(std::string text) {
  ++stats_.protocol_errors;
  if (state_ == state::up) {
    last_error_ = errc::protocol_error;
    last_error_text_ = std::move(text);
    report_background(cfg_, "connection", errc::protocol_error, last_error_text_);
    connection_lost(errc::protocol_error);
  } else {
    attempt_failed(errc::protocol_error, std::move(text));
  }
}

void connection::call(reply_handler& h, std::error_code ec, reply r) noexcept {
  try {
    h(ec, std::move(r));
  } catch (...) {
    report_exception(cfg_, "reply handler");
  }
}

reply connection::failure_reply(std::error_code ec) const {
  reply r;
  if (ec == last_error_ && !last_error_text_.empty()) {
    r.type = reply::kind::error;
    r.str = last_error_text_;
  }
  return r;
}

void connection::fail_queued(std::error_code ec) {
  std::deque<queued> q;
  q.swap(queued_);
  for (auto& e : q) call(e.req.handler, ec, failure_reply(ec));
}

void connection::close() {
  if (state_ == state::closed) return;
  stop();
  sock_.close();
  std::deque<inflight> in;
  in.swap(inflight_);
  batches_out_ = 0;
  for (auto& e : in)
    if (e.handler) call(e.handler, errc::client_closed, reply{});
  fail_queued(errc::client_closed);
}

int connection::release_socket() {
  if (state_ != state::up || !idle() || sock_.is_tls()) return -1;
  std::error_code ec;
  // release() takes the descriptor out of the reactor and cancels the pending read, whose
  // completion finds a new generation and does nothing.
  int fd = sock_.plain().release(ec);
  if (ec) return -1;
  stop();
  return fd;
}

void connection::stop() {
  state_ = state::closed;
  if (auto p = std::exchange(probe_, nullptr)) p->cancel();
  ++gen_;
  attempt_timer_.cancel();
  timeout_timer_.cancel();
  liveness_timer_.cancel();
  timeout_armed_ = false;
}

}  // namespace redlease::detail
