// SPDX-License-Identifier: MIT
// Redisson's fair and read-write lock scripts, restated from redisson-protocol-2.md (§1.3-§1.6,
// §2.2-§2.5, §10) as plain Lua. Deliberately independent of src/lua: this is the "other client".
#include "redisson_peer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <utility>

namespace redlease::test {
namespace {

// PURGE(Q, Z, now) of §0: dead heads only; a head without a score stops the loop.
#define REDISSON_PURGE(now) \
  "while true do\n" \
  "  local h = redis.call('lindex', KEYS[2], 0)\n" \
  "  if h == false then break end\n" \
  "  local s = redis.call('zscore', KEYS[3], h)\n" \
  "  if s == false or tonumber(s) > tonumber(" now ") then break end\n" \
  "  redis.call('zrem', KEYS[3], h)\n" \
  "  redis.call('lpop', KEYS[2])\n" \
  "end\n"

// Steps 2-3 shared by modes A and B; W is the ARGV holding the allowance.
#define REDISSON_FAIR_TAKE(W) \
  "if redis.call('exists', KEYS[1]) == 0 and (redis.call('exists', KEYS[2]) == 0\n" \
  "    or redis.call('lindex', KEYS[2], 0) == ARGV[2]) then\n" \
  "  redis.call('lpop', KEYS[2])\n" \
  "  redis.call('zrem', KEYS[3], ARGV[2])\n" \
  "  local ms = redis.call('zrange', KEYS[3], 0, -1)\n" \
  "  for i = 1, #ms do redis.call('zincrby', KEYS[3], -tonumber(" W "), ms[i]) end\n" \
  "  redis.call('hset', KEYS[1], ARGV[2], 1)\n" \
  "  redis.call('pexpire', KEYS[1], ARGV[1])\n" \
  "  return nil\n" \
  "end\n" \
  "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then\n" \
  "  redis.call('hincrby', KEYS[1], ARGV[2], 1)\n" \
  "  redis.call('pexpire', KEYS[1], ARGV[1])\n" \
  "  return nil\n" \
  "end\n"

// §1.3 mode A: KEYS [N, Q, Z], ARGV [lease, O, now, W].
const char* const fair_try_once_lua = REDISSON_PURGE("ARGV[3]") REDISSON_FAIR_TAKE("ARGV[4]") "return 1\n";

// §1.4 mode B: KEYS [N, Q, Z], ARGV [lease, O, W, now].
const char* const fair_queueing_lua = REDISSON_PURGE("ARGV[4]") REDISSON_FAIR_TAKE("ARGV[3]")
    "if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then\n"
    "  return math.max(0, redis.call('pttl', KEYS[1]))\n"
    "end\n"
    "local last = redis.call('lindex', KEYS[2], -1)\n"
    "local base\n"
    "local ls = false\n"
    "if last ~= false and last ~= ARGV[2] then ls = redis.call('zscore', KEYS[3], last) end\n"
    "if ls ~= false then base = tonumber(ls) - tonumber(ARGV[4]) else base = redis.call('pttl', KEYS[1]) end\n"
    "local deadline = base + tonumber(ARGV[3]) + tonumber(ARGV[4])\n"
    "if redis.call('zadd', KEYS[3], deadline, ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]) end\n"
    "return base\n";

// §1.5 unlock: KEYS [N, Q, Z, C, latch], ARGV ["0", internalLease, O, now, PUB, latchTtl].
const char* const fair_unlock_lua =
    "local v = redis.call('get', KEYS[5])\n"
    "if v ~= false then return tonumber(v) end\n" REDISSON_PURGE("ARGV[4]")
    "if redis.call('exists', KEYS[1]) == 0 then\n"
    "  local h = redis.call('lindex', KEYS[2], 0)\n"
    "  if h ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. h, ARGV[1]) end\n"
    "  redis.call('set', KEYS[5], 1, 'px', ARGV[6])\n"
    "  return 1\n"
    "end\n"
    "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end\n"
    "local c = redis.call('hincrby', KEYS[1], ARGV[3], -1)\n"
    "if c > 0 then\n"
    "  redis.call('pexpire', KEYS[1], ARGV[2])\n"
    "  redis.call('set', KEYS[5], 0, 'px', ARGV[6])\n"
    "  return 0\n"
    "end\n"
    "redis.call('del', KEYS[1])\n"
    "redis.call('set', KEYS[5], 1, 'px', ARGV[6])\n"
    "local h = redis.call('lindex', KEYS[2], 0)\n"
    "if h ~= false then redis.call(ARGV[5], KEYS[4] .. ':' .. h, ARGV[1]) end\n"
    "return 1\n";

// §1.6 acquireFailed: KEYS [Q, Z], ARGV [O, W'].
const char* const fair_acquire_failed_lua =
    "local q = redis.call('lrange', KEYS[1], 0, -1)\n"
    "local pos = nil\n"
    "for i = 1, #q do if q[i] == ARGV[1] then pos = i break end end\n"
    "if pos ~= nil then\n"
    "  for i = pos + 1, #q do redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), q[i]) end\n"
    "end\n"
    "redis.call('zrem', KEYS[2], ARGV[1])\n"
    "redis.call('lrem', KEYS[1], 0, ARGV[1])\n";

// §2.2 read acquire: KEYS [N, TP], ARGV [lease, O, O:write].
const char* const read_acquire_lua =
    "local m = redis.call('hget', KEYS[1], 'mode')\n"
    "if m == false then\n"
    "  redis.call('hset', KEYS[1], 'mode', 'read')\n"
    "  redis.call('hset', KEYS[1], ARGV[2], 1)\n"
    "  redis.call('set', KEYS[2] .. ':1', 1)\n"
    "  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])\n"
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"
    "  return nil\n"
    "end\n"
    "if m == 'read' or (m == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then\n"
    "  local i = redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
    "  local k = KEYS[2] .. ':' .. i\n"
    "  redis.call('set', k, 1)\n"
    "  redis.call('pexpire', k, ARGV[1])\n"
    "  local t = redis.call('pttl', KEYS[1])\n"
    "  redis.call('pexpire', KEYS[1], math.max(t, tonumber(ARGV[1])))\n"
    "  return nil\n"
    "end\n"
    "return redis.call('pttl', KEYS[1])\n";

// §2.3 read unlock: KEYS [N, RW, TP, KP, latch], ARGV ["0", O, PUB, latchTtl].
const char* const read_unlock_lua =
    "local v = redis.call('get', KEYS[5])\n"
    "if v ~= false then return tonumber(v) end\n"
    "local m = redis.call('hget', KEYS[1], 'mode')\n"
    "if m == false then\n"
    "  redis.call(ARGV[3], KEYS[2], ARGV[1])\n"
    "  redis.call('set', KEYS[5], 1, 'px', ARGV[4])\n"
    "  return nil\n"
    "end\n"
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end\n"
    "local c = redis.call('hincrby', KEYS[1], ARGV[2], -1)\n"
    "if c == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end\n"
    "redis.call('del', KEYS[3] .. ':' .. (c + 1))\n"
    "if redis.call('hlen', KEYS[1]) > 1 then\n"
    "  local max = -3\n"
    "  local fs = redis.call('hkeys', KEYS[1])\n"
    "  for _, f in ipairs(fs) do\n"
    "    local n = tonumber(redis.call('hget', KEYS[1], f))\n"
    "    if type(n) == 'number' then\n"
    "      for j = n, 1, -1 do\n"
    "        local t = redis.call('pttl', KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. j)\n"
    "        max = math.max(t, max)\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  if max > 0 then\n"
    "    redis.call('pexpire', KEYS[1], max)\n"
    "    redis.call('set', KEYS[5], 0, 'px', ARGV[4])\n"
    "    return 0\n"
    "  end\n"
    "  if m == 'write' then\n"
    "    redis.call('set', KEYS[5], 0, 'px', ARGV[4])\n"
    "    return 0\n"
    "  end\n"
    "end\n"
    "redis.call('del', KEYS[1])\n"
    "redis.call(ARGV[3], KEYS[2], ARGV[1])\n"
    "redis.call('set', KEYS[5], 1, 'px', ARGV[4])\n"
    "return 1\n";

// §2.4 write acquire: KEYS [N], ARGV [lease, O:write].
const char* const write_acquire_lua =
    "local m = redis.call('hget', KEYS[1], 'mode')\n"
    "if m == false then\n"
    "  redis.call('hset', KEYS[1], 'mode', 'write')\n"
    "  redis.call('hset', KEYS[1], ARGV[2], 1)\n"
    "  redis.call('pexpire', KEYS[1], ARGV[1])\n"
    "  return nil\n"
    "end\n"
    "if m == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then\n"
    "  redis.call('hincrby', KEYS[1], ARGV[2], 1)\n"
    "  local t = redis.call('pttl', KEYS[1])\n"
    "  redis.call('pexpire', KEYS[1], t + tonumber(ARGV[1]))\n"
    "  return nil\n"
    "end\n"
    "return redis.call('pttl', KEYS[1])\n";

// §2.5 write unlock: KEYS [N, RW, latch], ARGV ["1", internalLease, O:write, PUB, latchTtl].
const char* const write_unlock_lua =
    "local v = redis.call('get', KEYS[3])\n"
    "if v ~= false then return tonumber(v) end\n"
    "local m = redis.call('hget', KEYS[1], 'mode')\n"
    "if m == false then\n"
    "  redis.call(ARGV[4], KEYS[2], ARGV[1])\n"
    "  redis.call('set', KEYS[3], 1, 'px', ARGV[5])\n"
    "  return nil\n"
    "end\n"
    "if m == 'write' then\n"
    "  if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end\n"
    "  local c = redis.call('hincrby', KEYS[1], ARGV[3], -1)\n"
    "  if c > 0 then\n"
    "    redis.call('pexpire', KEYS[1], ARGV[2])\n"
    "    redis.call('set', KEYS[3], 0, 'px', ARGV[5])\n"
    "    return 0\n"
    "  end\n"
    "  redis.call('hdel', KEYS[1], ARGV[3])\n"
    "  if redis.call('hlen', KEYS[1]) == 1 then\n"
    "    redis.call('del', KEYS[1])\n"
    "    redis.call(ARGV[4], KEYS[2], ARGV[1])\n"
    "  else\n"
    "    redis.call('hset', KEYS[1], 'mode', 'read')\n"
    "  end\n"
    "  redis.call('set', KEYS[3], 1, 'px', ARGV[5])\n"
    "  return 1\n"
    "end\n"
    "return nil\n";

#undef REDISSON_PURGE
#undef REDISSON_FAIR_TAKE

// Fixed seeds, one per thread, so that a run can be repeated; the ids stay distinct within a test
// process, which talks to its own servers.
std::mt19937_64& rng() {
  static std::atomic<std::uint64_t> next_seed{20261128};
  thread_local std::mt19937_64 g{next_seed.fetch_add(1)};
  return g;
}

std::string hex(std::uint64_t v, int digits) {
  static const char* d = "0123456789abcdef";
  std::string s(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i) {
    s[static_cast<std::size_t>(i)] = d[v & 0xf];
    v >>= 4;
  }
  return s;
}

std::string str(long long v) { return std::to_string(v); }

void check(const raw_reply& r, const char* what) {
  if (r.is_error()) throw std::runtime_error(std::string("redisson_peer ") + what + ": " + r.str);
}

using steady_clk = std::chrono::steady_clock;

long long elapsed_ms(steady_clk::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady_clk::now() - t0).count();
}

}  // namespace

redisson_peer::redisson_peer(std::string host, std::uint16_t port, std::string password, std::string client_id)
    : host_(std::move(host)),
      port_(port),
      password_(std::move(password)),
      client_id_(client_id.empty() ? new_client_id() : std::move(client_id)),
      cmd_(host_, port_, password_) {}

std::string redisson_peer::owner(long long thread_id) const { return client_id_ + ":" + str(thread_id); }

std::string redisson_peer::new_client_id() {
  std::uint64_t a = rng()(), b = rng()();
  a = (a & ~0xf000ULL) | 0x4000ULL;                      // version 4
  b = (b & ~(0xcULL << 60)) | (0x8ULL << 60);            // variant 10xx
  std::string h = hex(a, 16) + hex(b, 16);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" +
         h.substr(20, 12);
}

std::string redisson_peer::prefix_name(std::string_view prefix, std::string_view name) {
  std::string s(prefix);
  const bool tagged = name.find('{') != std::string_view::npos;
  s.append(tagged ? ":" : ":{").append(name);
  if (!tagged) s.push_back('}');
  return s;
}

std::string redisson_peer::suffix_name(std::string_view name, std::string_view suffix) {
  std::string s;
  if (name.find('{') != std::string_view::npos) {
    s.append(name).append(":");
  } else {
    s.append("{").append(name).append("}:");
  }
  s.append(suffix);
  return s;
}

long long redisson_peer::now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

raw_client redisson_peer::subscribe(const std::string& channel) {
  raw_client sub(host_, port_, password_);
  auto r = sub.command({"SUBSCRIBE", channel});
  if (!r.is_array()) throw std::runtime_error("redisson_peer: SUBSCRIBE failed: " + r.to_string());
  return sub;
}

bool redisson_peer::wait_message(raw_client& sub, long long ms) {
  // Java's semaphore wait: a message already delivered counts; 0 ms only looks (1 ms here, since a
  // zero socket timeout would mean "no timeout").
  sub.set_timeout(std::chrono::milliseconds(ms < 1 ? 1 : ms));
  try {
    for (;;) {
      auto m = sub.read_reply();
      if (m.is_array() && !m.elements.empty() && m.elements[0].str == "message") return true;
    }
  } catch (const timeout_error&) {
    return false;
  }
}

std::string redisson_peer::latch_key(const std::string& name) {
  return prefix_name("redisson_unlock_latch", name) + ":" + hex(rng()(), 16) + hex(rng()(), 16);
}

// ---- fair lock ------------------------------------------------------------------------------------

raw_reply redisson_peer::fair_acquire_try_once(const std::string& name, const std::string& owner,
                                               long long lease_ms, long long allowance_ms) {
  auto r = cmd_.command({"EVAL", fair_try_once_lua, "3", name, prefix_name("redisson_lock_queue", name),
                         prefix_name("redisson_lock_timeout", name), str(lease_ms), owner, str(now_ms()),
                         str(allowance_ms)});
  check(r, "fair try-once");
  return r;
}

raw_reply redisson_peer::fair_acquire_queueing(const std::string& name, const std::string& owner,
                                               long long lease_ms, long long allowance_ms) {
  auto r = cmd_.command({"EVAL", fair_queueing_lua, "3", name, prefix_name("redisson_lock_queue", name),
                         prefix_name("redisson_lock_timeout", name), str(lease_ms), owner, str(allowance_ms),
                         str(now_ms())});
  check(r, "fair queueing");
  return r;
}

void redisson_peer::fair_acquire_failed(const std::string& name, const std::string& owner, long long allowance_ms) {
  check(cmd_.command({"EVAL", fair_acquire_failed_lua, "2", prefix_name("redisson_lock_queue", name),
                      prefix_name("redisson_lock_timeout", name), owner, str(allowance_ms)}),
        "acquireFailed");
}

raw_reply redisson_peer::fair_unlock(const std::string& name, const std::string& owner, long long internal_lease_ms) {
  auto latch = latch_key(name);
  auto latch_ttl = 16'000 + static_cast<long long>(rng()() % 4'000);
  auto r = cmd_.command({"EVAL", fair_unlock_lua, "5", name, prefix_name("redisson_lock_queue", name),
                         prefix_name("redisson_lock_timeout", name), prefix_name("redisson_lock__channel", name),
                         latch, "0", str(internal_lease_ms), owner, str(now_ms()), "publish", str(latch_ttl)});
  check(r, "fair unlock");
  cmd_.command({"DEL", latch});
  return r;
}

bool redisson_peer::fair_try_lock(const std::string& name, const std::string& owner, long long lease_ms,
                                  long long wait_ms) {
  const long long lease = lease_ms > 0 ? lease_ms : 30'000;
  if (wait_ms == 0) return fair_acquire_try_once(name, owner, lease).is_nil();
  const auto t0 = steady_clk::now();
  const std::string channel = prefix_name("redisson_lock__channel", name) + ":" + owner;
  if (wait_ms < 0) {  // lock(): W = fairLockWaitTimeout, no acquireFailed
    if (fair_acquire_queueing(name, owner, lease, fair_lock_wait_timeout).is_nil()) return true;
    auto sub = subscribe(channel);
    for (;;) {
      auto r = fair_acquire_queueing(name, owner, lease, fair_lock_wait_timeout);
      if (r.is_nil()) return true;
      long long left = unbounded_cap_ms_ - elapsed_ms(t0);
      if (left <= 0) throw std::runtime_error("redisson_peer: lock() did not get " + name + " in time");
      wait_message(sub, r.integer >= 0 ? std::min(r.integer, left) : left);
    }
  }
  // tryLock(wait, lease): W = wait.
  if (fair_acquire_queueing(name, owner, lease, wait_ms).is_nil()) return true;
  if (wait_ms - elapsed_ms(t0) <= 0) {
    fair_acquire_failed(name, owner, wait_ms);
    return false;
  }
  auto sub = subscribe(channel);
  for (;;) {
    auto r = fair_acquire_queueing(name, owner, lease, wait_ms);
    if (r.is_nil()) return true;
    long long remaining = wait_ms - elapsed_ms(t0);
    if (remaining <= 0) {
      fair_acquire_failed(name, owner, wait_ms);
      return false;
    }
    wait_message(sub, (r.integer >= 0 && r.integer < remaining) ? r.integer : remaining);
    if (wait_ms - elapsed_ms(t0) <= 0) {
      fair_acquire_failed(name, owner, wait_ms);
      return false;
    }
  }
}

// ---- read-write lock ------------------------------------------------------------------------------

raw_reply redisson_peer::read_acquire(const std::string& name, const std::string& owner, long long lease_ms) {
  auto r = cmd_.command({"EVAL", read_acquire_lua, "2", name, suffix_name(name, owner) + ":rwlock_timeout",
                         str(lease_ms), owner, owner + ":write"});
  check(r, "read acquire");
  return r;
}

raw_reply redisson_peer::write_acquire(const std::string& name, const std::string& owner, long long lease_ms) {
  auto r = cmd_.command({"EVAL", write_acquire_lua, "1", name, str(lease_ms), owner + ":write"});
  check(r, "write acquire");
  return r;
}

raw_reply redisson_peer::read_unlock(const std::string& name, const std::string& owner) {
  auto latch = latch_key(name);
  auto latch_ttl = 16'000 + static_cast<long long>(rng()() % 4'000);
  std::string kp;
  if (name.find('{') == std::string::npos) kp.append("{");
  kp.append(name);
  if (name.find('{') == std::string::npos) kp.append("}");
  auto r = cmd_.command({"EVAL", read_unlock_lua, "5", name, prefix_name("redisson_rwlock", name),
                         suffix_name(name, owner) + ":rwlock_timeout", kp, latch, "0", owner, "publish",
                         str(latch_ttl)});
  check(r, "read unlock");
  cmd_.command({"DEL", latch});
  return r;
}

raw_reply redisson_peer::write_unlock(const std::string& name, const std::string& owner, long long internal_lease_ms) {
  auto latch = latch_key(name);
  auto latch_ttl = 16'000 + static_cast<long long>(rng()() % 4'000);
  auto r = cmd_.command({"EVAL", write_unlock_lua, "3", name, prefix_name("redisson_rwlock", name), latch, "1",
                         str(internal_lease_ms), owner + ":write", "publish", str(latch_ttl)});
  check(r, "write unlock");
  cmd_.command({"DEL", latch});
  return r;
}

bool redisson_peer::rw_lock(bool write, const std::string& name, const std::string& owner, long long lease_ms,
                            long long wait_ms) {
  const long long lease = lease_ms > 0 ? lease_ms : 30'000;
  auto attempt = [&] { return write ? write_acquire(name, owner, lease) : read_acquire(name, owner, lease); };
  const auto t0 = steady_clk::now();
  if (attempt().is_nil()) return true;
  if (wait_ms == 0) return false;
  const long long limit = wait_ms > 0 ? wait_ms : unbounded_cap_ms_;
  if (limit - elapsed_ms(t0) <= 0) return false;
  auto sub = subscribe(prefix_name("redisson_rwlock", name));
  for (;;) {
    auto r = attempt();
    if (r.is_nil()) return true;
    long long remaining = limit - elapsed_ms(t0);
    if (remaining <= 0) {
      if (wait_ms < 0) throw std::runtime_error("redisson_peer: lock() did not get " + name + " in time");
      return false;
    }
    wait_message(sub, (r.integer >= 0 && r.integer < remaining) ? r.integer : remaining);
  }
}

bool redisson_peer::read_lock(const std::string& name, const std::string& owner, long long lease_ms,
                              long long wait_ms) {
  return rw_lock(false, name, owner, lease_ms, wait_ms);
}

bool redisson_peer::write_lock(const std::string& name, const std::string& owner, long long lease_ms,
                               long long wait_ms) {
  return rw_lock(true, name, owner, lease_ms, wait_ms);
}

}  // namespace redlease::test
