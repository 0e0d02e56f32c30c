-- Delete a fair lock whoever holds it, and wake the head of its queue (Redisson's fair forceUnlock).
-- KEYS[1] lock name, KEYS[2] queue (a list), KEYS[3] deadlines (a zset)
-- ARGV[1] unlock channel, ARGV[2] unlock message, ARGV[3] now (the client's epoch ms), ARGV[4] publish
-- command ("publish" or "spublish"; absent: "publish")
-- Returns 1 if the lock existed, else 0.
-- The waiters listen on channels of their own. As Redisson does, dead waiters are purged from the
-- head of the queue (as in fair_acquire.lua) and the live head is told on its channel
-- (ARGV[1]:<head>); the message also goes to the lock's channel, as force_unlock.lua's. A queue or
-- deadlines key of another type is not purged (a queue's head is still told): the lock is deleted
-- all the same. UNLINK as in force_unlock.lua.
local pub = ARGV[4] or 'publish'
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local queue, deadlines, now, me = KEYS[2], KEYS[3], tonumber(ARGV[3]), nil
local qt, dt = redis.call('type', queue).ok, redis.call('type', deadlines).ok
local live = false
if qt == 'list' then
  if dt == 'zset' or dt == 'none' then
    -- #include purge_dead_waiters.lua
    live = head
  else
    live = redis.call('lindex', queue, 0)
  end
end
local gone = redis.pcall('unlink', KEYS[1])
if type(gone) ~= 'number' then gone = redis.call('del', KEYS[1]) end
if gone == 1 then
  redis.pcall(pub, ARGV[1], ARGV[2])
  if live then redis.pcall(pub, ARGV[1] .. ':' .. live, ARGV[2]) end
  return 1
end
return 0
