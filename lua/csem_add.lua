-- csem_add.lua (after refuse.lua): give permits to a counting semaphore
-- (a release, or permits added), or take some away.
-- KEYS[1] the count <name>
-- KEYS[2] channel redisson_sc:{<name>}
-- KEYS[3] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] permits to add (< 0 takes away; the count may go below 0, and
--         then no permit is handed out until enough come back)
-- Returns the new count. When permits were added and the count is above
-- 0, the new count is published, as Redisson's release publishes it.
-- Not safe to resend: a resent request adds twice. Refused, with nothing
-- changed, while the name's other form is in use (its waiters listen on
-- the same channel).
if in_use(KEYS[1], KEYS[3]) then
  return name_conflict(KEYS[3])
end
local count = redis.call('incrby', KEYS[1], ARGV[2])
if tonumber(ARGV[2]) > 0 and count > 0 then
  redis.call(ARGV[1], KEYS[2], count)
end
return count
