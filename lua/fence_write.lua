-- fence_write.lua: write a fenced register only if the writer's token is
-- not older than the last token applied to it.
-- KEYS[1] register hash (fields 'token' and 'value')
-- ARGV[1] the writer's fencing token
-- ARGV[2] the value
-- Returns {1, token} when the write was applied, {0, last} when it was
-- refused because a newer token (last) was applied before.
local last = redis.call('hget', KEYS[1], 'token')
if last and tonumber(ARGV[1]) < tonumber(last) then
  return {0, tonumber(last)}
end
redis.call('hset', KEYS[1], 'token', ARGV[1], 'value', ARGV[2])
return {1, tonumber(ARGV[1])}
