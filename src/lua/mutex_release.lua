-- Release a mutex: compare-and-delete, then wake redlease waiters.
-- KEYS[1] lock name; ARGV[1] channel (redlease_mutex__channel:{name}), ARGV[2] token, ARGV[3] publish
-- command ("publish" or "spublish"; absent: "publish")
-- Returns 1 when released, 0 when the key holds another token or is gone.
-- Only GET, DEL and PUBLISH: it works on a server that is out of memory.
local pub = ARGV[3] or 'publish'
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local v = redis.call('get', KEYS[1])
if v == ARGV[2] then
  redis.call('del', KEYS[1])
  redis.pcall(pub, ARGV[1], '0')
  return 1
end
return 0
