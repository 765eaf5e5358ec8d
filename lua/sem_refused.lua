-- sem_refused.lua (after sem_reclaim.lua, before sem_acquire.lua and
-- sem_acquire_many.lua): the end of an acquisition that took nothing.
-- The queue (KEYS[4], KEYS[5]) is kept alive until its latest deadline,
-- and the reply says how long the caller may sleep: until the first
-- permit's lease ends (KEYS[2]), or, while permits are free but held back
-- for queued waiters, until the first queued deadline (a waiter that died
-- is dropped then).
local function sem_refused(available)
  if redis.call('exists', KEYS[5]) == 1 then
    local latest = redis.call('zrange', KEYS[5], -1, -1, 'WITHSCORES')
    redis.call('pexpireat', KEYS[4], latest[2])
    redis.call('pexpireat', KEYS[5], latest[2])
  end
  local wait = -1
  local first = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
  if first[2] and first[2] ~= '922337203685477' then
    wait = tonumber(first[2]) - now
  end
  if available > 0 then
    local due = redis.call('zrange', KEYS[5], 0, 0, 'WITHSCORES')
    if due[2] and (wait < 0 or tonumber(due[2]) - now < wait) then
      wait = tonumber(due[2]) - now
    end
  end
  return {0, math.max(wait, -1), math.max(available, 0)}
end
