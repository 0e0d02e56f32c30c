-- Set a count-down latch's count if it has none (Redisson's RCountDownLatch.trySetCount); exactly
-- once across a lost reply.
-- KEYS[1] latch name, KEYS[2] this call's request latch (redisson_unlock_latch:{name}:<request id>)
-- ARGV[1] channel (redisson_countdownlatch__channel__{name}), ARGV[2] count (> 0), ARGV[3] TTL of
-- the latch in ms (0: none, as Redisson), ARGV[4] request latch lifetime in ms, ARGV[5] publish
-- command ("publish" or "spublish")
-- Returns 1 when the count was set (and "1", a new count, published), 0 when the latch exists. A
-- call sent again under the same request id gets the first one's answer.
-- PUBLISH goes through pcall: without the channel permission the count is still set.
local pub = ARGV[5]
-- #include latch_request.lua
local result = 0
if redis.call('exists', KEYS[1]) == 0 then
  if tonumber(ARGV[3]) > 0 then
    redis.call('set', KEYS[1], ARGV[2], 'px', ARGV[3])
  else
    redis.call('set', KEYS[1], ARGV[2])
  end
  redis.pcall(pub, ARGV[1], '1')
  result = 1
end
redis.call('set', KEYS[2], result, 'px', ARGV[4])
return result
