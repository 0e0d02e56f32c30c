-- Set a segmented stock: KEYS are the segments; ARGV[1] the total, split evenly (the first
-- total % #KEYS segments get one unit more). Returns the total.
local total = tonumber(ARGV[1])
local n = #KEYS
local base = math.floor(total / n)
local extra = total - base * n
for i = 1, n do
  local v = base
  if i <= extra then v = v + 1 end
  redis.call('set', KEYS[i], v)
end
return total
