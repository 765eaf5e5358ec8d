-- sem_set.lua: set a semaphore's permits if they were never set.
-- KEYS[1] available permits <name>
-- KEYS[2] channel redisson_sc:{name}
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] the number of permits (>= 0)
-- Returns 1 when the count was set (and published), 0 when the semaphore
-- already had one (nothing is changed).
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call(ARGV[1], KEYS[2], ARGV[2])
return 1
