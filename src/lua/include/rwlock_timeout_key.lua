-- Included (cmake/redlease_embed_lua_gen.cmake) by the read-write lock scripts: the key of read level
-- `i` of `owner` on the lock `name`, {N}:<owner>:rwlock_timeout:<i> (N:<owner>:... when N contains
-- "{"), as Redisson derives it: in N's cluster slot by the hash tag. `i` is text (see
-- rw_read_acquire.lua on numbers).
local braced = string.find(name, '{', 1, true) ~= nil
local function timeout_key(owner, i)
  if braced then return name .. ':' .. owner .. ':rwlock_timeout:' .. i end
  return '{' .. name .. '}:' .. owner .. ':rwlock_timeout:' .. i
end
