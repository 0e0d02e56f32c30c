-- Acquire the read side of a read-write lock (Redisson's RedissonReadWriteLock layout).
-- KEYS[1] lock name N (a hash: "mode" -> "read"|"write", reader fields owner -> hold count, the writer
-- field owner..":write" -> hold count)
-- ARGV[1] lease in ms, ARGV[2] owner field "<client-uuid>:<owner-id>"
-- Returns nil when acquired (or re-entered, or taken by the writer itself: a downgrade). Otherwise
-- the most ms to wait before calling again (>= 1), or -1 when the lock's key has no expiry (wait for
-- a message on redisson_rwlock:{N} only). A key of another type raises WRONGTYPE from HGET. A hash
-- with no mode and no expiry whose fields are not holders is not a lock: WRONGTYPE (foreign_hash.lua).
--
-- Each acquisition i (1 = the owner's first hold) also sets the string key
-- {N}:<owner>:rwlock_timeout:<i> = "1" with this lease (N:<owner>:... when N contains "{"): Java's
-- read unlock takes the hash's TTL from those keys and deletes the hash when none is alive. The key is
-- derived from KEYS[1] in the script, as Redisson does; it is in N's cluster slot by the hash tag.
-- Unlike Redisson, a hash without "mode" (another kind of lock under this name) is contention, not
-- taken over.
-- Fencing (optional): with KEYS[2] the token key, a grant returns the token (a bulk string of
-- decimal digits) instead of nil: the token is made as in fenced_acquire.lua (INCR; a missing key
-- starts from the server's clock with a 7-day TTL). A token key that does not hold a number, or whose
-- next token would be 2^53 or more, fails the grant with an error and leaves nothing written (a
-- re-entry's increment is taken back); only a grant takes a token.
-- A mode field that holds neither "read" nor "write" fails with WRONGTYPE (nothing written): no kind
-- can take or free such a hash, and Redisson's scripts would wait on it until its TTL, or forever.
-- A re-entry that would make the owner's count no count of read holds (below 1, or above
-- max_levels) fails with ERR naming it; the count is left as it was and no token is taken.
local name = KEYS[1]
local lease, me = tonumber(ARGV[1]), ARGV[2]
-- Numbers go to redis.call as strings: Lua turns a number into text with printf("%.14g"), which
-- was a tenth of the server's time in a read pair.
local lease_ms = ARGV[1]
local token_key = KEYS[2]
-- #include optional_fencing_token.lua
-- #include rwlock_timeout_key.lua
-- #include max_read_levels.lua
local mode = redis.call('hget', name, 'mode')
if mode == false then
  if redis.call('exists', name) == 0 then
    local e = take_token()
    if e then return e end
    -- The timeout key first: an ACL that refuses it (its name is not the lock's) fails the grant
    -- before the hash exists; the other way round it left a hash with no TTL that nobody held.
    redis.call('set', timeout_key(me, '1'), '1', 'PX', lease_ms)
    redis.call('hset', name, 'mode', 'read', me, '1')
    redis.call('pexpire', name, lease_ms)
    return granted()
  end
elseif mode == 'read' or (mode == 'write' and redis.call('hexists', name, me .. ':write') == 1) then
  local i = redis.call('hincrby', name, me, 1)
  -- A refused grant takes its level back (no count is left without its key), before a token is
  -- taken where it can. Not a Lua function: one per call costs the read pair measurably.
  local refused = nil
  if i < 1 or i > max_levels then
    -- The owner's count was not one a client can have made (below 0, or as deep as a read nests,
    -- someone overwrote it): a grant on it would be lost at its first renewal.
    refused = redis.error_reply('ERR the read hold count of ' .. me .. ' in ' .. name .. ' holds ' ..
      string.format('%d', i - 1) .. ': a re-entry would make it ' .. string.format('%d', i) ..
      ', not a count of read holds (1..' .. max_levels .. ')')
  else
    refused = take_token()
    if not refused then
      local set = redis.pcall('set', timeout_key(me, string.format('%d', i)), '1', 'PX', lease_ms)
      -- Refused (an ACL without the timeout keys).
      if type(set) == 'table' and set.err then refused = redis.error_reply(set.err) end
    end
  end
  if refused then
    if i == 1 then redis.call('hdel', name, me) else redis.call('hincrby', name, me, -1) end
    return refused
  end
  if redis.call('pttl', name) < lease then redis.call('pexpire', name, lease_ms) end
  return granted()
elseif mode ~= 'write' then
  return redis.error_reply("WRONGTYPE the hash's mode field holds neither 'read' nor 'write': not a read-write lock")
end
-- #include foreign_hash.lua
local t = busy_ttl(name, mode == false)
if type(t) == 'table' or t == -1 then return t end
if t < 1 then return 1 end
return t
