-- Release one hold of a reentrant lock; exactly once, however often it is retried.
-- KEYS[1] lock name, KEYS[2] latch of this release (redisson_unlock_latch:{name}:<request id>)
-- ARGV[1] unlock channel (redisson_lock__channel:{name}), ARGV[2] unlock message ("0"),
-- ARGV[3] lease in ms for the holds that remain, ARGV[4] owner field, ARGV[5] the hold count the
-- client expects before this release, ARGV[6] "1" when this is a retry of a release whose reply
-- never came, ARGV[7] latch lifetime in ms, ARGV[8] publish command ("publish" or "spublish"; absent:
-- "publish")
-- Returns nil: the owner holds nothing; 0: released one hold, others remain; 1: released and freed.
--
-- The channel is an argument, not a key: a user whose ACL allows only the lock's key prefix needs
-- no key pattern for it. PUBLISH goes through pcall: a user without the `&` channel permission
-- (Redis 7's default for new users) still releases; its waiters poll instead (they cannot subscribe).
--
-- A retry that finds the count already one lower knows the first attempt ran and takes nothing
-- more. A retry also leaves a latch: an earlier attempt of the same release that was stuck in a
-- reset connection and arrives after it (even after the owner took the lock again, when the count
-- looks right again) finds the latch and changes nothing. First attempts only read the latch, so
-- the common case writes no extra key.
--
-- The last hold is freed with DEL alone (no HINCRBY first): DEL and PUBLISH are allowed when the
-- server is out of memory (noeviction), so a holder can always let go.
--
-- A count that is not a whole number as HINCRBY reads one (someone overwrote the owner's field)
-- counts as the last hold: the lock is freed. Failing instead left the owner unable ever to
-- release a lock that its watchdog kept alive. The check costs a string.format on re-entered
-- releases only.
local pub = ARGV[8] or 'publish'
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local latched = redis.call('get', KEYS[2])
if latched then
  if latched == '-1' then return nil end
  return tonumber(latched)
end
local result = nil
local count = redis.call('hget', KEYS[1], ARGV[4])
if count ~= false then
  local n = tonumber(count)
  if ARGV[6] == '1' and n == tonumber(ARGV[5]) - 1 then
    result = 0
  elseif n and n > 1 and string.format('%d', n) == count then
    redis.call('hincrby', KEYS[1], ARGV[4], -1)
    redis.call('pexpire', KEYS[1], ARGV[3])
    result = 0
  else
    redis.call('del', KEYS[1])
    redis.pcall(pub, ARGV[1], ARGV[2])
    result = 1
  end
end
if ARGV[6] == '1' then
  redis.call('set', KEYS[2], result == nil and -1 or result, 'PX', ARGV[7])
end
return result
