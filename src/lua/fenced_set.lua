-- A resource that checks fencing tokens: the pattern to copy for anything a lock holder writes.
-- KEYS[1] the resource (a hash: field "token" = the highest token seen, field "value")
-- ARGV[1] the writer's fencing token (decimal digits), ARGV[2] the value
-- Returns 1 when written, 0 when refused: a writer with a lower token than one already seen held
-- the lock before someone else did (it was paused past its lease, say) and must not overwrite.
-- Tokens compare as decimal strings (fewer digits is lower, then digit by digit), not as Lua
-- numbers: those are doubles, exact only below 2^53, and two tokens above it could compare equal.
local mine = ARGV[1]
if not string.match(mine, '^%d+$') then return redis.error_reply('ERR fencing token is not a number') end
mine = string.match(mine, '^0*(%d.*)$')
local seen = redis.call('hget', KEYS[1], 'token')
if seen and string.match(seen, '^%d+$') then
  seen = string.match(seen, '^0*(%d.*)$')
  if #mine < #seen or (#mine == #seen and mine < seen) then return 0 end
end
redis.call('hset', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return 1
