-- Acquire the write side of a read-write lock (Redisson's RedissonReadWriteLock layout).
-- KEYS[1] lock name N (see rw_read_acquire.lua)
-- ARGV[1] lease in ms, ARGV[2] owner field "<client-uuid>:<owner-id>" (the hash field is
-- owner..":write")
-- Returns nil when acquired or re-entered; the status reply WOULD_DEADLOCK when the owner holds a read
-- of N and no write (an upgrade: it would wait for itself, so it is refused at once): a read is held
-- while one of its timeout keys, levels count..1 (at most max_levels of them), is alive; a reader
-- field whose levels all ended (a fixed lease that ran out, left in the hash while other readers
-- keep it) holds nothing, and the owner waits like any other writer. Otherwise the most ms to wait
-- before calling again (>= 1), or -1 when the key has no expiry (wait for a message on
-- redisson_rwlock:{N} only). A key of another type raises WRONGTYPE from HGET. A hash with no mode and
-- no expiry whose fields are not holders is not a lock: WRONGTYPE (foreign_hash.lua).
--
-- Unlike Redisson: re-entry sets the TTL to max(PTTL, lease) instead of PTTL + lease (which grows
-- without bound); an upgrade is refused instead of waiting for ever; a hash without "mode" (another
-- kind of lock under this name) is contention, not taken over.
-- Fencing (optional): with KEYS[2] the token key, a grant returns the token (a bulk string of
-- decimal digits) instead of nil: the token is made as in fenced_acquire.lua (INCR; a missing key
-- starts from the server's clock with a 7-day TTL). A token key that does not hold a number, or whose
-- next token would be 2^53 or more, fails the grant with an error before the grant writes anything;
-- only a grant takes a token.
-- A mode field that holds neither "read" nor "write" fails with WRONGTYPE (nothing written): no kind
-- can take or free such a hash, and Redisson's scripts would wait on it until its TTL, or forever.
local name = KEYS[1]
local lease, me = tonumber(ARGV[1]), ARGV[2]
local token_key = KEYS[2]
-- #include optional_fencing_token.lua
local writer = me .. ':write'
-- #include rwlock_timeout_key.lua
-- #include max_read_levels.lua

-- Whether the owner holds a read that is alive: one of its timeout keys exists.
local function holds_a_read()
  local n = tonumber(redis.call('hget', name, me))
  if not n then return false end
  n = math.floor(math.min(n, max_levels))
  for j = n, 1, -1 do
    if redis.call('exists', timeout_key(me, string.format('%d', j))) == 1 then return true end
  end
  return false
end

local mode = redis.call('hget', name, 'mode')
if mode == false then
  if redis.call('exists', name) == 0 then
    local e = take_token()
    if e then return e end
    redis.call('hset', name, 'mode', 'write', writer, '1')
    redis.call('pexpire', name, ARGV[1])
    return granted()
  end
elseif mode == 'write' and redis.call('hexists', name, writer) == 1 then
  local e = take_token()
  if e then return e end
  redis.call('hincrby', name, writer, 1)
  if redis.call('pttl', name) < lease then redis.call('pexpire', name, ARGV[1]) end
  return granted()
elseif mode == 'read' and holds_a_read() then
  return redis.status_reply('WOULD_DEADLOCK')
elseif mode ~= 'read' and mode ~= 'write' then
  return redis.error_reply("WRONGTYPE the hash's mode field holds neither 'read' nor 'write': not a read-write lock")
end
-- #include foreign_hash.lua
local t = busy_ttl(name, mode == false)
if type(t) == 'table' or t == -1 then return t end
if t < 1 then return 1 end
return t
