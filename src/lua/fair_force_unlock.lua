-- Delete a fair lock whoever holds it, and wake the head of its queue (Redisson's fair forceUnlock).
-- KEYS[1] lock name, KEYS[2] queue (a list), KEYS[3] deadlines (a zset)
-- ARGV[1] unlock channel, ARGV[2] unlock message, ARGV[3] now (the client's epoch ms)
-- Returns 1 if the lock existed, else 0.
-- The waiters listen on channels of their own. As Redisson does, dead waiters are purged from the
-- head of the queue (at most 1000 per call, as in fair_acquire.lua; a head without a deadline counts
-- as dead) and the live head is told on its channel (ARGV[1]:<head>); the message also goes to the
-- lock's channel, as force_unlock.lua's. A queue or deadlines key of another type is left as it is:
-- the lock is deleted all the same. UNLINK as in force_unlock.lua.
local now = tonumber(ARGV[3])
local head = redis.pcall('lindex', KEYS[2], 0)
for _ = 1, 1000 do
  if type(head) ~= 'string' then break end
  local s = redis.pcall('zscore', KEYS[3], head)
  if type(s) == 'table' or (s and tonumber(s) > now) then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
  head = redis.pcall('lindex', KEYS[2], 0)
end
local gone = redis.pcall('unlink', KEYS[1])
if type(gone) ~= 'number' then gone = redis.call('del', KEYS[1]) end
if gone == 1 then
  redis.pcall('publish', ARGV[1], ARGV[2])
  if type(head) == 'string' then redis.pcall('publish', ARGV[1] .. ':' .. head, ARGV[2]) end
  return 1
end
return 0
