-- csem_add.lua: give permits to a counting semaphore (a release, or
-- permits added), or take some away.
-- KEYS[1] the count <name>
-- KEYS[2] channel redisson_sc:{<name>}
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] permits to add (< 0 takes away; the count may go below 0, and
--         then no permit is handed out until enough come back)
-- Returns the new count. When permits were added and the count is above
-- 0, the new count is published, as Redisson's release publishes it.
-- Not safe to resend: a resent request adds twice.
local count = redis.call('incrby', KEYS[1], ARGV[2])
if tonumber(ARGV[2]) > 0 and count > 0 then
  redis.call(ARGV[1], KEYS[2], count)
end
return count
