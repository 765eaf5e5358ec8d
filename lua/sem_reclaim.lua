-- sem_reclaim.lua (after refuse.lua): prepended to every semaphore script
-- that looks at the permits (Redisson RPermitExpirableSemaphore layout).
-- It sets `now` (the server's clock, in ms) and gives the permits whose
-- lease has ended back to the available count: a process that died
-- without releasing its permits loses them when their lease ends,
-- whoever calls next.
-- KEYS[1] available permits <name> (a string holding an integer)
-- KEYS[2] permit leases {<name>}:timeout (sorted set: permit ID, 16 raw
--         bytes -> the end of its lease, ms)
-- KEYS[3] channel redisson_sc:{name}
-- KEYS[#KEYS], the last key: the key of the name's other form, or
--         KEYS[1] (see refuse.lua)
-- ARGV[1] publish command ('publish' or 'spublish')
-- Publishes the new available count when permits came back. Returns
-- nothing, and the script it prefixes goes on; or, while the name's
-- other form is in use, refuses the script before it writes anything:
-- the leases are the other form's too, and the permits would come back
-- to the wrong count.
if in_use(KEYS[1], KEYS[#KEYS]) then
  return name_conflict(KEYS[#KEYS])
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local back = redis.call('zremrangebyscore', KEYS[2], '-inf', now)
if back > 0 then
  local available = redis.call('incrby', KEYS[1], back)
  if available > 0 then
    redis.call(ARGV[1], KEYS[3], available)
  end
end
