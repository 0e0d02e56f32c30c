-- Included (cmake/redlease_embed_lua_gen.cmake) by the acquire scripts whose token key is optional:
-- `token_key` is that key, nil without fencing. A grant calls take_token() before it writes
-- anything, and returns what it gives back when that is not nil: an error, when the token key does
-- not hold a number (INCR's own error, with the key's name; WRONGTYPE keeps its prefix), so that a
-- grant that cannot have a token leaves nothing behind. granted() is then the grant's reply: nil, or
-- with fencing the token as a bulk string of decimal digits, made as in fenced_acquire.lua (INCR; a
-- missing key, or one that held 0 or less, starts from the server's clock in microseconds, with a
-- 7-day TTL: a token is never below 1). A string, not
-- {token}: Redis turns a Lua table into a reply at a cost that was a quarter of the whole fencing
-- overhead. The token is taken by the grant alone: an attempt that waits costs nothing more.
local token = nil
local function take_token()
  if not token_key then return nil end
  local t = redis.pcall('incr', token_key)
  if type(t) == 'table' then
    return redis.error_reply(tostring(t.err) .. ' (the fencing token key ' .. token_key .. ')')
  end
  if t <= 1 then
    local now = redis.call('time')
    t = tonumber(now[1]) * 1000000 + tonumber(now[2])
    redis.call('set', token_key, string.format('%d', t), 'PX', 604800000)
  end
  token = t
  return nil
end
local function granted()
  if not token then return nil end
  return string.format('%d', token)
end
