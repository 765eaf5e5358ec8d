-- sem_lease_left.lua (after sem_reclaim.lua): how long a permit's lease
-- has to run, as Redisson's getLeaseTime tells it.
-- KEYS[1] available permits <name>
-- KEYS[2] permit leases {<name>}:timeout (sorted set)
-- KEYS[3] channel redisson_sc:{name}
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] permit ID (16 raw bytes)
-- Returns the ms until the permit's lease ends (at least 1: a lease that
-- ended came back to the count above), -1 for a permit without a lease
-- (taken by Redisson without one), 0 when it is not held.
local ends = redis.call('zscore', KEYS[2], ARGV[2])
if not ends then
  return 0
end
if ends == '922337203685477' then
  return -1
end
return tonumber(ends) - now
