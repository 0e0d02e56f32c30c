-- Acquire a reentrant lock and get a fencing token (Redisson's RFencedLock layout).
-- KEYS[1] lock name (hash: owner field -> hold count), KEYS[2] token key (redisson_lock_token:{name})
-- ARGV[1] lease in ms, ARGV[2] owner field "<client-uuid>:<owner-id>"
-- Returns {token} when acquired (or re-entered), else the lock's PTTL in ms (-1: no expiry).
--
-- The token: max(previous + 1, the server's time in microseconds). It grows with every grant, as
-- Redisson's INCR does (and Redisson's INCR on the same key goes on from it), but the key expires
-- (7 days after the last grant) instead of living forever: after it expired, or on a replica that
-- missed the last grant, the clock still puts the next token above every earlier one, as long as
-- the server's clock does not go back and fewer than a million grants a second are made on a name.
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  local prev = redis.call('get', KEYS[2])
  local last = 0
  if prev then
    last = tonumber(prev)
    if last == nil then
      return redis.error_reply('ERR fencing token key ' .. KEYS[2] .. ' does not hold a number')
    end
  end
  local t = redis.call('time')
  local token = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if token <= last then token = last + 1 end
  redis.call('set', KEYS[2], string.format('%d', token), 'PX', 604800000)
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {token}
end
return redis.call('pttl', KEYS[1])
