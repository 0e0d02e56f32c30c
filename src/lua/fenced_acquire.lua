-- Acquire a reentrant lock and get a fencing token (Redisson's RFencedLock layout).
-- KEYS[1] lock name (hash: owner field -> hold count), KEYS[2] token key (redisson_lock_token:{name})
-- ARGV[1] lease in ms, ARGV[2] owner field "<client-uuid>:<owner-id>"
-- A token key that does not hold an integer fails the grant before anything is written: INCR's
-- error with the key's name (make_fencing_token.lua, which every kind's grant uses); so does one
-- whose next token would be 2^53 or more (the key is left as it was).
-- A hash with no expiry whose fields are not holders is not a lock: WRONGTYPE (foreign_hash.lua).
-- Returns the token (a bulk string of decimal digits) when acquired (or re-entered), else the lock's
-- PTTL in ms (-1: no expiry).
--
-- The token: INCR of the token key, as Redisson's RFencedLock does (so Redisson's grants on the same
-- name draw from the same sequence), but the key is not immortal: it is created holding the
-- server's time in microseconds, with a 7-day TTL (so is a key that held 0 or less, which no
-- sequence of ours ever holds). When it is gone (expired, or a replica promoted
-- before it saw the key), the next token starts from the clock again, which is above every earlier
-- token as long as the server's clock does not go back and a name gets fewer grants than a million
-- a second on average over the key's life.
local token_key = KEYS[2]
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  -- #include make_fencing_token.lua
  if made_error then return made_error end
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return string.format('%d', made)
end
-- #include foreign_hash.lua
return busy_ttl(KEYS[1], true)
