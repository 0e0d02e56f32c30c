-- Where the RedLock key KEYS[1] stands against our value ARGV[1]: `state` is 1 (our value), 0 (no
-- key), -1 (another value). GET only: it runs on a server out of memory.
local v = redis.call('get', KEYS[1])
local state = -1
if v == ARGV[1] then
  state = 1
elseif v == false then
  state = 0
end
