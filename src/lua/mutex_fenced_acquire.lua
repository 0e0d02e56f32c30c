-- Acquire a mutex (SET NX PX with a random token) and get a fencing token.
-- KEYS[1] lock name, KEYS[2] token key (redlease_mutex_token:{name})
-- ARGV[1] this attempt's random token, ARGV[2] lease in ms
-- Returns the fencing token (a bulk string of decimal digits) when acquired, else the PTTL in ms
-- (-1: no expiry). A lock key that is not a string is WRONGTYPE. The fencing token is made as in
-- fenced_acquire.lua.
local token_key = KEYS[2]
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- #include make_fencing_token.lua
  if made_error then
    -- The token key holds something that is not a count: no grant, and no lock left behind.
    redis.call('del', KEYS[1])
    return made_error
  end
  return string.format('%d', made)
end
if redis.call('type', KEYS[1]).ok ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return redis.call('pttl', KEYS[1])
