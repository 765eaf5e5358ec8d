-- sem_available.lua (after sem_reclaim.lua): the number of permits
-- available.
-- KEYS[1] available permits <name>
-- KEYS[2] permit leases {<name>}:timeout (sorted set)
-- KEYS[3] channel redisson_sc:{name}
-- ARGV[1] publish command ('publish' or 'spublish')
-- Returns the available count (0 when the semaphore was never set), after
-- the permits whose lease ended came back.
return tonumber(redis.call('get', KEYS[1]) or '0')
