-- Give permits of a permit-expirable semaphore back by id (Redisson's tryRelease of each id; the
-- undo of a grant whose reply never came too). Exactly once by nature: an id is removed once.
-- KEYS[1] name, KEYS[2] {name}:timeout
-- ARGV[1] channel, ARGV[2] publish command, ARGV[3..] the ids
-- Returns 1 when every id was there (and is now back in the pool), 0 when some were not (they
-- expired and were reclaimed, or were released already): those that were there are given back.
-- Publishes the new count when any came back.
local pub = ARGV[2]
local channel = ARGV[1]
-- #include permits_common.lua
reclaim(1000)
local r = 0
for i = 3, #ARGV do r = r + redis.call('zrem', KEYS[2], ARGV[i]) end
if r > 0 then
  local v = redis.call('incrby', KEYS[1], r)
  redis.pcall(pub, channel, tostring(v))
end
if r == #ARGV - 2 then return 1 end
return 0
