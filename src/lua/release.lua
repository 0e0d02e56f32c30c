-- Release one hold of a reentrant lock; exactly once, however often it is retried.
-- KEYS[1] lock name, KEYS[2] unlock channel (redisson_lock__channel:{name}),
-- KEYS[3] latch of this release (redisson_unlock_latch:{name}:<request id>)
-- ARGV[1] unlock message ("0"), ARGV[2] lease in ms for the holds that remain, ARGV[3] owner field,
-- ARGV[4] the hold count the client expects before this release, ARGV[5] "1" when this is a retry
-- of a release whose reply never came, ARGV[6] latch lifetime in ms
-- Returns nil: the owner holds nothing; 0: released one hold, others remain; 1: released and freed.
--
-- A retry that finds the count already one lower knows the first attempt ran and takes nothing
-- more. A retry also leaves a latch: an earlier attempt of the same release that was stuck in a
-- reset connection and arrives after it (even after the owner took the lock again, when the count
-- looks right again) finds the latch and changes nothing. First attempts only read the latch, so
-- the common case writes no extra key.
local latched = redis.call('get', KEYS[3])
if latched then
  if latched == '-1' then return nil end
  return tonumber(latched)
end
local result = nil
local count = redis.call('hget', KEYS[1], ARGV[3])
if count ~= false then
  if ARGV[5] == '1' and tonumber(count) == tonumber(ARGV[4]) - 1 then
    result = 0
  else
    count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
    if count > 0 then
      redis.call('pexpire', KEYS[1], ARGV[2])
      result = 0
    else
      redis.call('del', KEYS[1])
      redis.call('publish', KEYS[2], ARGV[1])
      result = 1
    end
  end
end
if ARGV[5] == '1' then
  redis.call('set', KEYS[3], result == nil and -1 or result, 'PX', ARGV[6])
end
return result
