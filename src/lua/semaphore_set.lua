-- Set a semaphore's permits if it has none yet (Redisson's RSemaphore.trySetPermits).
-- KEYS[1] semaphore name
-- ARGV[1] channel (redisson_sc:{name}), ARGV[2] permits, ARGV[3] TTL in ms (0: none),
-- ARGV[4] publish command ("publish" or "spublish"; absent: "publish")
-- Returns 1 when set (and published), 0 when the key exists.
local pub = ARGV[4] or 'publish'
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
if redis.call('exists', KEYS[1]) == 1 then return 0 end
if tonumber(ARGV[3]) > 0 then
  redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
  redis.call('set', KEYS[1], ARGV[2])
end
redis.pcall(pub, ARGV[1], ARGV[2])
return 1
