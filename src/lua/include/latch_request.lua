-- Included by the count-down latch's latched calls (latch_try_set_count.lua, latch_count_down.lua),
-- after `pub` was set to the publish command argument: refuses a publish command that is neither
-- "publish" nor "spublish", and answers a call sent again under a request id that already ran (its
-- request latch is KEYS[2]) with that call's answer, changing nothing. KEYS[3..]: settled request
-- latches of this name that no call will read again (their calls were answered), deleted in passing.
if #KEYS > 2 then redis.call('del', unpack(KEYS, 3)) end
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local latched = redis.call('get', KEYS[2])
if latched then return tonumber(latched) end
