-- sem_abandon.lua: take a waiter that gives up out of a semaphore's queue.
-- KEYS[1] available permits <name>
-- KEYS[2] channel redisson_sc:{name}
-- KEYS[3] waiter queue {<name>}:relock_queue (sorted set)
-- KEYS[4] waiter deadlines {<name>}:relock_queue_timeout (sorted set)
-- KEYS[5] permit leases {<name>}:timeout (sorted set)
-- KEYS[6] permit holders {<name>}:relock_holders (hash, see
--         sem_acquire.lua): the entries of the IDs not held go (a call
--         that gives up holds no permit; one whose release failed keeps
--         its entry while it holds)
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2...] the waiter's permit IDs (16 raw bytes each: one, or one per
--         permit of a call for several, see sem_acquire_many.lua)
-- Returns 1 when the waiter was queued, else 0. When a permit was held
-- back for it (more are available than members are queued ahead of its
-- first one), the available count is published, so that another waiter
-- takes the permit. Safe to resend.
local rank = nil
for i = 2, #ARGV do
  if not redis.call('zscore', KEYS[5], ARGV[i]) then
    redis.call('hdel', KEYS[6], ARGV[i])
  end
  local r = redis.call('zrank', KEYS[3], ARGV[i])
  redis.call('zrem', KEYS[4], ARGV[i])
  if r and (not rank or r < rank) then
    rank = r
  end
end
if not rank then
  return 0
end
for i = 2, #ARGV do
  redis.call('zrem', KEYS[3], ARGV[i])
end
local available = tonumber(redis.call('get', KEYS[1]) or '0')
if available > rank then
  redis.call(ARGV[1], KEYS[2], available)
end
return 1
