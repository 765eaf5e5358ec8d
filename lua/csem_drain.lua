-- csem_drain.lua (after refuse.lua): take every permit a counting
-- semaphore has available.
-- KEYS[1] the count <name>
-- KEYS[2] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- Returns the permits taken: the count when it is above 0 (it becomes
-- 0), else 0, and nothing changes (a count below 0 stays as it is).
-- Not resent: a resent request would answer 0 for permits the first send
-- took. Refused, with nothing changed, while the name's other form is in
-- use.
if in_use(KEYS[1], KEYS[2]) then
  return name_conflict(KEYS[2])
end
local count = tonumber(redis.call('get', KEYS[1]) or '0')
if count <= 0 then
  return 0
end
redis.call('decrby', KEYS[1], count)
return count
