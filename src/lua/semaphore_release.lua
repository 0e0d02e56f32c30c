-- Add permits to a semaphore (Redisson's RSemaphore.release and addPermits: INCRBY, which keeps the
-- key's TTL, then publish the new count); exactly once, however often it is retried.
-- KEYS[1] semaphore name, KEYS[2] latch of this call (redisson_unlock_latch:{name}:<request id>),
-- KEYS[3..] settled marks and latches of this name that no call will read again: deleted in passing
-- ARGV[1] channel (redisson_sc:{name}), ARGV[2] permits to add (may be negative for addPermits),
-- ARGV[3] latch lifetime in ms, ARGV[4] publish command ("publish" or "spublish"; absent: "publish")
-- Returns the count after the call. A retry of a call whose reply never came finds the latch and
-- returns the count that call left, adding nothing: every call latches, because nothing else could
-- tell a retry that its first sending ran.
if #KEYS > 2 then redis.call('del', unpack(KEYS, 3)) end
local pub = ARGV[4] or 'publish'
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local latched = redis.call('get', KEYS[2])
if latched then return tonumber(latched) end
local value = redis.call('incrby', KEYS[1], ARGV[2])
redis.call('set', KEYS[2], value, 'PX', ARGV[3])
redis.pcall(pub, ARGV[1], tostring(value))
return value
