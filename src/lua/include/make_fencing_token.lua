-- Included where a grant makes its fencing token from `token_key` (fenced_acquire.lua,
-- mutex_fenced_acquire.lua, and take_token() in optional_fencing_token.lua): statements, not a
-- function, because two Lua functions per call cost the fenced mutex pair 7 % more script time.
-- Leaves `made`, the token, or `made_error`, the reply for a key that holds no number or another
-- type: INCR's own error with the key's name (WRONGTYPE keeps its prefix); an OOM refusal with the
-- server's words alone. The common case is one
-- INCR (Redisson's own step, which keeps the key's TTL); a missing key (INCR gives 1), or one that
-- held 0 or less, starts from the server's clock in microseconds, with a 7-day TTL: a token is
-- never below 1. A sequence below 10^15 that is not ours (Redisson's) moves up to the clock too,
-- keeping its TTL.
-- A token is never 2^53 or more either: the INCR's reply is a Lua number (a double), which cannot
-- hold such a token exactly, so two grants would get the same one, and not the key's value. Such
-- a key (someone set it there; Redisson's own grants would take ages to get there) fails the grant
-- with an error naming the key, and the INCR is taken back (DECR, through pcall: where DECR is
-- renamed the key keeps that increment, which only makes the sequence one larger).
local made = redis.pcall('incr', token_key)
local made_error = nil
if type(made) == 'table' and string.sub(tostring(made.err), 1, 4) == 'OOM ' then
  -- The server's state, not the key's: naming the key would blame it.
  made_error = redis.error_reply(tostring(made.err))
elseif type(made) == 'table' then
  made_error = redis.error_reply(tostring(made.err) .. ' (the fencing token key ' .. token_key .. ')')
elseif made >= 9007199254740992 then
  redis.pcall('decr', token_key)
  made_error = redis.error_reply('ERR fencing token out of range: the next token would be 2^53 or more, '
    .. 'which the scripts cannot hand out exactly (the fencing token key ' .. token_key .. ')')
elseif made < 1000000000000000 then
  -- Below 10^15 (2001 in microseconds): not a sequence of ours, which starts from the clock. A
  -- missing key (INCR gives 1; ours: a 7-day TTL), a key set to 0 or less, or Redisson's own
  -- sequence, which starts at 1 on a missing key: after our key expired, a Redisson grant restarts
  -- it there, below every token before. It moves up to the clock, keeping that key's TTL (none:
  -- Redisson's key is immortal, and stays so).
  local now = redis.call('time')
  local was = made
  made = tonumber(now[1]) * 1000000 + tonumber(now[2])
  if was <= 1 then
    redis.call('set', token_key, string.format('%d', made), 'PX', 604800000)
  else
    redis.call('set', token_key, string.format('%d', made), 'KEEPTTL')
  end
end
