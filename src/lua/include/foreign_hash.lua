-- Included by the acquire scripts of the kinds whose lock is a hash (reentrant, fair, read, write),
-- on the path where the hash is there, not ours, and has no expiry. A lock's hash always has one
-- (every grant sets it), so a hash without is a lock whose TTL someone removed, or not a lock at all:
-- the application's hash under the same name ("user:42" -> {name: bob}), which no holder will ever
-- free and which a waiter would wait on for ever. Its first fields tell (HSCAN reads a small hash
-- whole): a holder's field is "<client id>:<id>" (a writer's adds ":write") holding a whole count,
-- and a read-write lock's hash has a mode. foreign_hash(key) returns a WRONGTYPE error for a hash
-- that is not a lock, else nil. The rule of redlease::is_lock_hash_entry (layout.hpp), which
-- `redlease status` and `unlock` apply. busy_ttl(key, judge) is a busy attempt's reply: the key's
-- PTTL, or that error when it has none and `judge` (the caller knows the hash is not ours).
local function foreign_hash(key)
  local step = redis.call('hscan', key, '0', 'COUNT', 16)[2]
  for i = 1, #step, 2 do
    local f, v = step[i], step[i + 1]
    local mode = f == 'mode' and (v == 'read' or v == 'write')
    local holder = string.find(f, '^.+:%d+$') or string.find(f, '^.+:%d+:write$')
    if not mode and not (holder and string.find(v, '^%-?%d+$')) then
      return redis.error_reply('WRONGTYPE the key holds a hash that is not a lock: its fields are not holders '
        .. '(<client id>:<id> with a count)')
    end
  end
  return nil
end
local function busy_ttl(key, judge)
  local t = redis.call('pttl', key)
  if t == -1 and judge then
    local e = foreign_hash(key)
    if e then return e end
  end
  return t
end
