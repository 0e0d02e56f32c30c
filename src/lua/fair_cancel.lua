-- A fair-lock waiter gives up (Redisson's acquireFailed): it leaves the queue, and the deadlines of
-- the waiters behind it lose the allowance it had added to them.
-- KEYS[1] lock name N, KEYS[2] queue (redisson_lock_queue:{N}), KEYS[3] deadlines
-- (redisson_lock_timeout:{N})
-- ARGV[1] owner field, ARGV[2] the allowance W the waiter queued with (the same ARGV[3] it passed to
-- fair_acquire; Java's async path wrongly passes 300000), ARGV[3] per-waiter channel prefix
-- (redisson_lock__channel:{N}), ARGV[4] publish command ("publish" or "spublish")
-- Returns 1 when the owner was queued (and is no longer), 0 when it was not.
--
-- Unlike Redisson, a head that leaves while the lock is free passes the wake-up on: the new head is
-- sent "0" on its channel (the release that freed the lock woke the waiter that is now leaving).
local pub = string.lower(ARGV[4])
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local name, queue, deadlines, me = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
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
for i = first, #behind do
  if behind[i] ~= me then redis.call('zincrby', deadlines, -tonumber(ARGV[2]), behind[i]) end
end
redis.call('lrem', queue, 0, me)
if pos == 0 and redis.call('exists', name) == 0 then
  local head = redis.call('lindex', queue, 0)
  if head then redis.pcall(pub, ARGV[3] .. ':' .. head, '0') end
end
return 1
