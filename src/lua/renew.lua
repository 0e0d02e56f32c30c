-- Watchdog: renew a batch of locks in one call.
-- KEYS[i] lock names; ARGV[1] lease in ms; ARGV[i+1] "h<owner field>" for a reentrant hash or
-- "s<token>" for a mutex string.
-- Returns an array, one entry per key: 1 renewed, 0 key gone, 2 held by another owner,
-- 3 key of the wrong type.
local result = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local arg = ARGV[i + 1]
  local kind = string.sub(arg, 1, 1)
  local id = string.sub(arg, 2)
  local t = redis.call('type', key).ok
  if t == 'none' then
    result[i] = 0
  elseif kind == 'h' then
    if t ~= 'hash' then
      result[i] = 3
    elseif redis.call('hexists', key, id) == 1 then
      redis.call('pexpire', key, ARGV[1])
      result[i] = 1
    else
      result[i] = 2
    end
  else
    if t ~= 'string' then
      result[i] = 3
    elseif redis.call('get', key) == id then
      redis.call('pexpire', key, ARGV[1])
      result[i] = 1
    else
      result[i] = 2
    end
  end
end
return result
