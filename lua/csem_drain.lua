-- csem_drain.lua: take every permit a counting semaphore has available.
-- KEYS[1] the count <name>
-- Returns the permits taken: the count when it is above 0 (it becomes
-- 0), else 0, and nothing changes (a count below 0 stays as it is).
-- Not resent: a resent request would answer 0 for permits the first send
-- took.
local count = tonumber(redis.call('get', KEYS[1]) or '0')
if count <= 0 then
  return 0
end
redis.call('decrby', KEYS[1], count)
return count
