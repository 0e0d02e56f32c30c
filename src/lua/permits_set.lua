-- Set a permit-expirable semaphore's total (Redisson's setPermits): available + acquired becomes
-- ARGV[3]; the available count moves by the difference (it may go below 0 while more are out).
-- KEYS[1] name, KEYS[2] {name}:timeout
-- ARGV[1] channel, ARGV[2] publish command, ARGV[3] the total (>= 0)
-- Returns the available count after. Publishes it (ours wake by it; Redisson's listener retries
-- on any message). Expired permits are reclaimed first (Redisson counts them as acquired).
local pub = ARGV[2]
local channel = ARGV[1]
-- #include permits_common.lua
reclaim(1000)
local p = tonumber(ARGV[3])
local value = redis.call('get', KEYS[1])
local v
if not value then
  redis.call('set', KEYS[1], p)
  v = p
else
  if tonumber(value) == nil then return redis.error_reply('ERR semaphore value is not an integer') end
  local total = tonumber(value) + redis.call('zcard', KEYS[2])
  v = redis.call('incrby', KEYS[1], p - total)
end
redis.pcall(pub, channel, tostring(v))
return v
