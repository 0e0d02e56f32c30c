-- Acquire a non-reentrant mutex: the classic SET NX PX with a random token.
-- KEYS[1] lock name; ARGV[1] token, ARGV[2] lease in ms
-- Returns nil when acquired, else the PTTL in ms (-1: no expiry). A key that is not a string
-- (e.g. a Redisson hash) is an error: WRONGTYPE.
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return nil
end
if redis.call('type', KEYS[1]).ok ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return redis.call('pttl', KEYS[1])
