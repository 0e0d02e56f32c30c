-- The check of a count-down latch's await (Redisson's RCountDownLatch): passes at a count of 0.
-- KEYS[1] latch name (a string holding the count; a missing key is a count of 0, as Redisson reads it)
-- Returns nil when the count is 0 or less, or the key is missing (the await is granted); else the
-- key's PTTL in ms (-1: no expiry), which the waiter sleeps at most before it checks again (a latch
-- that expires by its TTL publishes nothing). Reads only: it changes nothing, so it is also the
-- harmless "undo" of a check whose reply never came.
local v = redis.call('get', KEYS[1])
if v == false then return nil end
local n = tonumber(v)
if n == nil then
  return redis.error_reply('ERR count-down latch value is not an integer')
end
if n <= 0 then return nil end
return redis.call('pttl', KEYS[1])
