-- Watchdog for read-write locks: renew a batch of holds in one call.
-- KEYS[i] lock names; ARGV[1] lease in ms ("0": check ownership only, leave the lease); ARGV[2] one
-- letter per key: "w" a write hold, "r" a read hold; ARGV[i+2] the owner field "<client-uuid>:<id>"
-- (for "w" the hash field is owner..":write"). An empty ARGV[i+2] repeats the previous key's owner.
-- Returns only the failures, as a flat array of pairs {i, code}: 0 key gone, 2 not held by this owner
-- (for "w": no write field; for "r": no read field), 3 key of the wrong type, 4 the read field holds
-- no count from 1 to max_levels (garbage). An empty array: every hold renewed.
--
-- A read hold renews, like Java's ReadLockTask, every timeout key {N}:<owner>:rwlock_timeout:<j>,
-- j = count..1, that still exists (a level whose explicit lease ended stays ended), and extends the
-- hash to the lease; it never shortens the hash (a writer's longer lease stays). A write hold
-- extends the hash to the lease too, and never shortens it either: Java's LockTask sets it
-- unconditionally, which cuts the hash below a longer lease of the owner's own (downgrade) reads,
-- and lets another writer in while that read is held.
-- #include max_read_levels.lua
local lease = ARGV[1]
local kinds = ARGV[2]
local failed = {}
local id = nil
for i = 1, #KEYS do
  local key = KEYS[i]
  local given = ARGV[i + 2]
  if given ~= '' then id = given end
  local write = string.byte(kinds, i) == 119
  local count
  if write then
    count = redis.pcall('hget', key, id .. ':write')
  else
    count = redis.pcall('hget', key, id)
  end
  if type(count) == 'string' then
    local n = not write and tonumber(count)
    if not write and not (n and n >= 1 and n <= max_levels and n == math.floor(n)) then
      -- Not a count this client can have made (it nests a read at most max_levels deep): the levels
      -- behind it are unknown, and a loop over it could keep the server busy for hours.
      failed[#failed + 1] = i
      failed[#failed + 1] = 4
    elseif lease ~= '0' then
      if write then
        if redis.call('pttl', key) < tonumber(lease) then redis.call('pexpire', key, lease) end
      else
        local prefix
        if string.find(key, '{', 1, true) then prefix = key .. ':' else prefix = '{' .. key .. '}:' end
        for j = n, 1, -1 do
          redis.call('pexpire', prefix .. id .. ':rwlock_timeout:' .. string.format('%d', j), lease)
        end
        if redis.call('pttl', key) < tonumber(lease) then redis.call('pexpire', key, lease) end
      end
    end
  else
    local t = redis.call('type', key).ok
    local code = 2
    if t == 'none' then
      code = 0
    elseif t ~= 'hash' then
      code = 3
    end
    failed[#failed + 1] = i
    failed[#failed + 1] = code
  end
end
return failed
