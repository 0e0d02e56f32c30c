-- Read a permit-expirable semaphore after reclaiming its expired permits (Redisson's
-- availablePermits and acquiredPermits, and a listing for `redlease semaphore NAME status`).
-- KEYS[1] name, KEYS[2] {name}:timeout
-- ARGV[1] channel, ARGV[2] publish command, ARGV[3] how many permits to list (0: none)
-- Returns {available (0 when the key is missing), acquired, id1, lease1, id2, lease2, ...}: the
-- first ARGV[3] permits by expiry, each with its remaining lease in ms (-1: none).
local pub = ARGV[2]
local channel = ARGV[1]
-- #include permits_common.lua
reclaim(1000)
local available = tonumber(redis.call('get', KEYS[1]) or '0')
if available == nil then return redis.error_reply('ERR semaphore value is not an integer') end
local out = {available, redis.call('zcard', KEYS[2])}
local limit = tonumber(ARGV[3])
if limit > 0 then
  local list = redis.call('zrange', KEYS[2], 0, limit - 1, 'withscores')
  for i = 1, #list, 2 do
    out[#out + 1] = list[i]
    if list[i + 1] == '922337203685477' then out[#out + 1] = -1
    else out[#out + 1] = math.max(0, tonumber(list[i + 1]) - now) end
  end
end
return out
