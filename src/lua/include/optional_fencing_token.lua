-- Included (cmake/redlease_embed_lua_gen.cmake) by the acquire scripts whose token key is optional:
-- `token_key` is that key, nil without fencing. A token key that does not hold a number fails the
-- script before anything is written; granted() is a grant's reply: nil, or with fencing the token as
-- a bulk string of decimal digits, made as in fenced_acquire.lua (INCR; a missing key starts from the
-- server's clock in microseconds, with a 7-day TTL). A string, not {token}: Redis turns a Lua table
-- into a reply at a cost that was a quarter of the whole fencing overhead.
if token_key then
  local v = redis.call('get', token_key)
  if v and not tonumber(v) then
    return redis.error_reply('ERR fencing token key ' .. token_key .. ' does not hold a number')
  end
end
local function granted()
  if not token_key then return nil end
  local token = redis.call('incr', token_key)
  if token == 1 then
    local t = redis.call('time')
    token = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('set', token_key, string.format('%d', token), 'PX', 604800000)
  end
  return string.format('%d', token)
end
