-- Acquire a fair (FIFO) lock, Redisson's RedissonFairLock layout: one attempt that, when it fails,
-- queues the caller (Redisson's "queueing" mode B), after purging dead waiters from the queue head.
-- KEYS[1] lock name N (a hash: owner field -> hold count), KEYS[2] queue (redisson_lock_queue:{N}, a
-- list of owners, head first), KEYS[3] deadlines (redisson_lock_timeout:{N}, a zset: owner -> epoch ms
-- after which that waiter counts as dead)
-- ARGV[1] lease in ms, ARGV[2] owner field "<client-uuid>:<owner-id>", ARGV[3] the caller's allowance W
-- in ms (its wait, or 300000 for an unbounded wait; the same value on every call of one wait),
-- ARGV[4] now (the client's epoch ms), ARGV[5] "1": queue the caller if it does not get the lock, "0":
-- try once (the queue is left as it is), ARGV[6] per-waiter channel prefix (redisson_lock__channel:{N}),
-- ARGV[7] publish command ("publish" or "spublish")
-- Returns nil when acquired (or re-entered). Otherwise the most ms to wait before calling again
-- (always >= 1), or -1 when the lock's key has no expiry (wait for a message only): as an integer
-- when the caller is at the head of the queue (or not queued), as a one-element array {t} when it
-- is queued behind another waiter. Only the head is sent "0" on ARGV[6]..":"..ARGV[2] when the lock
-- is free, and only the head must watch for a free lock nobody announced (a Redisson waiter's
-- acquireFailed or delete() wakes nobody): a waiter behind it only has to call again within its
-- allowance, so the client polls it less often (docs/lock-kinds.md).
-- A key of another type raises WRONGTYPE from HEXISTS; a hash with no expiry whose fields are not
-- holders is not a lock: WRONGTYPE (foreign_hash.lua).
--
-- Same keys, values and deadline arithmetic as Redisson, except (see docs/lock-kinds.md):
-- * the caller is never purged by its own call (it is alive), and a queued caller's deadline is moved
--   up to now + W when it calls again to queue (ARGV[5] "1"), so a live waiter does not lose its place
--   (Redisson #3004); a try-once call leaves an entry it finds (one whose give-up was lost) as it is:
--   its W is 300000, and re-arming would block everyone behind that entry for five minutes;
-- * the deadlines of the others are shortened only when the acquirer came out of the queue, and
--   not below now + lease (Redisson shortens them by any acquirer's W, even one never queued);
-- * a head without a deadline counts as dead (Redisson stops there and the queue stalls);
-- * when a purge leaves the lock free with a live head, that head is woken (Redisson leaves it to its
--   timer);
-- * the wait is never 0 or negative: a queued caller that finds the lock free behind another head
--   waits until that head's deadline (Redisson answers 0 and Java spins);
-- * Q and Z expire some minutes after the latest deadline in Z (keep_queue below); Redisson's live
--   for ever.
-- Fencing (optional): with KEYS[4] the token key, a grant returns the token (a bulk string of
-- decimal digits) instead of nil: the token is made as in fenced_acquire.lua (INCR; a missing key
-- starts from the server's clock with a 7-day TTL). A token key that does not hold a number, or whose
-- next token would be 2^53 or more, fails the grant with an error before the grant writes anything
-- (a purge of dead waiters before it stands); only a grant takes a token.
local pub = string.lower(ARGV[7])
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local name, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local lease, me, allowance, now = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local token_key = KEYS[4]
-- #include optional_fencing_token.lua

-- #include purge_dead_waiters.lua

local free = redis.call('exists', name) == 0
-- #include foreign_hash.lua
if not free and redis.call('pttl', name) == -1 and redis.call('hexists', name, me) == 0 then
  local e = foreign_hash(name)
  if e then return e end
end
if free and (not head or head == me) then
  -- Deadlines of another type fail before anything is written: with a token, a ZSCORE before
  -- take_token() writes; without one, nothing is written before the ZREM, whose reply says whether
  -- the caller was queued (one call on the plain hand-off, not two).
  local queued = nil
  if token_key then queued = redis.call('zscore', deadlines, me) ~= false end
  local e = take_token()
  if e then return e end
  if queued ~= false then queued = redis.call('zrem', deadlines, me) == 1 end
  if head then redis.call('lpop', queue) end
  if queued then
    -- Everyone moves up one place: the acquirer's allowance comes off every other deadline, but
    -- not below now + lease (nobody is dead before the new holder's lease could end), and a
    -- deadline never grows (a dead waiter blocks no longer than Redisson would let it).
    -- One ZADD per 256 waiters, not one per waiter: this runs on every hand-off, inside the
    -- woken waiter's acquisition (16 owners: 1 call instead of 15).
    local floor = now + lease
    local rest = redis.call('zrange', deadlines, 0, -1, 'WITHSCORES')
    local moved, n = {}, 0
    for i = 1, #rest, 2 do
      local old = tonumber(rest[i + 1])
      local d = old - allowance
      if d < floor then d = math.min(old, floor) end
      if d ~= old then
        moved[n + 1] = string.format('%d', d)
        moved[n + 2] = rest[i]
        n = n + 2
        if n == 512 then
          redis.call('zadd', deadlines, unpack(moved, 1, n))
          n = 0
        end
      end
    end
    if n > 0 then redis.call('zadd', deadlines, unpack(moved, 1, n)) end
  end
  redis.call('hset', name, me, '1')
  redis.call('pexpire', name, ARGV[1])
  return granted()
end
if redis.call('hexists', name, me) == 1 then
  local e = take_token()
  if e then return e end
  redis.call('hincrby', name, me, 1)
  redis.call('pexpire', name, ARGV[1])
  return granted()
end
if purged and free and head then
  redis.pcall(pub, ARGV[6] .. ':' .. head, '0')
end

-- How long the caller may wait before it must look again.
local function bound()
  if not free then
    local t = redis.call('pttl', name)
    if t == -1 then return -1 end
    if t < 1 then return 1 end
    return t
  end
  local s = redis.call('zscore', deadlines, head)
  local t = 1
  if s then t = math.floor(tonumber(s) - now) end
  if t < 1 then t = 1 end
  return t
end

-- A queued caller with another waiter ahead of it says so: {t} instead of t.
local function queued_reply()
  if head and head ~= me then return {bound()} end
  return bound()
end

-- Called by every call that queues (or keeps its place). Q and Z get a TTL that outlasts the latest
-- deadline in Z by at least 5 minutes; a call that finds less sets 10 (one ZRANGE and one PTTL on
-- most calls, the two PEXPIREs once in five minutes). Redisson's never expire: a waiter killed in
-- the queue left both keys for ever when nobody used the name again (its hazard 8). 5 minutes is
-- Redisson's own allowance, so a Java waiter that queues behind the latest deadline is covered too;
-- a queue that only Java waiters grow past that, after our last call, can expire under them (they
-- then queue again at the tail on their next call: docs/lock-kinds.md). A deadline nobody makes
-- (10^13 ms away, which the purge treats as dead) sets no TTL.
local function keep_queue()
  local latest = redis.call('zrange', deadlines, -1, -1, 'WITHSCORES')[2]
  if not latest then return end
  local left = tonumber(latest) - now
  if left >= 10000000000000 then return end
  if left < 0 then left = 0 end
  local ttl = redis.call('pttl', deadlines)
  if ttl >= left + 300000 then return end
  ttl = string.format('%d', left + 600000)
  redis.call('pexpire', deadlines, ttl)
  redis.call('pexpire', queue, ttl)
end

local mine = redis.call('zscore', deadlines, me)
if mine then
  if ARGV[5] == '1' and tonumber(mine) < now + allowance then
    redis.call('zadd', deadlines, string.format('%d', now + allowance), me)
  end
  if ARGV[5] == '1' then keep_queue() end
  return queued_reply()
end
if ARGV[5] ~= '1' then return bound() end
local last = redis.call('lindex', queue, -1)
local base = nil
if last and last ~= me then
  local s = redis.call('zscore', deadlines, last)
  if s then base = tonumber(s) - now end
end
if base == nil then base = redis.call('pttl', name) end
if redis.call('zadd', deadlines, string.format('%d', base + allowance + now), me) == 1 then
  redis.call('rpush', queue, me)
end
keep_queue()
return queued_reply()
