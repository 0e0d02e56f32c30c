-- Included where a fair lock's queue is purged of dead waiters before anyone is told or granted
-- (fair_acquire.lua, fair_release.lua, fair_force_unlock.lua): statements, not a function. Expects
-- `queue`, `deadlines`, `now` (the client's epoch ms) and `me`, a waiter its own call never purges
-- (it is alive; nil for none). A waiter is dead when its deadline is not after `now`, or when it
-- has none (Redisson stops there and the queue stalls), or when it is 10^13 ms (three centuries) or
-- more away: no lease (redlease's longest is 2^40 ms) and allowance chain makes one, and a +inf
-- written there would stall the queue for good. Leaves `head`, the first waiter left (false for an
-- empty queue), and `purged`, whether any went.
-- At most 1000 dead waiters go per call: a queue of a million dead entries costs one call a few
-- milliseconds, not the server seconds; a caller behind the rest comes back at once (bound() says
-- 1 ms for a dead head) and its next call purges the next thousand.
local purged = false
local head = redis.call('lindex', queue, 0)
for _ = 1, 1000 do
  if not head or head == me then break end
  local s = tonumber(redis.call('zscore', deadlines, head))
  if s and s > now and s - now < 10000000000000 then break end
  redis.call('zrem', deadlines, head)
  redis.call('lpop', queue)
  purged = true
  head = redis.call('lindex', queue, 0)
end
