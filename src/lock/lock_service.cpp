// SPDX-License-Identifier: MIT
#include "lock/lock_service.hpp"

#include "lock/protocol.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <map>
#include <charconv>
#include <random>

#include "background.hpp"
#include "client_impl.hpp"
#include "net/resp.hpp"
#include "random.hpp"
#include "redlease_lua.hpp"

namespace redlease::detail {
namespace {

std::string to_string_ms(ms d) { return std::to_string(d.count()); }

// A refusal that passes: out of memory, too few replicas, busy, loading. An acquisition with a wait
// retries it with backoff; one without fails at once. Configuration refusals (no_permission,
// unknown_command) never pass by themselves and fail at once.
// A grant too few replicas acknowledged (rolled back already) counts as one when the config says
// to retry it.
// READONLY from a node whose deployment promotes replicas (Sentinel): it was demoted, and the
// topology moves to the new master within a poll; elsewhere it is a configuration (a URL naming a
// replica).
bool refused_for_now(std::error_code ec, const config& cfg, const node& n) {
  return ec == errc::server_oom || ec == errc::no_replicas || ec == errc::server_busy || ec == errc::server_loading ||
         (ec == errc::not_replicated && cfg.replica_ack.retry) ||
         (ec == errc::server_readonly && n.replicas_promoted());
}

// Worth trying again while a wait lasts: the network, or a refusal the server lifts by itself.
bool transient(std::error_code ec, const config& cfg, const node& n) {
  // A port without TLS that stays silent looks like a stalled server: retried like connect_timeout.
  return ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::connect_failed ||
         ec == errc::connect_timeout || ec == errc::tls_not_offered_by_server || refused_for_now(ec, cfg, n);
}

// A request written whose reply never came: it may have run. The connection dropped, it timed out
// (and may still run late), or the stream broke (a protocol error fails every request written on
// the connection, though the server ran them).
bool outcome_unknown(std::error_code ec) {
  return ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::protocol_error;
}

// An attempt whose outcome is unknown and whose connection is gone (dropped, or broken by a protocol
// error): its undo goes on a new connection, and the attempt may still be on its way in the old one
// (a proxy that reset the client's side but still delivers what it had, a stalled server's
// buffers), so the undo can run first. One that timed out keeps its place on its connection, and
// the undo queues right behind it.
bool attempt_left_its_connection(std::error_code ec) {
  return ec == errc::connection_lost || ec == errc::protocol_error;
}

bool valid_duration(ms d, bool allow_zero) {
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
  explicit keep_client(const std::weak_ptr<client_impl>& c) : p_(c.lock()) {}
  explicit keep_client(client_impl& c) : keep_client(c.weak_from_this()) {}
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
  std::shared_ptr<client_impl> p_;
};

}  // namespace

std::string lock_channel(std::string_view name, lock_kind kind) { return protocol_of(kind).channel(name); }

std::string latch_key(std::string_view name, std::string_view request) {
  // Redisson's latch name, so that it shares the lock's cluster slot.
  std::string out = name.find('{') != std::string_view::npos ? "redisson_unlock_latch:" + std::string(name)
                                                              : "redisson_unlock_latch:{" + std::string(name) + "}";
  out.push_back(':');
  out.append(request);
  return out;
}

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
static ms lease_of_levels(const level_stack& levels, std::size_t n, ms watchdog) {
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
  bool_handler done;
  asio::steady_timer timer;
  bool trying = false;
  bool again = false;     // a wake-up came while an attempt was on the wire
  bool woken = false;     // an unlock message woke this waiter alone: passed on if it gives up
  bool finished = false;
  bool cancelled = false;  // cancelled while an attempt was on the wire: ends when it answers
  bool poll_capped = false;
  bool behind = false;  // the last reply: queued behind another waiter (see acquire_result::behind)
  wait_strategy how;
  ms next_delay{0};
  unsigned retries = 0;
  std::error_code last_error;
  std::string last_error_text;  // the server's words for last_error
  ms error_delay{0};            // backoff between attempts the server refused
  std::vector<channel_entry*> channels;

  explicit waiter(const asio::any_io_executor& ex) : timer(ex) {}
};

struct lock_service::channel_entry final : subscriber::listener {
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
    svc->wake(*this, proto->wakes(payload));
  }
  void on_subscribed() override { svc->wake(*this, wake_policy::all); }
  void on_refused(std::error_code ec, const std::string& text) override { svc->channel_refused(*this, ec, text); }
};

std::size_t lock_service::hold_hash::operator()(const key& k) const noexcept {
  return std::hash<std::string_view>{}(k.name) ^
         ((std::hash<owner_id>{}(k.owner) + static_cast<std::size_t>(k.kind)) * 0x9e3779b97f4a7c15ULL);
}
std::size_t lock_service::hold_hash::operator()(const std::shared_ptr<hold>& h) const noexcept {
  return (*this)(key{h->name, h->owner, h->kind});
}
bool lock_service::hold_eq::operator()(const key& a, const std::shared_ptr<hold>& b) const noexcept {
  return a.name == b->name && a.owner == b->owner && a.kind == b->kind;
}
bool lock_service::hold_eq::operator()(const std::shared_ptr<hold>& a, const key& b) const noexcept {
  return b.name == a->name && b.owner == a->owner && b.kind == a->kind;
}
bool lock_service::hold_eq::operator()(const std::shared_ptr<hold>& a, const std::shared_ptr<hold>& b) const noexcept {
  return a->name == b->name && a->owner == b->owner && a->kind == b->kind;
}

lock_service::lock_service(client_impl& c)
    : c_(c),
      // Renewals due within a quarter of the interval of each other go out together (at 75-100% of the
      // interval, with two thirds of the lease or more left); once renewed together they stay aligned.
      schedule_(std::max<clock::duration>(c.cfg().watchdog_timeout / 12, std::chrono::milliseconds(1))),
      wd_timer_(c.executor()),
      interval_(std::max<ms>(c.cfg().watchdog_timeout / 3, ms(1))),
      linger_timer_(c.executor()) {}

lock_service::~lock_service() = default;

ms lock_service::lost_hold_kept{std::chrono::minutes(5)};

// How long a retried release's latch lives: longer than any earlier attempt of it can stay stuck in
// a dead connection's buffers before the server reads it.
ms lock_service::latch_ttl() const { return std::max<ms>(ms(60000), 10 * c_.cfg().request_timeout); }

void lock_service::append_field(std::string& out, owner_id owner) const {
  out.append(c_.uuid());
  out.push_back(':');
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, owner);
  (void)ec;
  out.append(buf, p);
}

std::string lock_service::field_of(owner_id owner) const {
  std::string f;
  f.reserve(c_.uuid().size() + 21);
  append_field(f, owner);
  return f;
}

std::string_view lock_service::scratch_field(owner_id owner) {
  field_scratch_.clear();
  append_field(field_scratch_, owner);
  return field_scratch_;
}

lock_service::hold* lock_service::find(std::string_view name, owner_id owner, lock_kind kind) const {
  auto it = holds_.find(key{name, owner, kind});
  return it == holds_.end() ? nullptr : it->get();
}

lock_service::local_view lock_service::view(std::string_view name, owner_id owner, lock_kind kind, bool want_token) {
  local_view v;
  std::lock_guard<std::mutex> g(view_mu_);
  if (auto* h = find(name, owner, kind)) {
    v.held = true;
    v.valid = !h->lost && clock::now() < h->valid_until;
    v.valid_until = h->valid_until;
    v.fence = h->fence;
    if (want_token) {
      if (!h->stop.stop_possible()) {
        h->stop = std::stop_source();
        if (h->lost) h->stop.request_stop();
      }
      v.token = h->stop.get_token();
    }
  }
  return v;
}

// ---- acquire -----------------------------------------------------------------------------------

void lock_service::attempt(const std::shared_ptr<waiter>& w, attempt_handler h) {
  const auto& proto = protocol_of(w->kind);
  ms lease = w->lease.value_or(c_.cfg().watchdog_timeout);
  arg_list a;
  a.buf.reserve(w->name.size() + w->id.size() + 96);
  proto.encode_acquire(a, acquire_request{w->name, scratch_field(w->owner), w->id, lease, w->fenced, w->allowance,
                                          w->queue});
  auto sent = clock::now();
  // The waiter outlives its attempt (it is not retried before this reply): what an undo needs is
  // read from it, not copied per attempt.
  c_.route(w->name).exec_script_acked(proto.acquire_script(w->fenced), std::move(a),
                                      [this, &proto, w, h = std::move(h), sent](std::error_code ec, reply r) mutable {
    auto res = ec && ec != errc::not_replicated ? acquire_result{} : proto.decode_acquire(r);
    w->behind = res.what == acquire_result::kind::busy && res.behind;
    if (ec == errc::not_replicated) {
      if (res.what != acquire_result::kind::granted) return h({}, res.pttl, 0, sent);
      // A grant the replicas did not confirm would not survive a failover: give it back (in order,
      // before any retry), then report it.
      std::string words = error_text_slot();
      return undo_acquire(*w, [h = std::move(h), sent, words = std::move(words)]() mutable {
        scoped_error_text scope(std::move(words));
        h(errc::not_replicated, std::nullopt, 0, sent);
      });
    }
    if (ec) return h(ec, std::nullopt, 0, sent);
    if (res.what == acquire_result::kind::granted) return h({}, std::nullopt, res.token, sent);
    // A busy reply without the holder's TTL is waited like one without expiry (a message, or the poll
    // cap): an empty PTTL below would read as a grant.
    if (res.what == acquire_result::kind::busy) return h({}, res.pttl.value_or(-1), 0, sent);
    if (res.what == acquire_result::kind::would_deadlock) return h(errc::would_deadlock, std::nullopt, 0, sent);
    h(errc::bad_reply, std::nullopt, 0, sent);
  });
}

// One sending of an undo, and of the give-up that goes with it.
struct lock_service::undo_round {
  std::string name;
  lock_kind kind = lock_kind::reentrant;
  owner_id owner = 0;
  std::string id;
  std::string request;
  bool queued = false;  // the attempt may have queued the owner (a fair lock): leave the queue too
  ms allowance{0};      // ... with the allowance it queued with
  int parts = 0;        // sends not answered yet
  bool resend = false;  // one of them may not have reached the server
  bool later = false;   // ... and the connection fails requests at once for now (a protocol error)
  // This round may run before its attempt: it goes on another connection than the attempt did (it
  // sends again one whose reply never came, or the attempt's connection was lost).
  bool unordered = false;
  clock::time_point sweep_until{};  // the reads that follow an unordered round end by then
  unique_function<void()> then;
};

// The reply of an acquisition never came (the connection dropped, or it timed out and may still run
// late): the script may have granted the lock. Undo that before anyone retries, or the hold would
// leak (a held mutex, or one level too many). The undo queues behind the attempt on the same
// connection, so it runs after it; and it must run before the waiter's next attempt, which is
// queued after it: it goes out as EVAL, because an EVALSHA answered NOSCRIPT (after SCRIPT FLUSH)
// would be resent behind that next attempt and could undo it instead.
void lock_service::undo_acquire(const waiter& w, unique_function<void()> then, bool unordered) {
  undo_acquire(w.name, w.kind, w.owner, w.id, w.queue, w.allowance, std::move(then), {}, unordered);
}

// An undo whose own reply never comes is sent again (undo_answered), under the same `request` id.
void lock_service::undo_acquire(const std::string& name, lock_kind kind, owner_id owner, const std::string& id,
                                bool queued, ms allowance, unique_function<void()> then, std::string request,
                                bool unordered) {
  auto round = std::make_shared<undo_round>();
  round->name = name;
  round->kind = kind;
  round->owner = owner;
  round->id = id;
  round->queued = queued;
  round->allowance = allowance;
  round->then = std::move(then);
  auto done = [this, round](std::error_code ec, reply) { undo_answered(round, ec); };
  const auto& proto = protocol_of(kind);
  hold* h = find(name, owner, kind);
  release_request u;
  u.name = name;
  u.field = scratch_field(owner);
  u.id = id;
  round->unordered = unordered || !request.empty();
  if (request.empty()) request = random_token();
  round->request = request;
  ++undos_out_;
  u.request = request;
  // The levels known before the lost grant keep their lease (as release_hold gives it): an outer
  // fixed lease of ten minutes must not come back as the watchdog's 30 s, which nothing renews.
  const bool known = h && !h->lost;
  u.remaining_lease = c_.cfg().watchdog_timeout;
  if (known) u.remaining_lease = lease_of_levels(h->levels, h->levels.size(), u.remaining_lease);
  u.expected = (known ? static_cast<long long>(h->levels.size()) : 0) + 1;
  u.latch_ttl = latch_ttl();
  arg_list a;
  proto.encode_undo(a, u);
  // Out of memory (noeviction) an undo must still give the grant back, as a release does: with the
  // allow-oom flag once a release has shown that the server takes it. An undo does not probe: on a
  // server that refused the flag it would fail, and nothing would send it again.
  const lua_script* flagged = allow_oom_ == probe::yes ? proto.undo_script(true) : nullptr;
  const lua_script& undo = flagged ? *flagged : *proto.undo_script(false);
  const lua_script* g = proto.give_up_script();
  if (g != nullptr && queued) {
    // The lost attempt may have queued the owner instead (a fair lock): leave the queue too, in
    // order, after the undo, with the allowance it queued with (the deadlines behind it lose that
    // much, no more). A single attempt (queued false) never queues: nothing to leave.
    round->parts = 2;
    c_.exec_script(name, undo, std::move(a), done, false, true);
    arg_list b;
    proto.encode_give_up(b, acquire_request{name, scratch_field(owner), id, ms(0), false, allowance, true});
    return c_.exec_script(name, *g, std::move(b), std::move(done), false, true);
  }
  round->parts = 1;
  c_.exec_script(name, undo, std::move(a), std::move(done), false, true);
}

// The undo was fire-and-forget: one whose own reply never came (the reconnect that carried it failed
// too, or it timed out) left the grant on the server, held for a lease by nobody, and a re-entry by
// the same owner counted one level too many for good. Once every part of a round has answered, a
// round that may not have reached the server is sent again, at once, so that it stays ahead of the
// owner's later commands on the connection; the same request id makes its latch count it once if
// the first did run. The expected count is read again from the hold as it is then. It goes on until
// the server answers or the client closes; `then` (a cancelled acquisition's completion) does not
// wait for the resends.
void lock_service::undo_answered(const std::shared_ptr<undo_round>& r, std::error_code ec) {
  if (ec == errc::connection_lost || ec == errc::request_timeout || ec == errc::connect_failed ||
      ec == errc::connect_timeout || ec == errc::tls_not_offered_by_server)
    r->resend = true;
  // After a protocol error the connection fails new requests at once until its next attempt: sent
  // again at once, the undo would fail again, in a loop. It waits a reconnect delay instead.
  if (ec == errc::protocol_error) r->later = true;
  if (--r->parts > 0) return;
  --undos_out_;
  auto then = std::move(r->then);
  r->then = nullptr;
  if (r->later && !closed_) {
    auto t = std::make_shared<asio::steady_timer>(c_.executor(), std::max<ms>(c_.cfg().reconnect_max_delay, ms(50)));
    timers_.insert(t);
    t->async_wait([this, t, r, life = c_.weak_from_this()](std::error_code e) {
      if (e) return;  // cancelled by close(): the engine may be gone
      keep_client keep(life);
      if (!keep) return;
      timers_.erase(t);
      if (!closed_) undo_acquire(r->name, r->kind, r->owner, r->id, r->queued, r->allowance, nullptr, r->request);
    });
  } else if (r->resend && !closed_) {
    undo_acquire(r->name, r->kind, r->owner, r->id, r->queued, r->allowance, nullptr, r->request);
  } else if (r->unordered && !closed_) {
    const ms step = c_.cfg().request_timeout;
    r->sweep_until = clock::now() + 64 * step;
    sweep_later(r, step, step, 6);
  }
  if (then) then();
}

// An unordered undo went out on a new connection: a resend (the old connection was dropped with the
// attempt and the first undo maybe still in it, in a stalled server's buffers or on the way), or the
// first undo of an attempt whose connection was lost. It can run before the late attempt: it finds
// nothing (and its latch makes a first undo behind the attempt change nothing), so the late grant
// would be held for a lease by nobody. So the owner's count is
// read six times after it (1, 2, 4 ... 32 request timeouts apart, all within 64), and a level the
// client does not know of is given back by a fresh undo. A read waits while something that could
// be a grant whose reply is still coming is under way: a first attempt or an undo of this client's
// (counted, not indexed: the common path pays an increment), or a wait or an unlock of this owner's
// on this lock. A kind with a token per attempt (the mutex) asks for that attempt's token alone,
// which no later grant has.
bool lock_service::undo_may_race(const undo_round& r) const {
  if (protocol_of(r.kind).per_attempt_id()) return false;
  if (first_attempts_out_ > 0 || undos_out_ > 0) return true;
  if (hold* h = find(r.name, r.owner, r.kind); h && h->releasing > 0) return true;
  for (const auto& w : waiters_)
    if (w->owner == r.owner && w->kind == r.kind && w->name == r.name) return true;
  return false;
}

// `wait`: until this read; `step`: the gap before it, doubled after it.
void lock_service::sweep_later(std::shared_ptr<undo_round> r, ms wait, ms step, int left) {
  if (closed_ || left <= 0 || clock::now() >= r->sweep_until) return;
  auto t = std::make_shared<asio::steady_timer>(c_.executor(), wait);
  timers_.insert(t);
  t->async_wait([this, t, r = std::move(r), step, left, life = c_.weak_from_this()](std::error_code e) mutable {
    if (e) return;  // cancelled by close(): the engine may be gone
    keep_client keep(life);
    if (!keep) return;
    timers_.erase(t);
    if (closed_) return;
    // Busy: looked at again a little later; the steps after it keep their length.
    if (undo_may_race(*r)) return sweep_later(std::move(r), std::max<ms>(step / 4, ms(10)), step, left);
    const auto& proto = protocol_of(r->kind);
    std::string cmd;
    proto.encode_hold_count(cmd, r->name, scratch_field(r->owner));
    c_.exec(r->name, std::move(cmd), [this, r, step, left, &proto, life](std::error_code ec, reply rep) mutable {
      keep_client keep(life);
      if (!keep || closed_) return;
      auto n = ec ? std::nullopt : proto.decode_hold_count(rep, r->id);
      if (n && !undo_may_race(*r)) {
        const hold* h = find(r->name, r->owner, r->kind);
        const long long known =
            h && !h->lost && (!proto.per_attempt_id() || h->token == r->id) ? static_cast<long long>(h->levels.size()) : 0;
        if (*n > known) undo_acquire(r->name, r->kind, r->owner, r->id, false, r->allowance);
      }
      sweep_later(std::move(r), 2 * step, 2 * step, left - 1);
    }, true);
  });
}

// A grant whose reply comes after its own lease ran out (the process was frozen, or the reply was
// very late) may already have expired on the server and gone to someone else: it is worth nothing.
// It is undone (in order, before the next attempt) and treated as contention.
bool lock_service::stale_grant(waiter& w, clock::time_point sent) {
  if (clock::now() < sent + w.lease.value_or(c_.cfg().watchdog_timeout)) return false;
  undo_acquire(w);
  return true;
}

// A queued waiter calls again at least every poll cap, so its declared allowance need not cover its
// whole wait: it only has to outlast the gap between two calls. Kept short, it bounds how long a
// waiter that died without giving up blocks everyone behind it. A zero wait (one attempt, never
// queued) declares none.
ms lock_service::queue_allowance(std::optional<ms> wait) const {
  if (wait && wait->count() == 0) return ms(0);
  const auto& cfg = c_.cfg();
  const ms floor = std::max<ms>(ms(1000), 3 * cfg.mutex_poll_cap);
  const ms cap = std::max(floor, std::min<ms>(cfg.queue_allowance, ms(300000)));
  return wait ? std::min(*wait, cap) : cap;
}

// A poll-capped waiter re-checks every mutex_poll_cap for a free lock that nobody announced. One
// queued behind another waiter cannot be handed the lock before that one: it calls again only to
// keep its place and, ten caps at the most after the head left, to find itself at the head. N
// waiters in one queue cost the server about 10 + N calls a second instead of 10 N.
// Keeping its place: each call moves its deadline to at least now + allowance, and a grant to
// another waiter lowers it to no less than now + that holder's lease. Calling three times per
// allowance and per lease (its own, standing for the other clients') keeps the deadline ahead of
// the next call, even when a holder dies and nobody announces the free lock.
ms lock_service::poll_interval(const waiter& w) const {
  const auto& cfg = c_.cfg();
  const ms cap = cfg.mutex_poll_cap;
  if (!w.behind || w.allowance.count() == 0) return cap;
  const ms lease = w.lease.value_or(cfg.watchdog_timeout);
  return std::max(cap, std::min({10 * cap, w.allowance / 3, lease / 3}));
}

void lock_service::acquire(std::string name, lock_kind kind, owner_id owner, std::optional<ms> wait,
                           std::optional<ms> lease, std::shared_ptr<lost_slot> slot, const wait_strategy& how,
                           bool_handler h, std::shared_ptr<acquire_cancel> cancel, bool fenced) {
  if (closed_) return h(errc::client_closed, false);
  if (cancel && cancel->requested) return h(errc::operation_aborted, false);
  if (name.empty() || (wait && !valid_duration(*wait, true)) || (lease && !valid_duration(*lease, false)))
    return h(errc::invalid_argument, false);
  if (fenced && !protocol_of(kind).fencing()) return h(errc::invalid_argument, false);
  if (!lost_.empty()) prune_lost(clock::now());
  if (auto* held = find(name, owner, kind)) {
    // The owner still holds the lock as far as it knows. If it was lost, re-entering (or locking the
    // mutex again) must not silently start a new hold in the middle of a critical section that is
    // already broken: the owner hears lock_lost, and unlocks to start afresh.
    if (held->lost) return h(errc::lock_lost, false);
    if (!protocol_of(kind).reentrant()) return h(errc::would_deadlock, false);
    if (held->levels.size() >= protocol_of(kind).max_levels()) return h(errc::invalid_argument, false);
    // An unlock of this hold is out, and is sent again (expecting the count it leaves) if its reply
    // is late. A re-entry sent now would run between the two on the server: the retry would find
    // the count it expects taken by the re-entry and take a second level. So it waits until the
    // unlock is settled; its wait counts from now.
    // A cancellation meanwhile completes it at once; the handler is then gone when the unlock settles.
    // So does its wait, plus the request timeout an attempt would have had: the unlock may go on
    // retrying for several request timeouts against a stalled server, and a try_lock(0) must not
    // wait out all of them (request_timeout, nothing sent).
    if (held->releasing > 0) {
      auto parked = std::make_shared<bool_handler>(std::move(h));
      std::shared_ptr<asio::steady_timer> timer;
      if (wait) {
        timer = std::make_shared<asio::steady_timer>(c_.executor(), *wait + c_.cfg().request_timeout);
        timers_.insert(timer);
        timer->async_wait([this, t = std::weak_ptr(timer), parked, life = c_.weak_from_this()](std::error_code e) {
          if (e) return;  // cancelled by close() or settled: the engine may be gone
          keep_client keep(life);
          if (!keep) return;
          if (auto timer = t.lock()) timers_.erase(timer);
          if (auto done = std::move(*parked)) {
            scoped_error_text words("an unlock of this hold is still unanswered: the re-entry was not sent");
            done(errc::request_timeout, false);
          }
        });
      }
      auto settle = [this, timer] {
        if (!timer) return;
        timer->cancel();
        timers_.erase(timer);
      };
      if (cancel) {
        cancel->parked = [parked, settle] {
          settle();
          if (auto done = std::move(*parked)) done(errc::operation_aborted, false);
        };
      }
      after_release_[held].push_back([this, name = std::move(name), kind, owner, wait, lease, slot = std::move(slot),
                                      how = how, parked, cancel = std::move(cancel), fenced, settle,
                                      since = clock::now()]() mutable {
        if (cancel) cancel->parked = nullptr;
        settle();
        if (!*parked) return;
        if (wait) wait = std::max(ms(0), *wait - std::chrono::duration_cast<ms>(clock::now() - since));
        acquire(std::move(name), kind, owner, wait, lease, std::move(slot), how, std::move(*parked),
                std::move(cancel), fenced);
      });
      return;
    }
  }
  auto w = std::make_shared<waiter>(c_.executor());
  w->name = std::move(name);
  w->kind = kind;
  w->owner = owner;
  w->lease = lease;
  if (wait) w->deadline = clock::now() + *wait;
  w->slot = std::move(slot);
  w->how = how;
  // A delay beyond the longest duration is "as long as it takes": clamped, so that adding it to
  // the clock cannot overflow.
  w->how.initial = std::min(w->how.initial, max_duration);
  w->how.max = std::min(w->how.max, max_duration);
  w->next_delay = w->how.initial;
  w->done = std::move(h);
  w->fenced = fenced;
  w->allowance = queue_allowance(wait);
  w->queue = !(wait && wait->count() == 0);
  if (protocol_of(kind).per_attempt_id()) w->id = random_token();
  if (cancel) cancel->waiter = w;
  w->trying = true;
  ++first_attempts_out_;
  attempt(w, [this, w](std::error_code ec, std::optional<long long> pttl, std::uint64_t fence, clock::time_point sent) mutable {
            w->trying = false;
            --first_attempts_out_;
            if (closed_) return end_attempt_after_close(w, ec, !ec && !pttl);
            if (outcome_unknown(ec)) undo_acquire(*w, nullptr, attempt_left_its_connection(ec));
            if (end_if_cancelled(w, !ec && !pttl)) return;
            // The first attempt reports errors as they are (an unreachable server fails fast), except
            // a refusal that passes, which an acquisition with time left waits out.
            if (ec && refused_for_now(ec, c_.cfg(), c_.route(w->name)) && !(w->deadline && clock::now() >= *w->deadline)) {
              w->last_error = ec;
              w->last_error_text = error_text_slot();
              return start_waiter(w, std::nullopt);
            }
            if (ec) return finish_waiter(w, ec, false);
            if (!pttl && stale_grant(*w, sent)) pttl = 0;
            if (!pttl) {
              on_acquired(w->name, w->kind, w->owner, w->lease, w->id, fence, sent, w->slot);
              return finish_waiter(w, {}, true);
            }
            if (w->deadline && clock::now() >= *w->deadline) return finish_waiter(w, {}, false);
            start_waiter(w, pttl);
          });
}

void lock_service::on_acquired(const std::string& name, lock_kind kind, owner_id owner, std::optional<ms> lease,
                               const std::string& id, std::uint64_t fence, clock::time_point sent,
                               const std::shared_ptr<lost_slot>& slot) {
  auto it = holds_.find(key{name, owner, kind});
  std::shared_ptr<hold> h;
  bool fresh = false;
  const auto& proto = protocol_of(kind);
  if (it != holds_.end() && !(*it)->lost && proto.reentrant()) {
    h = *it;
  } else {
    if (it != holds_.end()) {
      // A kind that cannot be re-entered granted to an owner that holds it (two acquisitions were
      // on the wire at once): the grant found the key free, so the hold known before is gone. It
      // is reported lost; the grant is a hold of its own, with its own token.
      auto old = *it;
      if (!old->lost) mark_lost(*old, lost_reason::deleted);
      erase(old.get());
    }
    h = std::make_shared<hold>();
    h->name = name;
    h->owner = owner;
    h->kind = kind;
    if (proto.per_attempt_id()) h->token = id;
    fresh = true;
  }
  // The hold's callback is the one of the handle that took it: a re-entry through another handle
  // took it over, and the first handle's on_lost never ran for the hold it took.
  if (slot && (fresh || !h->slot)) h->slot = slot;
  h->levels.push_back(lease);
  {
    // One short lock per acquisition for what the local view reads: the set and the deadline.
    std::lock_guard<std::mutex> g(view_mu_);
    if (fresh) holds_.insert(h);
    if (fence != 0) h->fence = fence;  // the latest grant's (a re-entry gets a new one)
    h->valid_until = sent + lease.value_or(c_.cfg().watchdog_timeout);
  }
  if (fresh) ++c_.held_locks;
  reschedule(*h);
}

void lock_service::reschedule(hold& h) {
  bool was = h.renewable;
  h.renewable = h.watchdog();
  if (was != h.renewable) {
    if (h.renewable) ++c_.watched_locks;
    else --c_.watched_locks;
  }
  if (h.in_flight) {
    schedule_.add(&h, h.valid_until);
  } else if (h.renewable) {
    // Renew a third of the watchdog timeout after the lease was last set.
    schedule_.add(&h, std::min(h.valid_until, h.valid_until - c_.cfg().watchdog_timeout + interval_));
  } else {
    schedule_.add(&h, h.valid_until);
  }
  arm_watchdog();
}

void lock_service::erase(hold* h) {
  if (h == nullptr || h->removed) return;
  if (!renew_errors_.empty()) renew_errors_.erase(h);
  schedule_.remove(h);
  if (h->renewable) --c_.watched_locks;
  h->renewable = false;
  h->removed = true;
  --c_.held_locks;
  std::shared_ptr<hold> keep;  // the hold dies outside the lock (and after it, when the caller is done)
  std::lock_guard<std::mutex> g(view_mu_);
  if (auto it = holds_.find(key{h->name, h->owner, h->kind}); it != holds_.end()) {
    keep = *it;
    holds_.erase(it);
  }
}

// Runs user code (stop callbacks, on_lost): its callers hold the client (keep_client) for as long as
// they go on using the engine after it.
void lock_service::mark_lost(hold& h, lost_reason why) {
  if (h.lost) return;
  keep_client client(c_);
  std::stop_source stop{std::nostopstate};
  {
    std::lock_guard<std::mutex> g(view_mu_);
    h.lost = true;
    stop = h.stop;
  }
  schedule_.remove(&h);
  if (h.renewable) --c_.watched_locks;
  h.renewable = false;
  // Stop callbacks and on_lost are user code: they run outside view_mu_, so they may ask for the
  // local view; an exception on_lost throws is reported, never propagated.
  if (stop.stop_possible()) stop.request_stop();
  auto keep = h.shared_from_this();
  lost_info info{h.name, h.owner, why, {}, {}};
  if (auto it = renew_errors_.find(&h); it != renew_errors_.end()) {
    info.cause = it->second.first;
    info.detail = std::move(it->second.second);
    renew_errors_.erase(it);
  }
  if (h.slot) h.slot->cb.call(c_.cfg(), "on_lost callback", info);
  // A lost hold stays until its owner unlocks (so unlock can say lock_lost), but not forever:
  // a fixed-lease lock that is never unlocked is a common pattern. The watchdog's timer drops it
  // lost_hold_kept after the loss.
  auto now = clock::now();
  auto self = holds_.find(key{h.name, h.owner, h.kind});
  if (self != holds_.end()) lost_.emplace_back(now, *self);
  prune_lost(now);
  arm_watchdog();
}

void lock_service::prune_lost(clock::time_point now) {
  while (!lost_.empty() && now - lost_.front().first >= lost_hold_kept) {
    if (auto old = lost_.front().second.lock(); old && old->lost) erase(old.get());
    lost_.pop_front();
  }
}

// ---- waiting -----------------------------------------------------------------------------------

void lock_service::start_waiter(std::shared_ptr<waiter> w, std::optional<long long> pttl) {
  waiters_.insert(w);
  const auto& proto = protocol_of(w->kind);
  std::string channel = proto.waiter_channel(w->name, scratch_field(w->owner));
  if (proto.poll_capped()) w->poll_capped = true;
  if (!w->how.use_backoff && !refused_channels_.empty() && channel_refused_lately(channel))
    poll_instead(*w);
  if (w->how.use_backoff) return waiter_sleep(w, pttl);  // no channel: retries on a schedule
  auto go = [this, w, pttl, channel = std::move(channel)] {
    if (w->finished) return;
    join_channel(w, channel, false);
    if (protocol_of(w->kind).keyspace_wake()) {
      if (keyspace_ == keyspace::on) {
        std::string ch = "__keyspace@" + std::to_string(c_.cfg().database) + "__:" + w->name;
        join_channel(w, ch, true);
      } else {
        w->poll_capped = true;
      }
    }
    if (!w->finished && !w->trying) waiter_sleep(w, pttl);
  };
  if (protocol_of(w->kind).keyspace_wake()) with_keyspace_state(std::move(go));
  else go();
}

void lock_service::join_channel(const std::shared_ptr<waiter>& w, const std::string& channel, bool keyspace) {
  auto it = channels_.find(channel);
  bool fresh = it == channels_.end();
  if (fresh) {
    auto e = std::make_unique<channel_entry>();
    e->svc = this;
    e->channel = channel;
    e->keyspace = keyspace;
    if (!keyspace) e->proto = &protocol_of(w->kind);
    e->lingers = !keyspace && protocol_of(w->kind).linger();
    it = channels_.emplace(channel, std::move(e)).first;
  }
  channel_entry& e = *it->second;
  // A lingering channel that nobody waited on: a message that came since this waiter's attempt
  // (it was busy then) was missed, so the waiter tries again at once.
  bool retry = e.waiters.empty() && e.missed;
  e.missed = false;
  if (retry) {
    asio::post(c_.executor(), [this, w, life = c_.weak_from_this()] {
      // close() finishes every waiter: check the waiter, and the client (gone once its last
      // reference went on this thread), before the engine.
      if (w->finished) return;
      keep_client keep(life);
      if (keep && !closed_) waiter_try(w);
    });
  }
  e.waiters.push_back(w.get());
  w->channels.push_back(&e);
  // The first waiter subscribes, and the confirmation wakes the waiters: they try again, closing the
  // race with an unlock published before the subscription existed. A later waiter joins a channel
  // that other local waiters already listen on: an unlock published meanwhile woke one of them, and
  // the lock went to someone, so it need not try again before the next message.
  if (fresh) {
    e.sub = &c_.sub(channel);
    e.sub->add(channel, &e);
  }
}

// The server will not let this user subscribe (an ACL without the channel): waiting for a message
// would sleep out the holder's whole lease. Say so once, and let the channel's waiters, and later
// ones on it, retry with backoff instead.
void lock_service::channel_refused(channel_entry& ch, std::error_code ec, const std::string& text) {
  keep_client keep(c_);  // config::on_error runs below
  if (!subscribe_refusal_reported_) {
    subscribe_refusal_reported_ = true;
    report_background(c_.cfg(), "lock waiter", ec,
                      "SUBSCRIBE " + ch.channel + " refused (" + text +
                          "): waiters fall back to polling with backoff; grant the channel (&" + ch.channel +
                          ") to wake them at once (docs/deployment.md)");
  }
  std::vector<std::shared_ptr<waiter>> ws;
  for (auto* w : ch.waiters)
    if (!w->finished) ws.push_back(w->shared_from_this());
  if (ch.keyspace) {
    // Only the keyspace events are refused: the waiters keep their unlock channel and poll at the
    // cap for a holder that does not publish, as when keyspace events are off.
    keyspace_ = keyspace::off;
    for (auto& w : ws) {
      w->poll_capped = true;
      leave_channel(*w, ch);
      if (!w->trying) waiter_sleep(w, std::nullopt);
    }
    return;
  }
  // Remembered for a while (a grant may come later), so that new waiters on it poll from the start.
  // A minute at most, and the latest 1024 channels at most: a client that waits on millions of
  // names under an ACL without channels must not keep one entry per name.
  const auto now = clock::now();
  while (!refused_order_.empty() &&
         (now - refused_order_.front().first >= std::chrono::minutes(1) || refused_order_.size() >= 1024)) {
    auto it = refused_channels_.find(refused_order_.front().second);
    if (it != refused_channels_.end() && it->second == refused_order_.front().first) refused_channels_.erase(it);
    refused_order_.pop_front();
  }
  refused_channels_[ch.channel] = now;
  refused_order_.emplace_back(now, ch.channel);
  for (auto& w : ws) fall_back_to_backoff(w);
}

bool lock_service::channel_refused_lately(const std::string& channel) {
  auto it = refused_channels_.find(channel);
  if (it == refused_channels_.end()) return false;
  if (clock::now() - it->second < std::chrono::minutes(1)) return true;
  refused_channels_.erase(it);
  return false;
}

// A waiter that cannot be woken by a message retries on the backoff schedule (10 ms doubling to 500 ms).
void lock_service::poll_instead(waiter& w) {
  if (w.how.use_backoff) return;
  w.how = wait_strategy::backoff(ms(10), ms(500));
  w.next_delay = w.how.initial;
}

void lock_service::fall_back_to_backoff(const std::shared_ptr<waiter>& w) {
  poll_instead(*w);
  leave_channels(*w);
  if (!w->trying) waiter_sleep(w, std::nullopt);
}

// The first live waiter of a channel: the one a message wakes, and the one that polls for a kind
// with one poller per channel.
lock_service::waiter* lock_service::channel_head(const channel_entry& e, const waiter* leaving) {
  for (auto* o : e.waiters)
    if (o == leaving || (!o->finished && !o->cancelled)) return o;
  return nullptr;
}

// 2,000 waiters on one mutex in one client polled 20,000 times a second, and each poll could only
// find the lock taken by one of them or by the holder: the first one polls for all. A grant to it
// ends in a release that publishes, which wakes the next.
bool lock_service::polls(const waiter& w) const {
  if (!w.poll_capped) return false;
  if (w.channels.empty() || w.channels.front()->keyspace || !protocol_of(w.kind).one_poller_per_channel()) return true;
  return channel_head(*w.channels.front(), nullptr) == &w;
}

void lock_service::leave_channel(waiter& w, channel_entry& e) {
  const bool was_poller = !e.keyspace && protocol_of(w.kind).one_poller_per_channel() && channel_head(e, &w) == &w;
  std::erase(w.channels, &e);
  e.waiters.remove(&w);
  if (was_poller) {
    // The next one takes over the polling (its timer was set for its TTL or deadline only).
    if (auto* next = channel_head(e, nullptr); next && next->poll_capped && !next->trying)
      waiter_sleep(next->shared_from_this(), std::nullopt);
  }
  if (!e.waiters.empty()) return;
  if (e.lingers) {
    e.idle_since = clock::now();
    e.missed = false;
    return arm_linger();
  }
  std::string ch = e.channel;
  e.sub->remove(ch, &e);
  channels_.erase(ch);
}

// Lingering channels left idle for a few seconds are unsubscribed.
void lock_service::arm_linger() {
  if (linger_armed_ || closed_) return;
  linger_armed_ = true;
  linger_timer_.expires_after(linger_for);
  linger_timer_.async_wait([this, life = c_.weak_from_this()](std::error_code ec) {
    // Cancelled only by close(), after which the engine may be freed before this runs (the client's
    // last reference went on its own thread): nothing of it is touched then.
    if (ec) return;
    keep_client keep(life);
    if (!keep) return;
    linger_armed_ = false;
    if (closed_) return;
    auto now = clock::now();
    bool more = false;
    for (auto it = channels_.begin(); it != channels_.end();) {
      auto& e = *it->second;
      if (e.lingers && e.waiters.empty()) {
        if (now - e.idle_since >= linger_for) {
          e.sub->remove(e.channel, &e);
          it = channels_.erase(it);
          continue;
        }
        more = true;
      }
      ++it;
    }
    if (more) arm_linger();
  });
}

void lock_service::leave_channels(waiter& w) {
  while (!w.channels.empty()) leave_channel(w, *w.channels.back());
}

void lock_service::wake(channel_entry& ch, wake_policy how) {
  // Collect first: a woken waiter may finish and leave the channel (and erase it) synchronously.
  // A waiter cancelled while its attempt is on the wire is not finished until that attempt answers,
  // and it will not try again: a "0" it took would be lost to the waiters behind it.
  if (how == wake_policy::none) return;
  std::vector<std::shared_ptr<waiter>> targets;
  for (auto* w : ch.waiters) {
    if (w->finished || w->cancelled) continue;
    targets.push_back(w->shared_from_this());
    if (how == wake_policy::one) {
      w->woken = true;
      break;
    }
  }
  if (targets.empty()) ch.missed = true;
  for (auto& w : targets) waiter_try(w);
}

void lock_service::waiter_sleep(const std::shared_ptr<waiter>& w, std::optional<long long> pttl) {
  auto now = clock::now();
  clock::time_point until = clock::time_point::max();
  if (w->how.use_backoff) {
    if (w->how.max_attempts != 0 && w->retries >= w->how.max_attempts) {
      // Out of attempts. A wait with a deadline says "not acquired" (contention is not an error);
      // one without (lock()) has no such answer: it must end in the lock or an error.
      std::error_code ec = w->last_error;
      if (!ec && !w->deadline) ec = errc::attempts_exhausted;
      return finish_waiter(w, ec, false);
    }
    ++w->retries;
    double share = std::uniform_real_distribution<double>(0.0, w->how.jitter)(rng_);
    auto delay = std::max<ms>(ms(1), ms(static_cast<long long>(static_cast<double>(w->next_delay.count()) * (1.0 - share))));
    double grown = static_cast<double>(w->next_delay.count()) * w->how.multiplier;
    w->next_delay = grown >= static_cast<double>(w->how.max.count()) ? w->how.max : ms(static_cast<long long>(grown));
    until = now + delay;
  }
  // The server's PTTL may exceed what the clock can add (a key set with PX 10^13, by anyone).
  if (pttl && *pttl >= 0) until = std::min(until, now + ms(std::min<long long>(*pttl, max_duration.count())));
  if (polls(*w)) until = std::min(until, now + poll_interval(*w));
  if (w->last_error) {
    // Backoff with jitter while the server refuses or cannot be reached: 10 ms doubling to 1 s.
    w->error_delay = w->error_delay.count() == 0 ? ms(10) : std::min<ms>(w->error_delay * 2, ms(1000));
    double share = std::uniform_real_distribution<double>(0.0, 0.5)(rng_);
    until = std::min(until, now + ms(static_cast<long long>(static_cast<double>(w->error_delay.count()) * (1.0 - share))));
  }
  if (w->deadline) until = std::min(until, *w->deadline);
  if (until == clock::time_point::max()) return;  // no TTL, no deadline: only a message wakes us
  w->timer.expires_at(until);
  w->timer.async_wait([this, w](std::error_code ec) {
    // close() finishes every waiter (and cancels its timer): an unfinished one is on a live engine.
    if (ec || w->finished || w->trying) return;
    waiter_try(w);
  });
}

void lock_service::waiter_try(const std::shared_ptr<waiter>& w) {
  if (w->finished || w->cancelled) return;
  if (w->trying) {
    w->again = true;
    return;
  }
  // The owner took this lock meanwhile (another acquisition of an async owner's): a kind that
  // cannot be re-entered would wait for itself, as acquire() says at the start. Granted anyway
  // (the owner's key vanished from the server before the client noticed), a second hold would
  // share the first's token.
  if (!protocol_of(w->kind).reentrant()) {
    if (auto* held = find(w->name, w->owner, w->kind); held && !held->lost)
      return finish_waiter(w, errc::would_deadlock, false);
  }
  w->trying = true;
  w->again = false;
  w->timer.cancel();
  // A fresh token per attempt: nothing meant for an earlier attempt can touch this one.
  if (protocol_of(w->kind).per_attempt_id()) w->id = random_token();
  attempt(w, [this, w](std::error_code ec, std::optional<long long> pttl, std::uint64_t fence, clock::time_point sent) {
            w->trying = false;
            if (closed_) return end_attempt_after_close(w, ec, !ec && !pttl);
            if (w->finished) return;
            if (outcome_unknown(ec)) undo_acquire(*w, nullptr, attempt_left_its_connection(ec));
            if (end_if_cancelled(w, !ec && !pttl)) return;
            bool past = w->deadline && clock::now() >= *w->deadline;
            if (ec) {
              // While waiting, a reconnect or a timeout is not the end: keep trying until the deadline,
              // and report the error if it is still failing then.
              if (!transient(ec, c_.cfg(), c_.route(w->name)) || past) return finish_waiter(w, ec, false);
              w->last_error = ec;
              w->last_error_text = error_text_slot();
              return waiter_sleep(w, std::nullopt);
            }
            w->last_error.clear();
            w->error_delay = ms(0);
            if (!pttl && stale_grant(*w, sent)) pttl = 0;
            if (!pttl) {
              on_acquired(w->name, w->kind, w->owner, w->lease, w->id, fence, sent, w->slot);
              return finish_waiter(w, {}, true);
            }
            if (past) return finish_waiter(w, {}, false);
            if (w->again) return waiter_try(w);
            // Busy after the wake-up: someone took the lock; its release will publish again.
            w->woken = false;
            waiter_sleep(w, pttl);
          });
}

void lock_service::cancel_acquire(acquire_cancel& x) {
  x.requested = true;
  if (auto parked = std::move(x.parked)) return parked();  // moved from: empty
  auto w = std::static_pointer_cast<waiter>(x.waiter.lock());
  if (!w || w->finished || w->cancelled) return;
  w->cancelled = true;
  if (!w->trying) finish_waiter(w, errc::operation_aborted, false);
}

// After an attempt's reply: a cancelled acquisition ends here. A grant the attempt brought is given
// back first (in order, before anything else this owner sends), so a cancelled acquisition never
// leaves the lock held; an attempt whose outcome is unknown was undone by the caller already.
bool lock_service::end_if_cancelled(const std::shared_ptr<waiter>& w, bool granted) {
  if (!w->cancelled) return false;
  if (!granted) {
    finish_waiter(w, errc::operation_aborted, false);
    return true;
  }
  // Completes once the grant is given back, so that the caller never sees the lock still held.
  undo_acquire(*w,
               [this, w] { finish_waiter(w, closed_ ? errc::client_closed : errc::operation_aborted, false); });
  return true;
}

// The client closed while this attempt was out (close() lets what is out be answered for
// config::close_timeout): a grant now has no holder, and is given back like one whose outcome is
// unknown. A queued kind's place is given back once: by finish_waiter, after the undo, for a first
// attempt (close() did not know of it); here, for a waiter close() finished already, whose attempt
// on the lane can run after the give-up close() sent on the node's connection and queue it again.
void lock_service::end_attempt_after_close(const std::shared_ptr<waiter>& w, std::error_code ec, bool granted) {
  const bool leave_here = w->finished;
  if (granted || outcome_unknown(ec)) {
    undo_acquire(w->name, w->kind, w->owner, w->id, w->queue && leave_here, w->allowance);
  } else if (!ec && leave_here) {
    give_up(*w);
  }
  finish_waiter(w, errc::client_closed, false);
}

// Leaves a fair lock's queue (a kind whose waiters queue on the server), so that the waiters behind
// are not held up until this one's deadline. Idempotent; nothing for the other kinds.
void lock_service::give_up(const waiter& w) {
  const auto& proto = protocol_of(w.kind);
  if (!w.queue || proto.give_up_script() == nullptr) return;
  arg_list a;
  proto.encode_give_up(a, acquire_request{w.name, scratch_field(w.owner), w.id, ms(0), false, w.allowance, true});
  c_.exec_script(w.name, *proto.give_up_script(), std::move(a), [](std::error_code, reply) {}, false, true);
}

void lock_service::finish_waiter(const std::shared_ptr<waiter>& w, std::error_code ec, bool acquired) {
  if (w->finished) return;
  w->finished = true;
  if (!acquired && (w->woken || w->again) && !closed_) {
    // An unlock message woke this waiter alone, and it gives up (an error, its deadline, a
    // cancellation) without the lock: the next waiter gets the wake-up, or it would sleep on a free
    // lock until the old holder's TTL or its own deadline. Before leaving: the channels stay.
    auto channels = w->channels;
    for (auto* ch : channels) wake(*ch, wake_policy::one);
  }
  // It may be queued (a fair lock): leave, also when the client closes (close() lets it be answered).
  if (!acquired) give_up(*w);
  w->timer.cancel();
  leave_channels(*w);
  auto done = std::move(w->done);
  waiters_.erase(w);
  if (!done) return;
  // An error that is the one the waiter kept (reported later, from a timer) keeps its words.
  std::optional<scoped_error_text> words;
  if (ec && ec == w->last_error && !w->last_error_text.empty() && error_text_slot().empty())
    words.emplace(std::move(w->last_error_text));
  done(ec, acquired);
}

void lock_service::with_keyspace_state(unique_function<void()> then) {
  if (keyspace_ == keyspace::on || keyspace_ == keyspace::off) return then();
  keyspace_waiting_.push_back(std::move(then));
  if (keyspace_ == keyspace::querying) return;
  keyspace_ = keyspace::querying;
  std::string cmd;
  encode_command(cmd, {"CONFIG", "GET", "notify-keyspace-events"});
  c_.exec({}, std::move(cmd), [this](std::error_code ec, reply r) {
    bool on = false;
    if (!ec && r.is_array() && r.elements.size() == 2) {
      const std::string& f = r.elements[1].str;
      bool k = f.find('K') != std::string::npos;
      bool all = f.find('A') != std::string::npos;
      on = k && (all || (f.find('g') != std::string::npos && f.find('x') != std::string::npos));
    }
    keyspace_ = on ? keyspace::on : keyspace::off;
    auto pending = std::move(keyspace_waiting_);
    keyspace_waiting_.clear();
    for (auto& f : pending) f();
  }, true);
}

void lock_service::on_command_connection_up() {
  if (keyspace_ != keyspace::querying) keyspace_ = keyspace::unknown;
}

// ---- release -----------------------------------------------------------------------------------

namespace {

// Redis 6 has no script flags: it reads the shebang line as Lua and fails to compile it.
bool shebang_refused(const reply& r) {
  return r.is_error() && r.str.find("Error compiling script") != std::string::npos &&
         r.str.find("'#'") != std::string::npos;
}

}  // namespace

void lock_service::exec_release(node& n, const lock_protocol& proto, arg_list a, reply_handler h) {
  // A release too few replicas acknowledged did run on the master: it stands (there is nothing to
  // roll back to), and the caller is told it worked.
  reply_handler done = [h = std::move(h)](std::error_code ec, reply r) mutable {
    h(ec == errc::not_replicated ? std::error_code{} : ec, std::move(r));
  };
  const lua_script* flagged = proto.release_script(true);
  if (allow_oom_ == probe::no || flagged == nullptr)
    return n.exec_script_acked(*proto.release_script(false), std::move(a), std::move(done));
  // The first release probes the flag (no extra round trip): a server that cannot compile it gets
  // the plain script, and so does every later release of this client.
  std::optional<arg_list> copy;
  if (allow_oom_ == probe::unknown) copy = a;
  n.exec_script_acked(*flagged, std::move(a),
                      [this, &n, &proto, copy = std::move(copy), h = std::move(done)](std::error_code ec,
                                                                                      reply r) mutable {
                        if (copy && shebang_refused(r)) {
                          allow_oom_ = probe::no;
                          return n.exec_script_acked(*proto.release_script(false), std::move(*copy), std::move(h));
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

// A release whose reply did not come (the connection dropped, or it timed out and may still run
// late) is retried in retry mode; the retry goes out on the same connection after the first, so
// the server sees them in order.
static bool release_unknown(std::error_code ec) {
  return outcome_unknown(ec);
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
  arg_list a;
  proto.encode_release(a, q);
  auto& target = c_.route(name);
  // Only a release that leaves levels moves the hold's deadline: the last level's (the common
  // unlock) reads no clock.
  const bool leaves_levels = h && h->levels.size() > 1 && proto.release_sets_remaining_lease();
  const auto sent = first_sent != clock::time_point{} || !leaves_levels ? first_sent : clock::now();
  exec_release(
      target, proto, std::move(a),
      [this, h, name = std::move(name), &proto, owner, attempt_no, expected, request = std::move(request),
       done = std::move(done), sent, lease](std::error_code ec, reply r) mutable {
        // No keep_client here: this runs on every unlock, and mark_lost, the one call below that
        // reaches user code (on_lost, stop callbacks), keeps the client itself and defers its
        // destruction past this handler.
        if (release_unknown(ec) && attempt_no < 3 && !closed_ && !(h && h->removed)) {
          // The script may or may not have run. The retry tells it which count to expect, so it
          // never decrements twice.
          return release_hold(std::move(h), std::move(name), proto, owner, attempt_no + 1, expected,
                              std::move(request), sent, std::move(done));
        }
        if (ec == errc::wrong_type && h && !h->removed && !h->lost && !closed_) {
          // WRONGTYPE from the lock's key (someone replaced it with another type: the hold is gone,
          // as for a deleted key, and the local hold would refuse every acquisition), or from another
          // key the script reads first (a fair queue of another type: the hold stands). The key's
          // type tells. The unlock stays out until then (re-entries stay parked).
          std::string cmd;
          encode_command(cmd, {"TYPE", name});
          return c_.exec(name, std::move(cmd),
                         [this, h, &proto, words = error_text_slot(), done = std::move(done)](std::error_code e,
                                                                                              reply t) mutable {
                           --h->releasing;
                           auto seen = std::exchange(h->loss_seen, std::nullopt);
                           const bool replaced = !e && t.is_string() && t.str != proto.key_type();
                           std::error_code answer = errc::wrong_type;
                           if (closed_) {
                             answer = errc::client_closed;
                           } else if (!h->removed && (replaced || h->lost)) {
                             drop_lost_level(*h, seen.value_or(t.str == "none" ? lost_reason::deleted : lost_reason::taken));
                             answer = errc::lock_lost;
                           } else if (seen && !h->lost && !h->removed) {
                             mark_lost(*h, *seen);  // a renewal found it gone meanwhile: the hold stands no more
                           }
                           if (h->releasing == 0) send_after_release(*h);
                           scoped_error_text scope(std::move(words));  // after on_lost, which may set its own
                           done(answer);
                         },
                         true);
        }
        // A renewal that found the lock gone while this unlock was out waited for its verdict: on
        // another connection (the lane) the unlock can run first, and then "gone" means released.
        std::optional<lost_reason> seen;
        if (h) {
          --h->releasing;
          seen = std::exchange(h->loss_seen, std::nullopt);
          if (h->releasing == 0) send_after_release(*h);
        }
        auto lost_now = [&] {
          if (seen && !h->lost && !h->removed && !closed_) mark_lost(*h, *seen);
        };
        if (ec && h && !h->removed && h->lost && !release_unknown(ec)) {
          // The hold was found lost before: its level is gone whatever the server says.
          drop_lost_level(*h);
          return done(errc::lock_lost);
        }
        if (ec) {
          // Still unknown: the next unlock of this hold must go in retry mode too.
          if (h && release_unknown(ec)) {
            h->release_in_doubt = true;
            h->in_doubt = std::make_unique<hold::doubt>(hold::doubt{request, sent});
          }
          if (h) lost_now();
          return done(ec);
        }
        if (h) {
          h->release_in_doubt = false;
          h->in_doubt.reset();
        }
        bool was_lost = h && h->lost;
        auto res = proto.decode_release(r);
        if (res == release_result::bad) {
          if (h) lost_now();
          return done(errc::bad_reply);
        }
        if (res == release_result::not_held) {
          if (!h) return done(errc::not_owner);
          // A retry of the last hold that finds nothing: the first attempt freed it.
          if (attempt_no > 0 && expected == 1 && !was_lost) {
            erase(h.get());
            return done({});
          }
          drop_lost_level(*h, seen.value_or(proto.not_held_reason()));
          return done(errc::lock_lost);
        }
        if (!h) return done({});  // held on the server without our knowing (a lost acquire reply)
        if (was_lost) {
          drop_lost_level(*h);
          return done(errc::lock_lost);
        }
        if (res == release_result::freed && h->levels.size() > 1) {
          // Freed with levels left: the server's count was not the one we made (someone overwrote
          // it). Those levels are gone; the owner hears it now, and from its next unlock.
          h->levels.pop_back();
          mark_lost(*h, proto.not_held_reason());
          return done({});
        }
        if (res == release_result::freed || h->levels.size() <= 1) {
          erase(h.get());
        } else {
          h->levels.pop_back();
          if (proto.release_sets_remaining_lease() && sent != clock::time_point{}) {
            // The key's TTL now counts from this release, with the lease of the levels left: the
            // deadline of the level given back (longer or shorter) no longer applies.
            std::lock_guard<std::mutex> g(view_mu_);
            h->valid_until = sent + lease;
          }
          // Levels remain, so the renewal's "gone" was not this unlock's doing.
          lost_now();
          if (!h->lost) reschedule(*h);
        }
        done({});
      });
}

// Posted: they run once this reply's handler has settled the hold (erased it, or taken its level).
void lock_service::send_after_release(const hold& h) {
  auto it = after_release_.find(&h);
  if (it == after_release_.end()) return;
  auto parked = std::move(it->second);
  after_release_.erase(it);
  asio::post(c_.executor(), [life = c_.weak_from_this(), parked = std::move(parked)]() mutable {
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
  proto.encode_force_unlock(a, name);
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
  proto.encode_hold_count(cmd, name, scratch_field(owner));
  c_.exec(name, std::move(cmd), [&proto, token = std::move(token), done = std::move(done)](std::error_code ec, reply r) mutable {
    if (ec) return done(ec, 0);
    auto n = proto.decode_hold_count(r, token);
    if (!n) return done(errc::bad_reply, 0);
    done({}, *n);
  }, true);
}

// ---- watchdog ----------------------------------------------------------------------------------

void lock_service::arm_watchdog() {
  auto next = schedule_.next();
  // Also when the oldest lost hold is due to be dropped (it is no longer in the schedule).
  if (!lost_.empty()) next = std::min(next, lost_.front().first + lost_hold_kept);
  if (next == clock::time_point::max() || closed_) return;
  if (next >= wd_armed_at_) return;
  wd_armed_at_ = next;
  wd_timer_.expires_at(next);
  wd_timer_.async_wait([this, next, life = c_.weak_from_this()](std::error_code ec) {
    if (ec) return;
    // The client may be gone (this handler was queued before it closed), and on_lost may run below.
    keep_client keep(life);
    if (!keep || closed_ || next != wd_armed_at_) return;
    wd_armed_at_ = clock::time_point::max();
    on_watchdog_timer();
  });
}

void lock_service::on_watchdog_timer() {
  prune_lost(clock::now());
  auto due = schedule_.take_due(clock::now());
  std::vector<std::shared_ptr<hold>> batch;
  batch.reserve(due.renew.size());
  for (auto* e : due.renew) {
    batch.push_back(static_cast<hold*>(e)->shared_from_this());
  }
  // on_lost runs for each: the holds are kept (user code there may close the client).
  std::vector<std::shared_ptr<hold>> expired;
  expired.reserve(due.expired.size());
  for (auto* e : due.expired) expired.push_back(static_cast<hold*>(e)->shared_from_this());
  for (auto& h : expired) mark_lost(*h, lost_reason::expired);
  if (!batch.empty()) send_renewals(std::move(batch), {});
  arm_watchdog();
}

void lock_service::send_renewals(std::vector<std::shared_ptr<hold>> all, const renew_context& ctx) {
  // One script call touches keys of one batch id only (a cluster: one slot); in a deployment with
  // one master they all share id 0 and this is one pass.
  // Each kind's renew script takes its own holds (renew.lua, rw_renew.lua).
  auto& topo = c_.topo();
  auto group_of = [&topo](const hold& h) {
    return std::make_pair(topo.batch_id(h.name), &protocol_of(h.kind).renew_script());
  };
  auto first = all.empty() ? std::make_pair(std::uint64_t{0}, static_cast<const lua_script*>(nullptr))
                           : group_of(*all.front());
  bool mixed = false;
  for (auto& h : all) mixed = mixed || group_of(*h) != first;
  if (mixed) {
    std::map<std::pair<std::uint64_t, const lua_script*>, std::vector<std::shared_ptr<hold>>> groups;
    for (auto& h : all) groups[group_of(*h)].push_back(std::move(h));
    for (auto& [id, group] : groups) send_renewals(std::move(group), ctx);
    return;
  }
  const std::size_t per_call = std::max<std::size_t>(1, c_.cfg().watchdog_batch_size);
  // Verification (a fixed lease after a failover) checks ownership without touching the lease.
  std::string lease = ctx.verify_only ? std::string("0") : to_string_ms(c_.cfg().watchdog_timeout);
  for (std::size_t start = 0; start < all.size(); start += per_call) {
    std::size_t n = std::min(per_call, all.size() - start);
    std::vector<std::shared_ptr<hold>> batch(all.begin() + static_cast<std::ptrdiff_t>(start),
                                             all.begin() + static_cast<std::ptrdiff_t>(start + n));
    arg_list a;
    std::size_t bytes = 32 + n;
    for (auto& h : batch) bytes += h->name.size() + h->token.size() + c_.uuid().size() + 48;
    a.buf.reserve(bytes);
    a.add(static_cast<long long>(n));
    for (auto& h : batch) a.add(h->name);
    a.add(lease);
    std::string kinds(n, 'h');
    for (std::size_t i = 0; i < n; ++i) kinds[i] = protocol_of(batch[i]->kind).renew_letter();
    a.add(kinds);
    // A hold is known by its token (kinds with a per-attempt id) or by its owner's field. An empty
    // id repeats the previous one (renew.lua): a run of one owner's locks sends its field once.
    const hold* prev = nullptr;
    for (auto& h : batch) {
      if (protocol_of(h->kind).per_attempt_id()) {
        a.add(h->token);
      } else if (prev != nullptr && !protocol_of(prev->kind).per_attempt_id() && prev->owner == h->owner) {
        a.add(std::string_view{});
      } else {
        a.add(scratch_field(h->owner));
      }
      prev = h.get();
    }
    auto sent = clock::now();
    ++c_.renew_calls;
    const auto& script = protocol_of(batch.front()->kind).renew_script();
    c_.route(batch.front()->name)
        .exec_script_acked(script, std::move(a),
                           [this, batch = std::move(batch), sent, ctx](std::error_code ec, reply r) {
                             // The renewal ran on the master, which is what holds the lock; a replica
                             // that lags (a resync after a failover) gets the TTL with the next one.
                             if (ec == errc::not_replicated) ec.clear();
                             on_renewed(batch, sent, ctx, ec, r);
                           },
                           true);
  }
}

void lock_service::on_renewed(const std::vector<std::shared_ptr<hold>>& batch, clock::time_point sent,
                              const renew_context& ctx, std::error_code ec, const reply& r) {
  if (closed_) return;
  keep_client keep(c_);  // on_lost may run below
  // The reply lists failures only: pairs {1-based index, code}.
  std::vector<long long> code(batch.size(), ec || !r.is_array() ? -1 : 1);
  if (!ec && r.is_array()) {
    for (std::size_t k = 0; k + 1 < r.elements.size(); k += 2) {
      auto i = r.elements[k].integer;
      if (i >= 1 && static_cast<std::size_t>(i) <= batch.size())
        code[static_cast<std::size_t>(i - 1)] = r.elements[k + 1].integer;
    }
  }
  auto now = clock::now();
  ms retry = std::max<ms>(interval_ / 4, ms(5));
  // Why this call failed, kept per hold until it renews, so that a loss at the deadline names the
  // cause (NOREPLICAS, OOM, a changed password, ...).
  std::error_code why = ec ? ec : (!r.is_array() ? std::error_code(errc::bad_reply) : std::error_code{});
  for (std::size_t i = 0; i < batch.size(); ++i) {
    auto& h = *batch[i];
    if (!ctx.verify_only) h.in_flight = false;
    if (h.removed || h.lost) continue;
    long long res = code[i];
    if (res != 1 && why) renew_errors_[&h] = {why, error_text_slot()};
    // The key did not make it to the new master: the failover cost this hold. (A check retried
    // after the failover, within an interval of it, tells the same story.)
    const std::string& failover = !ctx.failover.empty() || now - failover_at_ > interval_ ? ctx.failover : failover_;
    if ((res == 0 || res == 2) && !failover.empty())
      renew_errors_[&h] = {errc::master_switched, failover + "; the lock's key was not on the new master"};
    if (res == 1) {
      if (!renew_errors_.empty()) renew_errors_.erase(&h);
      if (ctx.verify_only) continue;
      ++c_.renewed_locks;
      {
        std::lock_guard<std::mutex> g(view_mu_);
        h.valid_until = std::max(h.valid_until, sent + c_.cfg().watchdog_timeout);
      }
      reschedule(h);
    } else if (res == 0 || res == 2 || res == 3 || res == 4) {
      auto why = res == 0 ? lost_reason::deleted : lost_reason::taken;
      if (res == 4)
        renew_errors_[&h] = {errc::bad_reply, "the hold count in \"" + h.name + "\" is not one this client made"};
      // An unlock of this hold is out (on the lane, it may have run before this renewal): its
      // reply decides. The hold is not rescheduled; the unlock's completion ends it either way.
      if (h.releasing > 0) {
        if (!h.loss_seen) h.loss_seen = why;
        continue;
      }
      mark_lost(h, why);
    } else if (now >= h.valid_until) {
      mark_lost(h, lost_reason::expired);
    } else if (ctx.verify_only) {
      // Not verified (the new master not reachable yet): try again soon; the deadline stands.
      verify_later(batch[i], ctx);
    } else {
      // The renewal failed (timeout, reconnect, script error): try again soon, and declare the
      // lock lost when its deadline passes unrenewed.
      schedule_.add(&h, std::min(h.valid_until, now + retry));
    }
  }
  arm_watchdog();
}

// After a failover nothing is known of any hold until the new master is asked: every hold is
// checked at once, not at its next renewal. A watchdog hold is renewed (which checks it); a
// fixed-lease hold is only checked (its lease is its owner's choice).
void lock_service::on_failover(const std::string& what) {
  if (closed_) return;
  failover_ = what;
  failover_at_ = clock::now();
  renew_context renew{what, false};
  renew_context verify{what, true};
  std::vector<std::shared_ptr<hold>> renewable, fixed;
  for (auto& h : holds_) {
    if (h->lost || h->removed) continue;
    if (h->renewable) {
      h->in_flight = true;
      renewable.push_back(h);
    } else {
      fixed.push_back(h);
    }
  }
  if (!renewable.empty()) send_renewals(std::move(renewable), renew);
  if (!fixed.empty()) send_renewals(std::move(fixed), verify);
  // Waiters hear of it when the pub/sub connection comes back on the new master (they retry then).
}

void lock_service::verify_later(std::shared_ptr<hold> h, const renew_context& ctx) {
  auto t = std::make_shared<asio::steady_timer>(c_.executor(), std::max<ms>(interval_ / 4, ms(5)));
  timers_.insert(t);
  t->async_wait([this, t, h = std::move(h), ctx, life = c_.weak_from_this()](std::error_code ec) {
    if (ec) return;  // cancelled by close(): the engine may be gone
    keep_client keep(life);
    if (!keep) return;
    timers_.erase(t);
    if (closed_ || h->lost || h->removed) return;
    send_renewals({h}, ctx);
  });
}

void lock_service::close() {
  if (closed_) return;
  closed_ = true;
  wd_timer_.cancel();
  linger_timer_.cancel();
  for (auto& t : timers_) t->cancel();
  timers_.clear();
  auto ws = waiters_;
  for (auto& w : ws) finish_waiter(w, errc::client_closed, false);
  auto parked = std::move(after_release_);
  after_release_.clear();
  for (auto& [h, fs] : parked)
    for (auto& f : fs) f();  // client_closed
  for (auto& h : holds_) schedule_.remove(h.get());
  auto pending = std::move(keyspace_waiting_);
  keyspace_waiting_.clear();
}

}  // namespace redlease::detail
