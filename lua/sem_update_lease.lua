-- sem_update_lease.lua (after sem_reclaim.lua): give a held permit a new
-- lease, as Redisson's updateLeaseTime does.
-- KEYS[1] available permits <name>
-- KEYS[2] permit leases {<name>}:timeout (sorted set)
-- KEYS[3] channel redisson_sc:{name}
-- KEYS[4] permit holders {<name>}:relock_holders (hash, see
--         sem_acquire.lua): it is made to live at least as long as the
--         new lease, as a renewal makes it
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] permit ID (16 raw bytes)
-- ARGV[3] lease in ms (> 0)
-- Returns 1 when the permit is held and its lease now ends ARGV[3] from
-- now (longer or shorter than before); 0 when it is not held (released,
-- or its lease ended first: it came back to the count above, and is not
-- taken again). A waiter sleeps until the earliest lease end its last
-- attempt saw (a holder that dies publishes nothing): when the new end
-- comes before the old one, '1' is published on the channel, so that a
-- waiter of each client looks again and sleeps until the new end.
local before = redis.call('zscore', KEYS[2], ARGV[2])
if not before then
  return 0
end
local ends = now + tonumber(ARGV[3])
redis.call('zadd', KEYS[2], ends, ARGV[2])
local left = redis.call('pttl', KEYS[4])
if left ~= -2 and left < tonumber(ARGV[3]) then
  redis.call('pexpire', KEYS[4], ARGV[3])
end
if ends < tonumber(before) then
  redis.call(ARGV[1], KEYS[3], '1')
end
return 1
