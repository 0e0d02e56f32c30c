-- Give back several permits by id, all or none (Redisson's tryRelease(ids)).
-- KEYS[1] name, KEYS[2] {name}:timeout
-- ARGV[1] channel, ARGV[2] publish command, ARGV[3..] the ids
-- Returns the number given back: all of them, or 0 (nothing changed) when one is missing or has
-- expired. Publishes the new count (Redisson publishes the number released: its listener and ours
-- both take a message as "try again").
local pub = ARGV[2]
local channel = ARGV[1]
-- #include permits_common.lua
for i = 3, #ARGV do
  local s = redis.call('zscore', KEYS[2], ARGV[i])
  if not s or tonumber(s) <= now then return 0 end
end
reclaim(1000)
local r = redis.call('zrem', KEYS[2], unpack(ARGV, 3))
local v = redis.call('incrby', KEYS[1], r)
redis.pcall(pub, channel, tostring(v))
return r
