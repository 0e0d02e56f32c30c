-- Acquire (or re-take) one node of a RedLock: SET NX PX with the acquisition's random value, the
-- layout of redsync and node-redlock (a plain string key, no prefix).
-- KEYS[1] lock name; ARGV[1] value, ARGV[2] TTL in ms
-- Returns 1 when set (granted), 2 when the key already held our value (a leftover of an earlier
-- attempt: its TTL is set again), 0 when it holds another value (taken).
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 2
end
return 0
