-- Included by the count-down latch's latched calls (latch_try_set_count.lua, latch_count_down.lua),
-- after `pub` was set to the publish command argument: refuses a publish command that is neither
-- "publish" nor "spublish", and answers a call sent again under a request id that already ran (its
-- request latch is KEYS[2]) with that call's answer, changing nothing.
if pub ~= 'publish' and pub ~= 'spublish' then
  return redis.error_reply('ERR publish command must be PUBLISH or SPUBLISH')
end
local latched = redis.call('get', KEYS[2])
if latched then return tonumber(latched) end
