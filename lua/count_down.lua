-- count_down.lua: put before the scripts that release hold levels (as
-- lock_unlock.lua, fair_unlock.lua and rw_write_unlock.lua). It defines
-- count_down(key, field, target): the count of field in the hash key is
-- set to target (> 0) when it is above it, never raised; it returns the
-- count left, or nil when the field holds nothing. Setting the count
-- rather than decrementing it makes a resent request release once.
local function count_down(key, field, target)
  local n = tonumber(redis.call('hget', key, field))
  if n and n > target then
    redis.call('hset', key, field, target)
    n = target
  end
  return n
end
