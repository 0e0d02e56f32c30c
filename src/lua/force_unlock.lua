-- Delete a lock whoever holds it, and wake its waiters (Redisson's forceUnlock).
-- KEYS[1] lock name; ARGV[1] unlock channel, ARGV[2] unlock message, ARGV[3] publish command
-- ("publish" or "spublish"; absent: "publish")
-- Returns 1 if the lock existed, else 0.
-- UNLINK, not Redisson's DEL: a read-write hash that crashed readers grew to 300,000 fields costs a
-- DEL about 60 ms of a blocked server, an UNLINK no more than a small key (the memory is freed on a
-- background thread). DEL where UNLINK is renamed or refused to this user.
local pub = ARGV[3] or 'publish'
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local gone = redis.pcall('unlink', KEYS[1])
if type(gone) ~= 'number' then gone = redis.call('del', KEYS[1]) end
if gone == 1 then
  redis.pcall(pub, ARGV[1], ARGV[2])
  return 1
end
return 0
