-- A fair-lock waiter gives up (Redisson's acquireFailed): it leaves the queue, and the deadlines of
-- the waiters behind it lose the allowance it had added to them.
-- KEYS[1] lock name N, KEYS[2] queue (redisson_lock_queue:{N}), KEYS[3] deadlines
-- (redisson_lock_timeout:{N})
-- ARGV[1] owner field, ARGV[2] the allowance W the waiter queued with (the same ARGV[3] it passed to
-- fair_acquire; Java's async path wrongly passes 300000), ARGV[3] per-waiter channel prefix
-- (redisson_lock__channel:{N}), ARGV[4] publish command ("publish" or "spublish"), ARGV[5] now (the
-- client's epoch ms, as fair_acquire's ARGV[4])
-- Returns 1 when the owner was queued (and is no longer), 0 when it was not.
--
-- Unlike Redisson:
-- * a head that leaves while the lock is free passes the wake-up on: the new head is sent "0" on its
--   channel (the release that freed the lock woke the waiter that is now leaving);
-- * a deadline behind the leaver drops by W, but not below now + W, and never grows: with `old` its
--   deadline, it becomes old - W, or min(old, now + W) when old - W is earlier than now + W (the
--   floor of fair_acquire's hand-off, with now + W for now + lease). Our waiters move their own
--   deadline up to now + their W on each call, so it is no longer the leaver's + W as Redisson's
--   arithmetic assumes: subtracting W in full put a follower that had just called at about the time
--   of that call, and the next call by anyone purged it (it queued again at the tail). With the
--   floor one cancel takes at most half of the time a follower has left (max(old - W, now + W) is
--   at least halfway from now to old), and each of our waiters calls again at least three times
--   per its own allowance, so a live follower keeps its place; a dead one still blocks no longer
--   than the deadline it had.
--   A queued waiter without a deadline is given -W, as Redisson's ZINCRBY does (dead to every
--   client, Java's purge included).
-- The deadlines behind are read and written 256 at a time (ZMSCORE, Redis 6.2, and one ZADD): two
-- calls per 256 followers where Redisson's ZINCRBY makes one per follower; an older server reads
-- them with one ZSCORE each.
local pub = string.lower(ARGV[4])
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local name, queue, deadlines, me = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local allowance, now = tonumber(ARGV[2]), tonumber(ARGV[5])
-- Only the waiters behind the caller are read (LPOS finds it inside the server; Redis 6.0.6): a
-- caller at the tail of a long queue copies nothing into Lua. An older server reads the whole queue.
local pos = redis.pcall('lpos', queue, me)
local behind, first = nil, 1
if type(pos) == 'table' then
  behind = redis.call('lrange', queue, 0, -1)
  pos = false
  for i = 1, #behind do
    if behind[i] == me then
      pos, first = i - 1, i + 1
      break
    end
  end
end
local queued = redis.call('zrem', deadlines, me)
if pos == false then return queued end
if not behind then behind = redis.call('lrange', queue, pos + 1, -1) end
local floor = now + allowance
local i = first
while i <= #behind do
  local names = {}
  local last = math.min(i + 255, #behind)
  for k = i, last do
    if behind[k] ~= me then names[#names + 1] = behind[k] end
  end
  i = last + 1
  if #names > 0 then
    local scores = redis.pcall('zmscore', deadlines, unpack(names))
    if type(scores) == 'table' and scores.err then
      scores = {}
      for k = 1, #names do scores[k] = redis.call('zscore', deadlines, names[k]) end
    end
    local moved, n = {}, 0
    for k = 1, #names do
      local d = nil
      if scores[k] then
        local old = tonumber(scores[k])
        d = old - allowance
        if d < floor then d = math.min(old, floor) end
        if d == old then d = nil end
      else
        d = -allowance
      end
      if d then
        moved[n + 1] = string.format('%d', d)
        moved[n + 2] = names[k]
        n = n + 2
      end
    end
    if n > 0 then redis.call('zadd', deadlines, unpack(moved, 1, n)) end
  end
end
redis.call('lrem', queue, 0, me)
if pos == 0 and redis.call('exists', name) == 0 then
  local head = redis.call('lindex', queue, 0)
  if head then redis.pcall(pub, ARGV[3] .. ':' .. head, '0') end
end
return 1
