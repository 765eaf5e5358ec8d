-- fair_abandon.lua: take a waiter that gives up out of a fair lock's queue.
-- KEYS[1] lock hash
-- KEYS[2] waiter queue redisson_lock_queue:{name}
-- KEYS[3] waiter deadlines redisson_lock_timeout:{name}
-- KEYS[4] unlock channel redisson_lock__channel:{name}
-- ARGV[1] hash field <clientID>:<owner> of the waiter
-- ARGV[2] publish command ('publish' or 'spublish')
-- ARGV[3] unlock message ('0')
-- Returns 1 when the waiter was queued, else 0. When it was the head and
-- the lock is free, the new head is woken, so the queue never waits on a
-- waiter that left.
local head = redis.call('lindex', KEYS[2], 0)
redis.call('zrem', KEYS[3], ARGV[1])
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
if head == ARGV[1] and redis.call('exists', KEYS[1]) == 0 then
  local next = redis.call('lindex', KEYS[2], 0)
  if next then
    redis.call(ARGV[2], KEYS[4] .. ':' .. next, ARGV[3])
  end
end
if removed > 0 then
  return 1
end
return 0
