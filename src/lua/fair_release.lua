-- Release one hold of a fair lock (Redisson's RedissonFairLock layout); exactly once, however often
-- it is retried (the latch works as in release.lua). Freeing the lock hands it to the head of the
-- queue: "0" is published on that waiter's own channel only, never on the plain channel.
-- KEYS[1] lock name N, KEYS[2] queue (redisson_lock_queue:{N}), KEYS[3] deadlines
-- (redisson_lock_timeout:{N}), KEYS[4] latch of this release (redisson_unlock_latch:{N}:<request id>)
-- ARGV[1] per-waiter channel prefix (redisson_lock__channel:{N}), ARGV[2] publish command ("publish"
-- or "spublish"), ARGV[3] lease in ms for the holds that remain, ARGV[4] owner field, ARGV[5] the hold
-- count the client expects before this release, ARGV[6] "1" when this is a retry of a release whose
-- reply never came, ARGV[7] latch lifetime in ms, ARGV[8] now (the client's epoch ms)
-- Returns nil: the owner holds nothing; 0: released one hold, others remain; 1: released and freed.
--
-- Dead waiters at the head of the queue are purged first (as Redisson does, but at most 1000 per
-- call), so the message goes to a live head. Unlike Redisson, releasing a lock that is gone is not
-- a success (nil, as release.lua); the head is still woken then, since the lock is free for it. The
-- last hold is freed with DEL.
local pub = string.lower(ARGV[2])
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local latched = redis.call('get', KEYS[4])
if latched then
  if latched == '-1' then return nil end
  return tonumber(latched)
end
local name, queue, deadlines = KEYS[1], KEYS[2], KEYS[3]
local now = tonumber(ARGV[8])
local me = nil  -- the releaser holds the lock: it is not queued
-- #include purge_dead_waiters.lua
local function wake()
  if head then redis.pcall(pub, ARGV[1] .. ':' .. head, '0') end
end

local result = nil
local count = redis.call('hget', name, ARGV[4])
if count ~= false then
  local n = tonumber(count)
  if ARGV[6] == '1' and n == tonumber(ARGV[5]) - 1 then
    result = 0
  elseif n and n > 1 and string.format('%d', n) == count then
    redis.call('hincrby', name, ARGV[4], -1)
    redis.call('pexpire', name, ARGV[3])
    result = 0
  else
    -- The last hold, or a count that is no whole number (release.lua): freed.
    redis.call('del', name)
    wake()
    result = 1
  end
elseif redis.call('exists', name) == 0 then
  wake()
end
if ARGV[6] == '1' then
  redis.call('set', KEYS[4], result == nil and -1 or result, 'PX', ARGV[7])
end
return result
