-- Included (cmake/redlease_embed_lua_gen.cmake) by the acquire scripts whose token key is optional:
-- `token_key` is that key, nil without fencing. A grant calls take_token() before it writes
-- anything, and returns what it gives back when that is not nil: an error, when the token key does
-- not hold a number or its next token would be 2^53 or more (make_fencing_token.lua), so that a
-- grant that cannot have a token leaves nothing behind. granted() is then the grant's reply: nil,
-- or with fencing the token as a bulk string of decimal digits. A string, not {token}: Redis turns
-- a Lua table into a reply at a cost that was a quarter of the whole fencing overhead. The token is
-- taken by the grant alone: an attempt that waits costs nothing more.
local token = nil
local function take_token()
  if not token_key then return nil end
  -- #include make_fencing_token.lua
  if made_error then return made_error end
  token = made
  return nil
end
local function granted()
  if not token then return nil end
  return string.format('%d', token)
end
