-- Delete a count-down latch (Redisson's RCountDownLatch.delete).
-- KEYS[1] latch name; ARGV[1] channel (redisson_countdownlatch__channel__{name}), ARGV[2] publish
-- command ("publish" or "spublish")
-- Returns 1 when the key was deleted (and "1" published: waiters check again and, the count now
-- reading 0, pass), else 0.
local pub = ARGV[2]
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
if redis.call('del', KEYS[1]) == 1 then
  redis.pcall(pub, ARGV[1], '1')
  return 1
end
return 0
