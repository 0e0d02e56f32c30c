-- Take permits of a permit-expirable semaphore (Redisson's RPermitExpirableSemaphore.tryAcquire),
-- each under its own id with a lease counted on the server's clock.
-- KEYS[1] name (the available permits), KEYS[2] {name}:timeout (the zset of permits)
-- ARGV[1] channel (redisson_sc:{name}), ARGV[2] publish command, ARGV[3] lease in ms (> 0),
-- ARGV[4..] the new permits' ids (16 bytes each), as many as permits wanted
-- Returns nil when taken (each id scored now + lease; the zset gets the name's TTL, as Redisson
-- does); else the ms until the nearest permit expires (at least 1), or -1 when none will.
-- Expired permits are reclaimed first (at most 1000 per call).
local pub = ARGV[2]
local channel = ARGV[1]
-- #include permits_common.lua
reclaim(1000)
local n = #ARGV - 3
local value = redis.call('get', KEYS[1])
if value then
  local v = tonumber(value)
  if v == nil then return redis.error_reply('ERR semaphore value is not an integer') end
  if v >= n then
    redis.call('decrby', KEYS[1], n)
    local expiry = now + tonumber(ARGV[3])
    for i = 4, #ARGV do redis.call('zadd', KEYS[2], expiry, ARGV[i]) end
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
    return nil
  end
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] ~= nil and first[2] ~= '922337203685477' then
  return math.max(1, tonumber(first[2]) - now)
end
return -1
