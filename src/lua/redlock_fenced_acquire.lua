-- Acquire (or re-take) one node of a RedLock, as redlock_acquire.lua does, and draw that node's
-- fencing token (redlock_options::fencing_tokens): the per-node tokens of docs/redlock.md,
-- "Fencing". The token key is this node's own sequence for the name; the lock key's layout stays
-- redsync's and node-redlock's.
-- KEYS[1] lock name, KEYS[2] token key (redlease_redlock_token:{name})
-- ARGV[1] value, ARGV[2] TTL in ms
-- Returns {1, token} when set (granted), {2, token} when the key already held our value (a leftover
-- of an earlier attempt, or a re-take that finds ours: its TTL is set again, and a new token drawn,
-- larger than every one before on this node), 0 when it holds another value (taken). The token is
-- a bulk string of decimal digits, made as in fenced_acquire.lua; a token key that holds no number
-- fails the grant (and a key set by this call is deleted again).
local token_key = KEYS[2]
local state
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  state = 1
elseif redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  state = 2
else
  return 0
end
-- #include make_fencing_token.lua
if made_error then
  if state == 1 then
    redis.call('del', KEYS[1])
  end
  return made_error
end
return {state, string.format('%d', made)}
