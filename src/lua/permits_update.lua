-- Set a permit's lease again (Redisson's updateLeaseTime), on the server's clock.
-- KEYS[1] name, KEYS[2] {name}:timeout
-- ARGV[1] channel, ARGV[2] publish command, ARGV[3] the new lease in ms (-1: none), ARGV[4] the id
-- Returns 1 when the permit was there (after reclaiming expired ones), 0 when not.
local pub = ARGV[2]
local channel = ARGV[1]
-- #include permits_common.lua
reclaim(1000)
if not redis.call('zscore', KEYS[2], ARGV[4]) then return 0 end
local lease = tonumber(ARGV[3])
local score = '922337203685477'
if lease >= 0 then score = now + lease end
redis.call('zadd', KEYS[2], score, ARGV[4])
return 1
