-- Give back the permits of an acquisition attempt whose reply never came, or that was cancelled;
-- exactly once, whatever the order of the attempt, the undo and their retries.
-- KEYS[1] semaphore name, KEYS[2] the attempt's latch (redisson_unlock_latch:{name}:<attempt id>)
-- ARGV[1] channel (redisson_sc:{name}), ARGV[2] permits the attempt took, ARGV[3] latch lifetime in ms,
-- ARGV[4] publish command ("publish" or "spublish"; absent: "publish")
-- Returns 1 when the permits were given back, 0 when the attempt took none (or an earlier undo gave
-- them back). Either way the latch then says 'undone': a late attempt takes nothing.
local pub = ARGV[4] or 'publish'
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local mark = redis.call('get', KEYS[2])
if mark == 'undone' then return 0 end
redis.call('set', KEYS[2], 'undone', 'PX', ARGV[3])
if mark == 'granted' then
  local value = redis.call('incrby', KEYS[1], ARGV[2])
  redis.pcall(pub, ARGV[1], tostring(value))
  return 1
end
return 0
