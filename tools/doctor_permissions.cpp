// SPDX-License-Identifier: MIT
// `redlease doctor`'s permission checks: ACL DRYRUN of every command and script call each kind
// sends, on the sample names, or a live probe where DRYRUN is refused (docs/cli.md, "Permissions").
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "doctor_checks.hpp"

namespace redlease::cli::checkup {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// ---- 2. permissions ---------------------------------------------------------------------------

// How much a step matters: the locks do not work without a required one; without a wake-up step
// they work, but waiters are not woken by a release's message, and without a fencing step they work
// but fenced acquisitions fail (a WARN that says what happens instead); the client copes without an
// optional one (noted on an OK line).
enum class need { required, wakeup, fencing, optional };

struct step {
  step(std::string w, std::vector<std::string> a, need l = need::required, std::string wo = {}, std::string g = {})
      : what(std::move(w)), args(std::move(a)), level(l), without(std::move(wo)), grant(std::move(g)) {}
  std::string what;               // "acquire", "release", ...
  std::vector<std::string> args;  // the command as the library sends it
  need level;
  std::string without;            // wake-up and fencing steps: what happens when it is refused
  std::string grant;              // what the advice grants when it is refused (default: by level)
};

struct step_result {
  std::string what;
  bool ok = true;
  need level = need::required;
  std::string text;
  std::string without;
  std::string grant;
};

const char* const fake_sha = "0123456789abcdef0123456789abcdef01234567";

const std::string without_handoff =
    "a fair release skips its hand-off message (PUBLISH through pcall): the head of the queue finds the lock "
    "free at its next call instead of at once";
// Without the token key (or TIME, which starts a name's first token): src/lua/include/make_fencing_token.lua.
const std::string without_fencing =
    "fenced acquisitions (lock_and_get_token) fail with no_permission, and `redlease run` takes the lock "
    "without a token (no REDLEASE_FENCING_TOKEN)";

const std::string request_id = "00112233445566778899aabbccddeeff";

// The layouts of src/lock/protocols.cpp (numkeys, KEYS, ARGV): channels are arguments, a fenced
// acquisition declares its token key.
std::vector<step> lock_steps(const context& cx, const client& c) {
  const std::string& n = cx.sample;
  const auto l = describe(lock_kind::reentrant, n);
  const std::string& ch = l.channel();
  std::string latch = l.latch_key(request_id);
  std::string field = c.id() + ":1";
  return {
      {"acquire", {"EVALSHA", fake_sha, "1", n, "5000", field}},
      {"release", {"EVALSHA", fake_sha, "2", n, latch, ch, "0", "30000", field, "1", "0", "30000"}},
      {"renew", {"EVALSHA", fake_sha, "1", n, "30000", "h", field}},
      {"force-unlock", {"EVALSHA", fake_sha, "1", n, ch, "0"}},
      {"fencing", {"EVALSHA", fake_sha, "2", n, l.token_key, "5000", field}, need::fencing,
       without_fencing},
      {"publish", {"PUBLISH", ch, "0"}, need::wakeup, without_publish},
      {"wait", {"SUBSCRIBE", ch}, need::wakeup, without_subscribe},
  };
}

std::vector<step> mutex_steps(const context& cx) {
  const std::string& n = cx.mutex_sample;
  const auto l = describe(lock_kind::mutex, n);
  const std::string& ch = l.channel();
  std::string token = "00112233445566778899aabbccddeeff";
  return {
      {"acquire", {"EVALSHA", fake_sha, "1", n, token, "5000"}},
      {"release", {"EVALSHA", fake_sha, "1", n, ch, token}},
      {"renew", {"EVALSHA", fake_sha, "1", n, "30000", "s", token}},
      {"force-unlock", {"EVALSHA", fake_sha, "1", n, ch, "0"}},
      {"fencing", {"EVALSHA", fake_sha, "2", n, l.token_key, token, "5000"}, need::fencing,
       without_fencing},
      {"publish", {"PUBLISH", ch, "0"}, need::wakeup, without_publish},
      {"wait", {"SUBSCRIBE", ch}, need::wakeup, without_subscribe},
  };
}

// The fair lock on the reentrant lock's sample name: its queue and deadlines are keys of every call,
// a release hands the lock over on the head waiter's own channel `<channel>:<owner field>`.
std::vector<step> fair_steps(const context& cx, const client& c) {
  const std::string& n = cx.sample;
  const auto l = describe(lock_kind::fair, n);
  const std::string& ch = l.channel();
  const std::string &queue = l.queue_key, &deadlines = l.deadlines_key;
  std::string field = c.id() + ":1";
  std::string now = "1700000000000";
  return {
      {"acquire", {"EVALSHA", fake_sha, "3", n, queue, deadlines, "5000", field, "30000", now, "1", ch, "publish"}},
      {"release",
       {"EVALSHA", fake_sha, "4", n, queue, deadlines, l.latch_key(request_id), ch, "publish", "30000", field, "1", "0",
        "30000", now}},
      {"give-up", {"EVALSHA", fake_sha, "3", n, queue, deadlines, field, "30000", ch, "publish"}},
      {"renew", {"EVALSHA", fake_sha, "1", n, "30000", "h", field}},
      {"force-unlock", {"EVALSHA", fake_sha, "3", n, queue, deadlines, ch, "0", now}},
      {"fencing",
       {"EVALSHA", fake_sha, "4", n, queue, deadlines, l.token_key, "5000", field, "30000", now,
        "1", ch, "publish"},
       need::fencing, without_fencing},
      {"hand-off", {"PUBLISH", l.waiter_channel(field), "0"}, need::wakeup, without_handoff},
      {"wait", {"SUBSCRIBE", l.waiter_channel(field)}, need::wakeup, without_subscribe},
  };
}

// The read-write lock on the reentrant lock's sample name: a read acquisition also writes its
// timeout key `{name}:<owner field>:rwlock_timeout:<n>` from inside the script (not among its KEYS,
// so only this step shows a refusal of it).
std::vector<step> rw_steps(const context& cx, const client& c) {
  const std::string& n = cx.sample;
  const auto l = describe(lock_kind::read, n);
  const std::string& ch = l.channel();
  std::string field = c.id() + ":1";
  std::string timeout_key = l.read_timeout_key(field, 1);
  return {
      {"acquire", {"EVALSHA", fake_sha, "1", n, "5000", field}},
      {"read timeout key", {"SET", timeout_key, "1", "PX", "5000"}},
      {"release", {"EVALSHA", fake_sha, "2", n, l.latch_key(request_id), ch, "publish", field, "1", "0", "30000"}},
      {"renew", {"EVALSHA", fake_sha, "1", n, "30000", "r", field}},
      {"force-unlock", {"EVALSHA", fake_sha, "1", n, ch, "1"}},
      {"fencing", {"EVALSHA", fake_sha, "2", n, l.token_key, "5000", field}, need::fencing,
       without_fencing},
      {"publish", {"PUBLISH", ch, "0"}, need::wakeup, without_publish},
      {"wait", {"SUBSCRIBE", ch}, need::wakeup, without_subscribe},
  };
}

// The semaphore and the count-down latch on the reentrant lock's sample name (src/lua/semaphore_*.lua,
// latch_*.lua): their request latches are keys, their channels arguments.
std::vector<step> counting_steps(const context& cx, lock_kind kind) {
  const std::string& n = cx.sample;
  const auto l = describe(kind, n);
  const std::string& ch = l.channel();
  const std::string latch = l.latch_key(request_id);
  std::vector<step> s;
  if (kind == lock_kind::semaphore)
    s = {{"acquire", {"EVALSHA", fake_sha, "2", n, latch, "1", "60000"}},
         {"release", {"EVALSHA", fake_sha, "2", n, latch, ch, "1", "60000", "publish"}},
         {"set", {"EVALSHA", fake_sha, "1", n, ch, "1", "0", "publish"}},
         {"drain", {"EVALSHA", fake_sha, "1", n}}};
  else
    s = {{"set", {"EVALSHA", fake_sha, "2", n, latch, ch, "1", "0", "60000", "publish"}},
         {"count-down", {"EVALSHA", fake_sha, "2", n, latch, ch, "60000", "publish"}},
         {"await", {"EVALSHA", fake_sha, "1", n}},
         {"delete", {"EVALSHA", fake_sha, "1", n, ch, "publish"}}};
  s.push_back({"publish", {"PUBLISH", ch, "0"}, need::wakeup, without_publish});
  s.push_back({"wait", {"SUBSCRIBE", ch}, need::wakeup, without_subscribe});
  return s;
}

const char* const keyspace_query_step =
    "CONFIG GET notify-keyspace-events (mutex waiters then do without keyspace events)";

std::vector<step> other_steps(const context& cx, const client& c) {
  const std::string& n = cx.sample;
  const auto l = describe(lock_kind::reentrant, n);
  std::vector<step> s = {
      {"HGET", {"HGET", n, c.id() + ":1"}},
      {"GET", {"GET", n}},
      {"EXISTS", {"EXISTS", n}},
      {"PTTL", {"PTTL", n}},
      // The fallback when EVALSHA answers NOSCRIPT (a fresh or restarted server), with the largest key
      // set (a release's: the name and the latch).
      {"EVAL (after NOSCRIPT)",
       {"EVAL", "return 0", "2", n, l.latch_key("0"), l.channel(), "0", "30000", "f", "1", "0", "30000"}},
      {"PING", {"PING"}},
      {"TIME (the first fencing token of a name)", {"TIME"}, need::fencing, without_fencing, "the TIME command"},
      {"CLIENT SETNAME (connections are then unnamed in CLIENT LIST)", {"CLIENT", "SETNAME", "redlease"},
       need::optional},
      {keyspace_query_step, {"CONFIG", "GET", "notify-keyspace-events"}, need::optional},
  };
  if (cx.cfg.database != 0) s.push_back({"SELECT", {"SELECT", std::to_string(cx.cfg.database)}});
  return s;
}

// ACL DRYRUN of each step; empty text when permitted.
std::vector<step_result> dryrun(client& c, const context& cx, const std::vector<step>& steps) {
  std::vector<step_result> out;
  for (const auto& s : steps) {
    std::vector<std::string> cmd{"ACL", "DRYRUN", cx.checked};
    cmd.insert(cmd.end(), s.args.begin(), s.args.end());
    std::error_code ec;
    auto rep = c.command(cmd, ec);
    step_result res{s.what, true, s.level, {}, s.without, s.grant};
    if (ec) {
      res.ok = false;
      res.text = error_text(rep, ec);
    } else if (!(rep.is_string() && rep.str == "OK")) {
      res.ok = false;
      res.text = rep.str;  // "This user has no permissions to access the '...' key"
    }
    out.push_back(std::move(res));
  }
  return out;
}

// Refused steps, those refused for the same reason named together: "acquire, release: <reason>".
using refusals = std::vector<std::pair<std::string, std::string>>;  // reason → steps

void add_refusal(refusals& into, const std::string& reason, const std::string& what) {
  auto it = std::find_if(into.begin(), into.end(), [&](const auto& p) { return p.first == reason; });
  if (it == into.end()) into.emplace_back(reason, what);
  else it->second += ", " + what;
}

std::string join(const refusals& v) {
  std::string out;
  for (const auto& [reason, steps] : v) out += (out.empty() ? "" : "; ") + steps + ": " + reason;
  return out;
}


const std::string wakeup_what = "the channels waiters listen on, to wake them at once";

const std::string fencing_what = "the fencing token keys";

// One check's line from its steps' results. A refused required step is a FAIL, or with `kind` (a
// kind the deployment may not use: "the fair lock") a WARN naming it; refused wake-up and fencing
// steps are a WARN saying what the locks do without them; refused optional ones are noted.
void report_group(const context& cx, report& r, const std::string& check, const std::string& sample,
                  const std::vector<step_result>& res, const std::string& ok_detail, const std::string& kind = {}) {
  refusals required, degraded, optional;
  std::vector<std::string> effects, grants;
  std::string advice, other_advice;
  for (const auto& x : res) {
    if (x.ok) continue;
    const bool partial = x.level == need::wakeup || x.level == need::fencing;
    add_refusal(x.level == need::required ? required : partial ? degraded : optional, x.text, x.what);
    if (x.level == need::required && advice.empty()) advice = advice_for(cx, {}, x.text, cx.checked);
    if (!partial) continue;
    add_effect(effects, x.without);
    if (contains(x.text, "no permissions") || contains(x.text, "NOPERM"))
      add_effect(grants, !x.grant.empty() ? x.grant : x.level == need::wakeup ? wakeup_what : fencing_what);
    else if (other_advice.empty())
      other_advice = advice_for(cx, {}, x.text, cx.checked);  // PUBLISH renamed away: "not found"
  }
  std::string degraded_advice = other_advice;
  if (!grants.empty()) {
    std::string what;
    for (std::size_t i = 0; i < grants.size(); ++i) what += (i ? " and " : "") + grants[i];
    degraded_advice += (degraded_advice.empty() ? "" : "; ") + acl_advice(cx, cx.checked, what);
  }
  if (!required.empty()) {
    std::string detail = "refused on " + sample + ": " + join(required);
    if (!degraded.empty()) detail += "; also refused (locks work without them): " + join(degraded);
    if (!optional.empty()) detail += "; optional, refused: " + join(optional);
    if (kind.empty())
      r.fail(check, detail, advice);
    else
      r.warn(check, kind + " cannot be used by user " + cx.checked + " (the other kinds are not affected): " + detail,
             advice);
  } else if (!degraded.empty()) {
    std::string detail = "refused on " + sample + ": " + join(degraded) + "; " + wakeup_effects(effects);
    if (!optional.empty()) detail += "; optional, refused: " + join(optional);
    r.warn(check, detail, degraded_advice);
  } else if (!optional.empty()) {
    r.ok(check, ok_detail + "; optional, refused: " + join(optional));
  } else {
    r.ok(check, ok_detail);
  }
}

// notify-keyspace-events as the library reads it: mutex waiters also listen on the key's keyspace
// channel when K and (A or g and x) are on.
bool keyspace_on(std::string_view flags) {
  bool k = contains(flags, "K");
  bool all = contains(flags, "A");
  return k && (all || (contains(flags, "g") && contains(flags, "x")));
}

// True if the server sends the keyspace events mutex waiters listen for (as far as `c` can read it).
bool server_keyspace_on(client& c) {
  std::error_code ec;
  auto ks = c.command({"CONFIG", "GET", "notify-keyspace-events"}, ec);
  return !ec && ks.is_array() && ks.elements.size() == 2 && keyspace_on(ks.elements[1].str);
}

std::string keyspace_channel(const context& cx) {
  return describe(lock_kind::mutex, cx.mutex_sample).keyspace_channel(cx.cfg.database);
}

const std::string without_keyspace =
    "keyspace events are on, and mutex waiters, refused SUBSCRIBE on the keyspace channel, poll with backoff "
    "(10 ms doubling to 500 ms) instead of being woken at once";

void check_permissions_dryrun(client& c, context& cx, report& r) {
  auto lr = dryrun(c, cx, lock_steps(cx, c));
  auto mr = dryrun(c, cx, mutex_steps(cx));
  auto fr = dryrun(c, cx, fair_steps(cx, c));
  auto rr = dryrun(c, cx, rw_steps(cx, c));
  auto sr = dryrun(c, cx, counting_steps(cx, lock_kind::semaphore));
  auto tr = dryrun(c, cx, counting_steps(cx, lock_kind::latch));
  auto orr = dryrun(c, cx, other_steps(cx, c));
  // Mutex waiters also subscribe to the key's keyspace channel when the server sends keyspace events
  // and the user may read that it does (the library asks; refused, it does without).
  auto query = std::find_if(orr.begin(), orr.end(), [](const step_result& x) { return x.what == keyspace_query_step; });
  if (query != orr.end() && query->ok && server_keyspace_on(c)) {
    std::string ch = keyspace_channel(cx);
    auto kr = dryrun(c, cx, {{"wait on " + ch, {"SUBSCRIBE", ch}, need::wakeup, without_keyspace}});
    cx.keyspace = !kr.front().ok;  // the advice then grants it too
    mr.push_back(std::move(kr.front()));
  }
  report_group(cx, r, "acl.lock", cx.sample, lr,
               "reentrant lock on " + cx.sample +
                   ": acquire, release, renew, force-unlock, fencing, publish, wait permitted");
  report_group(cx, r, "acl.mutex", cx.mutex_sample, mr,
               "mutex on " + cx.mutex_sample + ": acquire, release, renew, force-unlock, fencing, publish, wait permitted");
  // The other kinds: a deployment that does not use them works without them (WARN, naming the kind).
  report_group(cx, r, "acl.fair", cx.sample, fr,
               "fair lock on " + cx.sample +
                   ": acquire, release, give-up, renew, force-unlock, fencing, hand-off, wait permitted",
               "the fair lock");
  report_group(cx, r, "acl.rwlock", cx.sample, rr,
               "read-write lock on " + cx.sample +
                   ": acquire, read timeout key, release, renew, force-unlock, fencing, publish, wait permitted",
               "the read-write lock");
  report_group(cx, r, "acl.semaphore", cx.sample, sr,
               "semaphore on " + cx.sample + ": acquire, release, set, drain, publish, wait permitted", "the semaphore");
  report_group(cx, r, "acl.latch", cx.sample, tr,
               "count-down latch on " + cx.sample + ": set, count-down, await, delete, publish, wait permitted",
               "the count-down latch");
  report_group(cx, r, "acl.commands", cx.sample, orr, "HGET, GET, EXISTS, PTTL, EVAL, PING, TIME permitted");
}

// The live probe: take and release each kind of lock on the sample name with a short fixed lease,
// publish on and subscribe to its channels, with the library itself. The library's errors carry
// the server's words (in what() and last_error_text()), and their typed cause picks the advice.
void check_permissions_live(client& c, context& cx, report& r) {
  const std::string lock_ch = describe(lock_kind::reentrant, cx.sample).channel();
  const std::string mutex_ch = describe(lock_kind::mutex, cx.mutex_sample).channel();
  // One step: false (and a FAIL line with the library's message) if it throws.
  auto step = [&](const std::string& check, const std::string& doing, const std::function<void()>& run) {
    try {
      run();
      return true;
    } catch (const redlease::error& e) {
      r.fail(check, doing + ": " + e.what(), advice_for(cx, e.code(), last_error_text()));
      return false;
    } catch (const std::exception& e) {
      r.fail(check, doing + ": " + e.what(), "");
      return false;
    }
  };
  auto busy = [&](const std::string& check, const std::string& name) {
    r.warn(check, name + " is held by someone else: not probed", "run again, or give another pattern");
  };
  // A release that failed leaves the probe's lock held for up to its 5 s lease: force-unlock it
  // (it needs only the name and the channel argument), and say whether that worked.
  auto clean_up = [&](detail::lock_handle& l, const std::string& name, const std::string& check) {
    std::error_code ec;
    bool gone = l.force_unlock(ec);
    if (ec)
      r.warn(check + ".cleanup", "force-unlock " + name + " failed too: " + ec.message() +
                                     (last_error_text().empty() ? "" : " (" + last_error_text() + ")") +
                                     "; it stays held until its 5 s lease ends",
             "");
    else
      r.ok(check + ".cleanup", std::string(gone ? "force-unlocked " : "nothing left of ") + name +
                                   " after the failed release");
  };
  // Takes and releases one kind of lock on `name` (`what`: "the reentrant lock"; `keys`: what its
  // release touches), with a client per kind: nothing one probe leaves behind affects the other.
  auto take_and_release = [&](const std::string& check, const std::string& name, const std::string& what,
                              const std::string& keys, const std::function<detail::lock_handle(client&)>& make) {
    client own{cx.cfg};
    detail::lock_handle l = make(own);
    bool held = false;
    if (step(check + ".acquire", "acquire " + name, [&] { held = l.try_lock(2s, 5s); })) {
      if (!held) busy(check + ".acquire", name);
      else r.ok(check + ".acquire", "took " + what + " " + name + " (5 s lease)");
    }
    if (held) {
      if (step(check + ".release", "release " + name + " (" + keys + ")", [&] { l.unlock(); }))
        r.ok(check + ".release", "released it");
      else
        clean_up(l, name, check + ".release");
    }
  };
  take_and_release("probe.lock", cx.sample, "the reentrant lock",
                   "keys " + cx.sample + ", " + describe(lock_kind::reentrant, cx.sample).latch_key("<request>"),
                   [&](client& own) { return detail::lock_handle(own.lock(cx.sample)); });
  take_and_release("probe.mutex", cx.mutex_sample, "the mutex", "key " + cx.mutex_sample,
                   [&](client& own) { return detail::lock_handle(own.mutex(cx.mutex_sample)); });
  // A refused wake-up step (no channel permission, or the command renamed away) is a WARN: the
  // library does without it. Anything else (a timeout, a lost connection) is a FAIL.
  auto refused = [](std::error_code ec) { return ec == errc::no_permission || ec == errc::unknown_command; };
  auto wakeup_advice = [&](std::error_code ec, const std::string& text) {
    return ec == errc::no_permission ? acl_advice(cx, cx.user, wakeup_what) : advice_for(cx, ec, text);
  };
  // Publishing: what the release scripts and force-unlock do (a "0" on a channel nobody uses). The
  // scripts skip a refused PUBLISH, so the releases above pass without it: it is checked here.
  {
    std::string failed;
    bool all_refused = true;
    std::error_code first;
    for (const auto& ch : {lock_ch, mutex_ch}) {
      std::error_code ec;
      auto rep = c.command({"PUBLISH", ch, "0"}, ec);
      if (!ec) continue;
      failed += (failed.empty() ? "" : "; ") + ch + ": " + error_text(rep, ec);
      all_refused = all_refused && refused(ec);
      if (!first) first = ec;
    }
    if (failed.empty())
      r.ok("probe.publish", "published on " + lock_ch + " and " + mutex_ch);
    else if (all_refused)
      r.warn("probe.publish", "cannot publish on " + failed + "; " + wakeup_effects({without_publish}),
             wakeup_advice(first, failed));
    else
      r.fail("probe.publish", "cannot publish on " + failed, advice_for(cx, first, failed));
  }
  // Waiting: the channels at once (the keyspace channel too when mutex waiters would use it). A
  // refused SUBSCRIBE fails at once, with the server's words.
  std::vector<std::pair<std::string, std::string>> channels{{lock_ch, without_subscribe},
                                                            {mutex_ch, without_subscribe}};
  if (server_keyspace_on(c)) channels.emplace_back(keyspace_channel(cx), without_keyspace);
  auto sub = [&c](std::string ch) -> std::pair<std::error_code, std::string> {
    std::error_code ec;
    auto s = c.subscribe(ch, [](std::string_view, std::string_view) {}, ec);
    return {ec, ec ? last_error_text() : std::string{}};  // this thread's words
  };
  std::vector<std::future<std::pair<std::error_code, std::string>>> pending;
  for (const auto& ch : channels) pending.push_back(std::async(std::launch::async, sub, ch.first));
  std::string failed, names;
  std::vector<std::string> effects;
  bool all_refused = true;
  std::error_code first;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    auto [ec, words] = pending[i].get();
    names += (names.empty() ? "" : (i + 1 == channels.size() ? " and " : ", ")) + channels[i].first;
    if (!ec) continue;
    failed += (failed.empty() ? "" : "; ") + channels[i].first + ": " + (words.empty() ? ec.message() : words);
    all_refused = all_refused && refused(ec);
    if (!first) first = ec;
    add_effect(effects, channels[i].second);
    if (i == 2 && ec == errc::no_permission) cx.keyspace = true;  // the advice grants it too
  }
  if (failed.empty())
    r.ok("probe.wait", "subscribed to " + names);
  else if (all_refused)
    r.warn("probe.wait", "cannot subscribe to " + failed + "; " + wakeup_effects(effects),
           wakeup_advice(first, failed));
  else
    r.fail("probe.wait", "cannot subscribe to " + failed, advice_for(cx, first, failed));

  // Fencing and the other kinds are not taken live: a token key lives 7 days, and their keys are
  // more than the sample names the probe may touch. Commands that write nothing show whether the
  // user may use those keys (EXISTS: read access) and channels (PUBLISH "0", on channels nobody
  // uses), and TIME (a name's first token) is called as is. A refusal is a WARN saying what it breaks.
  struct item {
    std::string what;
    std::vector<std::string> args;
    std::string without;
  };
  const std::string& n = cx.sample;
  const std::string field = "redlease-doctor:1";  // an owner field no client has
  const auto reentrant = describe(lock_kind::reentrant, n), fair = describe(lock_kind::fair, n),
             mutex = describe(lock_kind::mutex, cx.mutex_sample), rw = describe(lock_kind::read, n),
             semaphore = describe(lock_kind::semaphore, n), latch = describe(lock_kind::latch, n);
  const std::string rw_timeout = rw.read_timeout_key(field, 1);
  const std::string no_fair = "the fair lock cannot be used (its scripts declare the queue and the deadlines)";
  const std::string no_read = "read locks cannot be taken (the acquire script writes the timeout key)";
  struct kind_items {
    std::string check;
    bool a_kind;  // a refused key breaks a kind (the others work), not a feature of every kind
    std::vector<item> items;
  };
  const std::vector<kind_items> kinds = {
      {"probe.fencing", false,
       {{"token key " + reentrant.token_key, {"EXISTS", reentrant.token_key}, without_fencing},
        {"token key " + mutex.token_key, {"EXISTS", mutex.token_key}, without_fencing},
        {"token key " + rw.token_key, {"EXISTS", rw.token_key}, without_fencing},
        {"TIME", {"TIME"}, without_fencing}}},
      {"probe.fair", true,
       {{"queue " + fair.queue_key, {"EXISTS", fair.queue_key}, no_fair},
        {"deadlines " + fair.deadlines_key, {"EXISTS", fair.deadlines_key}, no_fair},
        {"hand-off channel " + fair.waiter_channel(field), {"PUBLISH", fair.waiter_channel(field), "0"},
         without_handoff}}},
      {"probe.rwlock", true,
       {{"read timeout key " + rw_timeout, {"EXISTS", rw_timeout}, no_read},
        {"channel " + rw.channel(), {"PUBLISH", rw.channel(), "0"},
         without_publish}}},
      // A "0" on the semaphore's channel fits no waiter; on the latch's, its waiters check and wait on.
      {"probe.semaphore", false,
       {{"channel " + semaphore.channel(), {"PUBLISH", semaphore.channel(), "0"}, without_publish}}},
      {"probe.latch", false, {{"channel " + latch.channel(), {"PUBLISH", latch.channel(), "0"}, without_publish}}},
  };
  for (const auto& [check, a_kind, items] : kinds) {
    std::string failed, names, fix;
    std::vector<std::string> effects;
    bool kind_broken = false;
    for (const auto& it : items) {
      names += (names.empty() ? "" : ", ") + it.what;
      std::error_code ec;
      auto rep = c.command(it.args, ec);
      if (!ec) continue;
      std::string text = error_text(rep, ec);
      failed += (failed.empty() ? "" : "; ") + it.what + ": " + text;
      add_effect(effects, it.without);
      kind_broken = kind_broken || (a_kind && it.args.front() == "EXISTS");
      if (fix.empty())
        fix = ec == errc::no_permission ? acl_advice(cx, cx.user, "the keys and channels of every kind")
                                        : advice_for(cx, ec, text);
    }
    if (failed.empty())
      r.ok(check, "may use " + names);
    else
      r.warn(check, "refused: " + failed + "; " + wakeup_effects(effects, kind_broken ? "the other kinds work" : "locks work"),
             fix);
  }
}

}  // namespace

void check_permissions(client& c, context& cx, report& r) {
  std::string reason;
  if (cx.version && (*cx.version)[0] < 7) {
    reason = "Redis " + std::to_string((*cx.version)[0]) + "." + std::to_string((*cx.version)[1]) +
             " has no ACL DRYRUN";
  } else {
    // Any answer but an error means DRYRUN works (the user may still lack PING: checked below).
    std::error_code ec;
    auto rep = c.command({"ACL", "DRYRUN", cx.checked, "PING"}, ec);
    std::string text = error_text(rep, ec);
    if (ec && contains(text, "User '") && contains(text, "not found")) {
      r.fail("acl", "ACL DRYRUN " + cx.checked + ": " + text, "name an existing user (ACL USERS) with --acl-user");
      return;
    }
    if (ec) reason = "ACL DRYRUN refused: " + text;
  }
  if (reason.empty()) {
    r.ok("acl", "user " + cx.checked + ", sample names " + cx.sample +
                    (cx.mutex_sample != cx.sample ? " and " + cx.mutex_sample : "") + " (pattern " + cx.opts.pattern +
                    "), checked with ACL DRYRUN");
    check_permissions_dryrun(c, cx, r);
    if (cx.opts.probe) check_permissions_live(cx.keyed != nullptr ? *cx.keyed : c, cx, r);
  } else {
    std::string other = cx.checked != cx.user ? " (not user " + cx.checked + ": only DRYRUN checks another user)" : "";
    r.warn("acl", reason + "; probing live instead: taking and releasing " + cx.sample +
                      (cx.mutex_sample != cx.sample ? " and " + cx.mutex_sample : "") + " (pattern " + cx.opts.pattern +
                      ") as user " + cx.user + other,
           "for a check that touches no key (Redis 7), connect as a user allowed ACL DRYRUN and name the user "
           "to check: --acl-user " + cx.checked);
    // On a cluster the probe's locks go to their slot's master, through the client that routes.
    check_permissions_live(cx.keyed != nullptr ? *cx.keyed : c, cx, r);
  }
}


}  // namespace redlease::cli::checkup
