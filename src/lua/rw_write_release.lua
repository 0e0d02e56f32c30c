-- Release one write hold of a read-write lock; exactly once, however often it is retried (the latch
-- works as in release.lua).
-- KEYS[1] lock name N, KEYS[2] latch of this release (redisson_unlock_latch:{N}:<request id>)
-- ARGV[1] channel (redisson_rwlock:{N}), ARGV[2] publish command ("publish" or "spublish"),
-- ARGV[3] lease in ms for the holds that remain, ARGV[4] owner field (the hash field is
-- owner..":write"), ARGV[5] the write hold count the client expects before this release, ARGV[6] "1"
-- when this is a retry of a release whose reply never came, ARGV[7] latch lifetime in ms
-- Returns nil: the owner holds no write; 0: released one hold, others remain; 1: the write is
-- released: the lock is free, or only the owner's own reads remain (mode becomes "read"). Both cases
-- publish "1" on ARGV[1] (wake every waiter).
--
-- Unlike Redisson: the downgrade (mode flips to read) publishes, so waiting readers come in at once,
-- and the hash's TTL is then taken from the remaining reads' timeout keys (deleted if none is
-- alive), not kept at the writer's; no message and no latch "1" when the lock is gone (nil).
-- A release that leaves write holds sets the TTL to ARGV[3], but never below the owner's own read
-- levels taken under the write (a downgrade's reads): the longest of ARGV[3] and their timeout keys'
-- PTTLs, or, when those levels cannot be counted (a field that is no count from 1 to max_levels),
-- never shorter than the TTL the hash has. Redisson sets ARGV[3] alone, and a read with a longer
-- lease then outlives the hash: another writer gets in while it is held.
local latched = redis.call('get', KEYS[2])
if latched then
  if latched == '-1' then return nil end
  return tonumber(latched)
end
local pub = string.lower(ARGV[2])
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local name, me = KEYS[1], ARGV[4]
local writer = me .. ':write'
-- #include rwlock_timeout_key.lua
-- #include max_read_levels.lua

local result = nil
local count = false
-- One call for the mode, the write count and the owner's own read count.
local state = redis.call('hmget', name, 'mode', writer, me)
if state[1] == 'write' then count = state[2] end
if count ~= false then
  local n = tonumber(count)
  if ARGV[6] == '1' and n == tonumber(ARGV[5]) - 1 then
    result = 0
  elseif n and n > 1 and string.format('%d', n) == count then
    redis.call('hincrby', name, writer, -1)
    local lease = ARGV[3]
    local reads = state[3]
    if reads then
      -- The owner's reads under its write: the hash must outlive each of their timeout keys.
      local ttl = tonumber(lease)
      local r = tonumber(reads)
      if r and r >= 1 and r <= max_levels and r == math.floor(r) then
        for j = r, 1, -1 do
          local t = redis.call('pttl', timeout_key(me, string.format('%d', j)))
          if t > ttl then ttl = t end
        end
      else
        local t = redis.call('pttl', name)
        if t == -1 then ttl = nil elseif t > ttl then ttl = t end
      end
      lease = ttl and string.format('%d', ttl)
    end
    if lease then redis.call('pexpire', name, lease) end
    result = 0
  else
    -- The last level, or a count that is no whole number (release.lua).
    result = 1
    local longest = -3
    local undecided = false
    if redis.call('hlen', name) > 2 then
      redis.call('hdel', name, writer)
      redis.call('hset', name, 'mode', 'read')
      -- At most max_levels keys are looked at, among the fields of one HSCAN step (about 1000, as
      -- in rw_read_release.lua); when either runs out, the hash keeps the TTL it has (the writer's
      -- lease, which every read level taken under it is within).
      local budget = max_levels
      local step = redis.call('hscan', name, '0', 'COUNT', max_levels)
      local fields = step[2]
      if step[1] ~= '0' then
        undecided = true
        fields = {}
      end
      for i = 1, #fields, 2 do
        local n = tonumber(fields[i + 1])
        if n then
          for j = n, 1, -1 do
            if budget == 0 then
              undecided = true
              break
            end
            budget = budget - 1
            local t = redis.call('pttl', timeout_key(fields[i], string.format('%d', j)))
            if t > longest then longest = t end
          end
        end
        if undecided then break end
      end
    end
    if undecided then
      -- the TTL stands
    elseif longest > 0 then
      redis.call('pexpire', name, string.format('%d', longest))
    else
      redis.call('del', name)
    end
    redis.pcall(pub, ARGV[1], '1')
  end
end
if ARGV[6] == '1' then
  redis.call('set', KEYS[2], result == nil and -1 or result, 'PX', ARGV[7])
end
return result
