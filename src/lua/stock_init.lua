-- Set a segmented stock: KEYS are the segments, ARGV[i] the count of KEYS[i] as decimal text. The
-- client splits the total in 64-bit integers: Lua numbers are doubles, which round above 2^53 and
-- which SET would store as "1e+17" from 1e17 on. Returns the number of segments.
for i = 1, #KEYS do
  redis.call('set', KEYS[i], ARGV[i])
end
return #KEYS
