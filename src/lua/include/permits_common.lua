-- Included first by the permit-expirable semaphore's scripts (Redisson's RPermitExpirableSemaphore
-- layout: KEYS[1] the available permits, a string; KEYS[2] `{name}:timeout`, a zset of permit ids
-- scored by their expiry in epoch ms, 922337203685477 for a permit without a lease), after `pub`
-- (the publish command) and `channel` were set. Refuses another publish command; sets `now` from
-- the server's clock (Redisson's scripts take it from each client's clock, so a client whose clock
-- runs ahead reclaims others' permits early: ours all read one clock); defines reclaim().
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Gives expired permits back to the pool, at most `limit` (a script's work stays bounded), and
-- publishes the new count if any came back. Returns how many came back.
local function reclaim(limit)
  local ids = redis.call('zrangebyscore', KEYS[2], 0, now, 'limit', 0, limit)
  if #ids == 0 then return 0 end
  redis.call('zrem', KEYS[2], unpack(ids))
  local v = redis.call('incrby', KEYS[1], #ids)
  if v > 0 then redis.pcall(pub, channel, tostring(v)) end
  return #ids
end
