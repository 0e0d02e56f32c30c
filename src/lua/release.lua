-- Release one hold of a reentrant lock; idempotent on retry.
-- KEYS[1] lock name, KEYS[2] unlock channel (redisson_lock__channel:{name})
-- ARGV[1] unlock message ("0"), ARGV[2] lease in ms for the holds that remain,
-- ARGV[3] owner field, ARGV[4] the hold count the client expects before this release,
-- ARGV[5] "1" when this is a retry of a release whose reply was lost
-- Returns nil: the owner holds nothing; 0: released one hold, others remain; 1: released and freed.
-- A retry finding the count already one lower returns 0 without decrementing again, so a lost
-- reply never costs a double decrement. (Redisson writes a latch key per unlock for this; the
-- expected count needs no extra key and no extra command.)
local count = redis.call('hget', KEYS[1], ARGV[3])
if count == false then
  return nil
end
if ARGV[5] == '1' and tonumber(count) == tonumber(ARGV[4]) - 1 then
  return 0
end
count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
