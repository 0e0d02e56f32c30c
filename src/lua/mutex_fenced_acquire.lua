-- Acquire a mutex (SET NX PX with a random token) and get a fencing token.
-- KEYS[1] lock name, KEYS[2] token key (redlease_mutex_token:{name})
-- ARGV[1] this attempt's random token, ARGV[2] lease in ms
-- Returns {fencing token} when acquired, else the PTTL in ms (-1: no expiry). A lock key that is
-- not a string is WRONGTYPE. The fencing token is fenced_acquire.lua's: max(previous + 1, the
-- server's time in microseconds), in a key that expires 7 days after the last grant.
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local prev = redis.call('get', KEYS[2])
  local last = 0
  if prev then
    last = tonumber(prev)
    if last == nil then
      redis.call('del', KEYS[1])
      return redis.error_reply('ERR fencing token key ' .. KEYS[2] .. ' does not hold a number')
    end
  end
  local t = redis.call('time')
  local token = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if token <= last then token = last + 1 end
  redis.call('set', KEYS[2], string.format('%d', token), 'PX', 604800000)
  return {token}
end
if redis.call('type', KEYS[1]).ok ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return redis.call('pttl', KEYS[1])
