-- Take ARGV[1] units from one segment of a stock. KEYS are the segments; ARGV[2] the 0-based segment
-- to try first. Segments are tried in turn from there; the first holding enough is decremented.
-- Returns the 1-based index of the segment used, 0 when none holds enough, or {index, value} for the
-- first segment met that holds something other than a count DECRBY accepts (a signed 64-bit
-- decimal), so that the client can name it.
-- ARGV[1] is 1 .. 2^63-1 in decimal without leading zeros. Counts compare as decimal strings (fewer
-- digits is lower, then digit by digit) and DECRBY gets ARGV[1] itself: as Lua numbers (doubles) an
-- order above 2^53 would round down and oversell.
local want = ARGV[1]
local n = #KEYS
local start = tonumber(ARGV[2]) % n
local function fits(digits, limit)
  return #digits < #limit or (#digits == #limit and digits <= limit)
end
for i = 0, n - 1 do
  local idx = (start + i) % n + 1
  local v = redis.pcall('get', KEYS[idx])
  if not v then v = '0' end
  if type(v) ~= 'string' then return {idx, '(not a string)'} end
  if v ~= '0' then
    local sign, digits = string.match(v, '^(%-?)([1-9]%d*)$')
    if not digits or not fits(digits, sign == '' and '9223372036854775807' or '9223372036854775808') then
      return {idx, v}
    end
    if sign == '' and fits(want, digits) then
      redis.call('decrby', KEYS[idx], want)
      return idx
    end
  end
end
return 0
