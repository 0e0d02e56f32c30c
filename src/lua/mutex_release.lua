-- Release a mutex: compare-and-delete, then wake redlease waiters.
-- KEYS[1] lock name, KEYS[2] channel (redlease_mutex__channel:{name}); ARGV[1] token
-- Returns 1 when released, 0 when the key holds another token or is gone.
local v = redis.call('get', KEYS[1])
if v == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], '0')
  return 1
end
return 0
