-- fair_acquire.lua (after fair_prune.lua): take a fair lock for an owner
-- that holds none of it as far as its client knows, or keep a place in its
-- queue (Redisson RFairLock layout, deadlines from the server's clock).
-- KEYS[1] lock hash
-- KEYS[2] waiter queue redisson_lock_queue:{name} (list of fields)
-- KEYS[3] waiter deadlines redisson_lock_timeout:{name} (sorted set, ms)
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- ARGV[3] waiter timeout in ms: a queued waiter that has not refreshed its
--         place for this long is dropped when it reaches the head
-- ARGV[4] '1' to join (or stay in) the queue when the lock is not taken,
--         '0' for a single attempt that leaves no trace; the queue keys
--         expire at the latest deadline in them
-- Returns nil when the field holds the lock after the call, with a count of
-- exactly 1 (taken: it was free and the queue empty or headed by this
-- field; or a level of this owner whose reply was lost, taken over), else
-- the lock's remaining lease in ms (-2 when it is free but others are
-- queued ahead, -1 when it has no expiry). Sending it twice has the effect
-- of sending it once.

if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if (not head) or head == ARGV[2] then
    if head then
      redis.call('lpop', KEYS[2])
    end
    redis.call('zrem', KEYS[3], ARGV[2])
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
  end
end

if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if redis.call('zrem', KEYS[3], ARGV[2]) == 1 then
    redis.call('lrem', KEYS[2], 0, ARGV[2])
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end

if ARGV[4] == '1' then
  if redis.call('zadd', KEYS[3], now + tonumber(ARGV[3]), ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
  end
  -- The queue lives as long as its latest deadline: a waiter that dies
  -- leaves nothing behind for long, whoever calls next.
  local last = redis.call('zrange', KEYS[3], -1, -1, 'WITHSCORES')
  redis.call('pexpireat', KEYS[2], last[2])
  redis.call('pexpireat', KEYS[3], last[2])
end
return redis.call('pttl', KEYS[1])
