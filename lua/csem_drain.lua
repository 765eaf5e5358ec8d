-- csem_drain.lua (after refuse.lua): take every permit a counting
-- semaphore has available.
-- KEYS[1] the count <name>
-- KEYS[2] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- Returns the permits taken: the count when it is above 0 (it becomes
-- 0; returned as the count's own text, a bulk string), else 0, and
-- nothing changes (a count below 0 stays as it is).
-- Not resent: a resent request would answer 0 for permits the first send
-- took. Refused, with nothing changed, while the name's other form is in
-- use.
if in_use(KEYS[1], KEYS[2]) then
  return name_conflict(KEYS[2])
end
local count = redis.call('get', KEYS[1])
if not count or tonumber(count) <= 0 then
  return 0
end
-- The count is taken and returned as the server's string: as a Lua
-- number it is exact only up to 2^53 (and Redis formats one above 10^17
-- in a form DECRBY refuses).
redis.call('decrby', KEYS[1], count)
return count
