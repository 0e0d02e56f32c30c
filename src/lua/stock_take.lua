-- Take ARGV[1] units from one segment of a stock. KEYS are the segments; ARGV[2] the 0-based segment
-- to try first. Segments are tried in turn from there; the first holding enough is decremented.
-- Returns the 1-based index of the segment used, or 0 when none holds enough.
local want = tonumber(ARGV[1])
local n = #KEYS
local start = tonumber(ARGV[2]) % n
for i = 0, n - 1 do
  local idx = (start + i) % n + 1
  local have = tonumber(redis.call('get', KEYS[idx]) or '0')
  if have >= want then
    redis.call('decrby', KEYS[idx], want)
    return idx
  end
end
return 0
