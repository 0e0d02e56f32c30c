-- Acquire a reentrant lock (Redisson's RedissonLock layout).
-- KEYS[1] lock name (a hash: owner field -> hold count)
-- ARGV[1] lease in ms, ARGV[2] owner field "<client-uuid>:<owner-id>"
-- A hash with no expiry whose fields are not holders is not a lock: WRONGTYPE (foreign_hash.lua).
-- Returns nil when acquired (or re-entered), else the lock's PTTL in ms (-1: no expiry).
-- A key of another type raises WRONGTYPE from HEXISTS.
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
-- #include foreign_hash.lua
return busy_ttl(KEYS[1], true)
