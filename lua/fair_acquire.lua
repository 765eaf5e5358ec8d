-- fair_acquire.lua (after refuse.lua, count_down.lua and fair_prune.lua):
-- take a fair lock for an owner that holds none of it as far as its
-- client knows, or keep a place in its queue (Redisson RFairLock layout;
-- the keys are fair_prune.lua's, and one more:)
-- KEYS[6] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- ARGV[3] heartbeat timeout in ms: a queued relock waiter that has not
--         refreshed its place for this long is dropped when it reaches
--         the head
-- ARGV[4] '1' to join (or stay in) the queue when the lock is not taken,
--         '0' for a single attempt that leaves no trace
-- ARGV[5] thread wait time in ms (Redisson's fairLockWaitTimeout)
-- ARGV[6] publish command ('publish' or 'spublish')
-- ARGV[7] unlock message ('0')
-- The deadlines follow Redisson's rule: a waiter that joins gets the
-- deadline of the waiter queued before it (the first: now plus the
-- holder's remaining lease) plus the thread wait time, and every
-- acquisition takes the thread wait time off every deadline still queued.
-- A relock waiter also keeps a heartbeat (now plus ARGV[3]), refreshed by
-- every call with ARGV[4] '1'; the heartbeat key expires at the latest of
-- the heartbeat and the latest deadline. The shared queue keys get no
-- expiry (Redisson's waiters join them without setting one).
-- Returns nil when the field holds the lock after the call, with a count
-- of exactly 1 (taken: it was free and the queue empty or headed by this
-- field, the count going from 0 to 1 by HINCRBY; or a level of this owner
-- whose reply was lost, taken over at 1), else the lock's remaining lease
-- in ms (-2 when it is free but another waiter heads the queue: that one
-- is woken; -1 when it has no expiry). Sending it twice has the effect of
-- sending it once. Refused, with nothing changed (see refuse.lua): while
-- the name's other form is in use, and when the name holds a read-write
-- lock's hash or a rate limiter's. (A plain lock's hash looks like a fair lock's: a fair
-- waiter queues behind it, and the plain lock's next acquisition, which
-- sees the queue, is refused.)
local refused = lock_refusal(KEYS[1], KEYS[6], nil)
if refused then
  return refused
end
local head = prune()
if redis.call('exists', KEYS[1]) == 0 then
  if (not head) or head == ARGV[2] then
    take(ARGV[2], head, tonumber(ARGV[5]))
    count_up(KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
  end
  wake(head, ARGV[6], ARGV[7])
end

if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if redis.call('zrem', KEYS[3], ARGV[2]) == 1 then
    redis.call('lrem', KEYS[2], 0, ARGV[2])
  end
  redis.call('zrem', KEYS[4], ARGV[2])
  count_up(KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end

if ARGV[4] == '1' then
  if not redis.call('zscore', KEYS[3], ARGV[2]) then
    local base
    local tail = redis.call('lindex', KEYS[2], -1)
    if tail and tail ~= ARGV[2] then
      base = tonumber(redis.call('zscore', KEYS[3], tail))
    end
    if not base then
      base = now + math.max(redis.call('pttl', KEYS[1]), 0)
    end
    redis.call('zadd', KEYS[3], base + tonumber(ARGV[5]), ARGV[2])
    redis.call('rpush', KEYS[2], ARGV[2])
    -- Heartbeats of relock waiters that left the queue otherwise
    -- (Redisson's scripts dropped them) are swept here, as one joins.
    for _, field in ipairs(redis.call('zrangebyscore', KEYS[4], '-inf', now)) do
      if not redis.call('zscore', KEYS[3], field) then
        redis.call('zrem', KEYS[4], field)
      end
    end
  end
  local beat = now + tonumber(ARGV[3])
  redis.call('zadd', KEYS[4], beat, ARGV[2])
  local last = redis.call('zrange', KEYS[3], -1, -1, 'WITHSCORES')
  redis.call('pexpireat', KEYS[4], math.max(beat, math.ceil(tonumber(last[2]))))
end
return redis.call('pttl', KEYS[1])
