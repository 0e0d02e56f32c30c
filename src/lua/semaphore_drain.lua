-- Take every available permit of a semaphore (Redisson's RSemaphore.drainPermits: GET, SET 0; no
-- publish: nobody can take anything now).
-- KEYS[1] semaphore name
-- Returns the count before (a missing key: 0, left missing).
local value = redis.call('get', KEYS[1])
if value == false then return 0 end
redis.call('set', KEYS[1], 0)
return tonumber(value)
