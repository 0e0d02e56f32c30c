-- Watchdog: renew a batch of locks in one call.
-- KEYS[i] lock names; ARGV[1] lease in ms ("0": check ownership only, leave the lease); ARGV[2] one letter per key: "h" a reentrant hash (ARGV[i+2]
-- is the owner field), "s" a mutex string (ARGV[i+2] is the token). An empty ARGV[i+2] repeats the
-- previous key's id: one owner holding many locks sends its field once per call.
-- Returns only the failures, as a flat array of pairs {i, code}: 0 key gone, 2 held by another
-- owner, 3 key of the wrong type. An empty array: every lock renewed.
-- The common case costs one lookup and one PEXPIRE per key; TYPE runs only for a failure.
local lease = ARGV[1]
local kinds = ARGV[2]
local failed = {}
local id = nil
for i = 1, #KEYS do
  local key = KEYS[i]
  local given = ARGV[i + 2]
  if given ~= '' then id = given end
  local hash = string.byte(kinds, i) == 104
  local mine
  if hash then
    mine = redis.pcall('hexists', key, id) == 1
  else
    mine = redis.pcall('get', key) == id
  end
  if mine then
    if lease ~= '0' then redis.call('pexpire', key, lease) end
  else
    local t = redis.call('type', key).ok
    local code = 2
    if t == 'none' then
      code = 0
    elseif (hash and t ~= 'hash') or (not hash and t ~= 'string') then
      code = 3
    end
    failed[#failed + 1] = i
    failed[#failed + 1] = code
  end
end
return failed
