-- sem_release.lua (after sem_reclaim.lua): give a permit back.
-- KEYS[1] available permits <name>
-- KEYS[2] permit leases {<name>}:timeout (sorted set)
-- KEYS[3] channel redisson_sc:{name}
-- KEYS[4] permit holders {<name>}:relock_holders (hash, see sem_acquire.lua)
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] permit ID (16 raw bytes)
-- Returns 1 when the permit was held: it is removed, the available count
-- goes up by one and the new count is published; 0 when no such permit
-- is held (unknown, released before, or its lease ended: an expired
-- permit went back to the count when the reclaim above ran). Either way
-- the permit's holder entry goes.
redis.call('hdel', KEYS[4], ARGV[2])
if redis.call('zrem', KEYS[2], ARGV[2]) == 0 then
  return 0
end
redis.call(ARGV[1], KEYS[3], redis.call('incr', KEYS[1]))
return 1
