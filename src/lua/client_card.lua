-- A client's description of itself (docs/design.md, "Who holds it: client cards"): written when the
-- client first takes or waits for a lock, then again at most every half TTL while it holds or waits.
-- KEYS[1] the card, redlease:client:{<client uuid>}; ARGV[1] its TTL in ms; ARGV[2..] field, value,
-- field, value... (host, pid, program, name, started; a waiting writer adds waiting:<lock name>).
-- Fields written before and not named here (another wait's) stay. Returns 1.
redis.call('hset', KEYS[1], unpack(ARGV, 2))
redis.call('pexpire', KEYS[1], ARGV[1])
return 1
