-- Acquire a mutex (SET NX PX with a random token) and get a fencing token.
-- KEYS[1] lock name, KEYS[2] token key (redlease_mutex_token:{name})
-- ARGV[1] this attempt's random token, ARGV[2] lease in ms
-- Returns the fencing token (a bulk string of decimal digits) when acquired, else the PTTL in ms
-- (-1: no expiry). A lock key that is not a string is WRONGTYPE. The fencing token is made as in
-- fenced_acquire.lua.
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- The common case is one INCR (Redisson's own step, which keeps the key's TTL). A missing key
  -- (INCR gives 1), or one that held 0 or less, starts from the server's clock, with a TTL. Inline,
  -- not optional_fencing_token.lua: its two Lua functions cost this pair 7 % more script time.
  local token = redis.pcall('incr', KEYS[2])
  if type(token) == 'table' then
    -- The token key holds something that is not a count: no grant, and no lock left behind.
    redis.call('del', KEYS[1])
    return redis.error_reply(tostring(token.err) .. ' (the fencing token key ' .. KEYS[2] .. ')')
  end
  if token <= 1 then
    local t = redis.call('time')
    token = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('set', KEYS[2], string.format('%d', token), 'PX', 604800000)
  end
  return string.format('%d', token)
end
if redis.call('type', KEYS[1]).ok ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return redis.call('pttl', KEYS[1])
