-- Count a count-down latch down by one (Redisson's RCountDownLatch.countDown); exactly once across
-- a lost reply.
-- KEYS[1] latch name, KEYS[2] this call's request latch (redisson_unlock_latch:{name}:<request id>)
-- ARGV[1] channel (redisson_countdownlatch__channel__{name}), ARGV[2] request latch lifetime in ms,
-- ARGV[3] publish command ("publish" or "spublish")
-- Returns the count left (0 or more). Redisson's steps: DECR; at 0 or below the key is deleted; at
-- exactly 0, "0" is published (waiters pass). A missing latch stays missing (DECR makes -1, deleted,
-- nothing published).
-- Every call leaves its request latch holding its answer: a call sent again after its reply was
-- lost finds it and decrements nothing more (a call cannot tell otherwise whether it ran). A
-- value that is not an integer fails, as DECR does, changing nothing.
-- PUBLISH goes through pcall: without the channel permission (or a channel in another slot, see
-- docs/latch.md) the count still goes down, and waiters see it when they poll.
local pub = ARGV[3]
-- #include latch_request.lua
local v = redis.call('decr', KEYS[1])
if v <= 0 then
  redis.call('del', KEYS[1])
  if v == 0 then redis.pcall(pub, ARGV[1], '0') end
  v = 0
end
redis.call('set', KEYS[2], v, 'px', ARGV[2])
return v
