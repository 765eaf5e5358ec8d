-- fair_abandon.lua (after fair_prune.lua): take a waiter that gives up out
-- of a fair lock's queue (the keys are fair_prune.lua's).
-- ARGV[1] hash field <clientID>:<owner> of the waiter
-- ARGV[2] publish command ('publish' or 'spublish')
-- ARGV[3] unlock message ('0')
-- ARGV[4] thread wait time in ms (Redisson's fairLockWaitTimeout)
-- Returns 1 when the waiter was queued, else 0. As Redisson's waiters do
-- when they give up, every waiter queued behind it gets the thread wait
-- time off its deadline. When the lock is free, the head left is woken,
-- so the queue never waits on a waiter that left. Sending it twice has
-- the effect of sending it once.
-- The waiter is taken out first: while Redis is out of memory it refuses
-- a script's first write when that write adds memory (ZINCRBY), not a
-- later one, nor ZREM or LREM; a waiter that could not leave would keep
-- its place, ahead of the waiters that joined after it, if it asked again
-- before its heartbeat ran out. The deadlines of those behind it change
-- with pcall, in case a server refuses them: the waiter has left anyway.
local queue = redis.call('lrange', KEYS[2], 0, -1)
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
local behind = false
local wait = tonumber(ARGV[4])
for _, waiter in ipairs(queue) do
  if behind then
    if redis.call('zscore', KEYS[3], waiter) then
      redis.pcall('zincrby', KEYS[3], -wait, waiter)
    end
  elseif waiter == ARGV[1] then
    behind = true
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  wake(prune(), ARGV[2], ARGV[3])
end
if removed > 0 then
  return 1
end
return 0
