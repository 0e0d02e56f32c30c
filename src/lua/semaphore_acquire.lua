-- Take permits of a semaphore (Redisson's RSemaphore.tryAcquire: GET, DECRBY if enough, no publish).
-- KEYS[1] semaphore name (a string: the available permits), KEYS[2] this attempt's latch
-- (redisson_unlock_latch:{name}:<attempt id>), KEYS[3..] settled marks and latches of this name
-- that no call will read again (their calls were answered): deleted in passing
-- ARGV[1] permits to take (>= 1), ARGV[2] latch lifetime in ms
-- Returns 1 when taken, 0 when fewer are available (never blocks, nothing to wait on but a release).
--
-- A grant marks its attempt's latch 'granted': the undo of an attempt whose reply never came
-- (semaphore_undo.lua) gives the permits back only if that mark is there, and leaves 'undone' so that
-- an attempt arriving after its undo (it was stuck in a dropped connection) takes nothing.
if #KEYS > 2 then redis.call('del', unpack(KEYS, 3)) end
if redis.call('exists', KEYS[2]) == 1 then return 0 end
local value = redis.call('get', KEYS[1])
if value == false then return 0 end
local n = tonumber(value)
if n == nil then
  return redis.error_reply('ERR semaphore value is not an integer')
end
if n >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], 'granted', 'PX', ARGV[2])
  return 1
end
return 0
