-- Delete a lock whoever holds it, and wake its waiters (Redisson's forceUnlock).
-- KEYS[1] lock name; ARGV[1] unlock channel, ARGV[2] unlock message
-- Returns 1 if the lock existed, else 0.
if redis.call('del', KEYS[1]) == 1 then
  redis.pcall('publish', ARGV[1], ARGV[2])
  return 1
end
return 0
