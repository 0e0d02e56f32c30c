-- Delete a lock whoever holds it, and wake its waiters (Redisson's forceUnlock).
-- KEYS[1] lock name, KEYS[2] unlock channel; ARGV[1] unlock message
-- Returns 1 if the lock existed, else 0.
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[2], ARGV[1])
  return 1
end
return 0
