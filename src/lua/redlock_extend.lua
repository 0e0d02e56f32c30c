-- Extend one node of a held RedLock: compare-and-pexpire.
-- KEYS[1] lock name; ARGV[1] value, ARGV[2] TTL in ms
-- Returns 1 when our value's TTL was set (extended), 0 when there is no key (restarted empty,
-- evicted: the caller takes it again with redlock_acquire), -1 when it holds another value (taken).
-- #include redlock_compare.lua
if state == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
end
return state
