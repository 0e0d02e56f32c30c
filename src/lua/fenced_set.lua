-- A resource that checks fencing tokens: the pattern to copy for anything a lock holder writes.
-- KEYS[1] the resource (a hash: field "token" = the highest token seen, field "value")
-- ARGV[1] the writer's fencing token, ARGV[2] the value
-- Returns 1 when written, 0 when refused: a writer with a lower token than one already seen held
-- the lock before someone else did (it was paused past its lease, say) and must not overwrite.
local seen = redis.call('hget', KEYS[1], 'token')
local mine = tonumber(ARGV[1])
if mine == nil then return redis.error_reply('ERR fencing token is not a number') end
if seen and tonumber(seen) and mine < tonumber(seen) then return 0 end
redis.call('hset', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return 1
