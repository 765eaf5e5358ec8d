-- sem_abandon.lua: take a waiter that gives up out of a semaphore's queue.
-- KEYS[1] available permits <name>
-- KEYS[2] channel redisson_sc:{name}
-- KEYS[3] waiter queue {<name>}:relock_queue (sorted set)
-- KEYS[4] waiter deadlines {<name>}:relock_queue_timeout (sorted set)
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] the waiter's permit ID (16 raw bytes)
-- Returns 1 when the waiter was queued, else 0. When a permit was held
-- back for it, the available count is published, so that another waiter
-- takes the permit. Safe to resend.
local rank = redis.call('zrank', KEYS[3], ARGV[2])
redis.call('zrem', KEYS[4], ARGV[2])
if not rank then
  return 0
end
redis.call('zrem', KEYS[3], ARGV[2])
local available = tonumber(redis.call('get', KEYS[1]) or '0')
if available > rank then
  redis.call(ARGV[1], KEYS[2], available)
end
return 1
