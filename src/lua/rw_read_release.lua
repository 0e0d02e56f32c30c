-- Release one read hold of a read-write lock; exactly once, however often it is retried (the latch
-- works as in release.lua).
-- KEYS[1] lock name N, KEYS[2] latch of this release (redisson_unlock_latch:{N}:<request id>)
-- ARGV[1] channel (redisson_rwlock:{N}), ARGV[2] publish command ("publish" or "spublish"),
-- ARGV[3] owner field, ARGV[4] the read hold count the client expects before this release, ARGV[5]
-- "1" when this is a retry of a release whose reply never came, ARGV[6] latch lifetime in ms
-- Returns nil: the owner holds no read; 0: released one hold, the lock is still held (by this owner,
-- another reader or the writer); 1: released and the lock is free ("0" published on ARGV[1]).
--
-- Java's rule, which both sides must follow: the hold's own {N}:<owner>:rwlock_timeout:<i> key goes,
-- and in read mode, when no other reader's timeout key is alive (only crashed readers' fields
-- remain), the hash is deleted. The timeout keys are derived from KEYS[1] and the hash's fields, as
-- Redisson does (N's slot, by the hash tag).
-- Java also scans every reader's keys to cut the hash's TTL down to the longest one left. We stop at
-- the first live key and only ever lengthen the TTL to it: every acquisition and renewal already
-- keeps the hash at least as long as its own timeout keys, so the hash never expires under a live
-- reader; the cost is that after the longest reader leaves and the others crash, a writer may wait
-- out the rest of the hash's TTL (at most a lease) instead of the longest crashed reader's.
-- Unlike Redisson: no message and no latch "1" when the lock is gone (nil, not success); under a
-- write (the owner's own downgraded reads) the writer's TTL is left alone.
-- A mode field that holds neither "read" nor "write" fails with WRONGTYPE, as both acquires do, and
-- nothing is changed (no latch either): such a hash is no read-write lock, and the release would
-- otherwise take it for one in read mode and could delete it whole.
local latched = redis.call('get', KEYS[2])
if latched then
  if latched == '-1' then return nil end
  return tonumber(latched)
end
local pub = string.lower(ARGV[2])
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local name, me = KEYS[1], ARGV[3]
-- #include rwlock_timeout_key.lua
-- #include max_read_levels.lua

local result = nil
local state = redis.call('hmget', name, 'mode', me)
local mode, count = state[1], state[2]
if mode ~= false and mode ~= 'read' and mode ~= 'write' then
  return redis.error_reply("WRONGTYPE the hash's mode field holds neither 'read' nor 'write': not a read-write lock")
end
local count_text = count  -- as stored: the timeout key's suffix, without printf (see rw_read_acquire)
if mode ~= false and count ~= false then
  count = tonumber(count)
  if ARGV[5] == '1' and count == tonumber(ARGV[4]) - 1 then
    result = 0
  else
    -- A count that is no whole number (someone overwrote the field) is the last level (release.lua).
    if count and count > 1 and string.format('%d', count) == count_text then
      redis.call('hincrby', name, me, -1)
    else
      redis.call('hdel', name, me)
    end
    redis.call('del', timeout_key(me, count_text))
    result = 1
    if mode == 'write' then
      if redis.call('hlen', name) > 1 then result = 0 end
    else
      -- Is any other reader alive? The first live timeout key answers it. First one random field's
      -- level-1 key (HRANDFIELD, Redis 6.2; 1.4 us where HGETALL of 16 readers costs 5): with many
      -- readers it is almost always alive. Otherwise, or on an older server, each field in turn.
      local function keep(t)
        if redis.call('pttl', name) < t then redis.call('pexpire', name, string.format('%d', t)) end
        result = 0
      end
      -- At most max_levels keys are looked at, among the fields of one HSCAN step (about 1000: not
      -- HGETALL, which copies every field of a hash that crashed readers may have grown to a
      -- million); when either runs out undecided, the others count as alive and the hash keeps its
      -- TTL, which no live reader's key outlasts: the lock is free by then at the latest.
      local budget = max_levels - 1
      local pick = redis.pcall('hrandfield', name)
      if type(pick) == 'string' and pick ~= 'mode' then
        local t = redis.call('pttl', timeout_key(pick, '1'))
        if t > 0 then keep(t) end
      end
      if result == 1 then
        local step = redis.call('hscan', name, '0', 'COUNT', max_levels)
        local fields = step[2]
        for i = 1, #fields, 2 do
          local n = tonumber(fields[i + 1])
          if n then
            for j = n, 1, -1 do
              if budget == 0 then
                result = 0
                break
              end
              budget = budget - 1
              local t = redis.call('pttl', timeout_key(fields[i], j == n and fields[i + 1] or string.format('%d', j)))
              if t > 0 then
                keep(t)
                break
              end
            end
          end
          if result == 0 then break end
        end
        if step[1] ~= '0' then result = 0 end
      end
    end
    if result == 1 then
      redis.call('del', name)
      redis.pcall(pub, ARGV[1], '0')
    end
  end
end
if ARGV[5] == '1' then
  redis.call('set', KEYS[2], result == nil and -1 or result, 'PX', ARGV[6])
end
return result
