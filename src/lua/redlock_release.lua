-- Release one node of a RedLock: compare-and-delete.
-- KEYS[1] lock name; ARGV[1] value
-- Returns 1 when our value was deleted, 0 when there is no key, -1 when it holds another value.
-- Only GET and DEL: it works on a server that is out of memory.
-- #include redlock_compare.lua
if state == 1 then
  redis.call('del', KEYS[1])
end
return state
