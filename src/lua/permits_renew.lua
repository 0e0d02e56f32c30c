-- Watchdog: extend the leases of permit-expirable semaphores' permits in one call.
-- KEYS[i] the {name}:timeout zset of hold i; ARGV[1] lease in ms ("0": check only); then for each
-- hold: the number k of its permits, then its k ids.
-- Returns the failures only, as pairs {i, code} (renew.lua's contract): 0 a permit is gone or
-- expired (its hold is lost: an expired permit goes back to the pool at the next reclaim), 3 the key
-- holds another type. A hold renews only if all its permits are there; each gets now + lease on
-- the server's clock.
local lease = tonumber(ARGV[1])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local failed = {}
local a = 2
for i = 1, #KEYS do
  local k = tonumber(ARGV[a])
  local code = nil
  for j = a + 1, a + k do
    local s = redis.pcall('zscore', KEYS[i], ARGV[j])
    if type(s) == 'table' and s.err then
      code = 3
      break
    end
    if not s or tonumber(s) <= now then
      code = 0
      break
    end
  end
  if code == nil then
    if lease > 0 then
      for j = a + 1, a + k do redis.call('zadd', KEYS[i], 'xx', now + lease, ARGV[j]) end
    end
  else
    failed[#failed + 1] = i
    failed[#failed + 1] = code
  end
  a = a + k + 1
end
return failed
