-- sem_acquire.lua (after sem_reclaim.lua): take one permit of a
-- semaphore, or keep a waiter's place in its queue.
-- KEYS[1] available permits <name>
-- KEYS[2] permit leases {<name>}:timeout (sorted set)
-- KEYS[3] channel redisson_sc:{name}
-- KEYS[4] waiter queue {<name>}:relock_queue (sorted set: permit ID ->
--         when the waiter joined, ms)
-- KEYS[5] waiter deadlines {<name>}:relock_queue_timeout (sorted set:
--         permit ID -> when the waiter is dropped unless it refreshes, ms)
-- KEYS[6] permit holders {<name>}:relock_holders (hash: permit ID -> who
--         took it, "<clientID>:<owner>"; relock's own, which Redisson's
--         scripts ignore)
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] permit ID (16 raw bytes), the same for every attempt of a call
-- ARGV[3] lease in ms (> 0)
-- ARGV[4] '1' to join (or stay in) the queue when no permit is taken,
--         '0' to leave no trace
-- ARGV[5] waiter timeout in ms
-- ARGV[6] who takes the permit: "<clientID>:<owner>"
-- Returns {1, 0, permits left} when the permit is held after the call,
-- with its lease ending ARGV[3] from now (a permit with this ID already
-- held was taken by an attempt whose reply was lost: its lease is reset,
-- so sending the script twice has the effect of sending it once); else
-- {0, ms, permits available}: how long until a lease or a queued waiter's
-- deadline ends (-1 when none will), and the permits available but held
-- back for queued waiters ahead of the caller (0 when none is available).
-- Queued waiters come first: waiter k of the queue (0 first) may take a
-- permit only while more than k are available, a caller out of the queue
-- only while more are available than waiters are queued. Waiters whose
-- deadline has passed are dropped first. A permit taken is recorded in
-- the holders hash; the entries of permits that are no longer held (their
-- lease ended and a call gave them back, maybe Redisson's) are dropped
-- whenever permits came back or the hash has more entries than permits
-- are held. The hash lives as long as the longest lease it records (the
-- renewals extend it), so the record of a Client that died goes by itself.
local lease = tonumber(ARGV[3])
local function record_holder()
  redis.call('hset', KEYS[6], ARGV[2], ARGV[6])
  if redis.call('pttl', KEYS[6]) < lease then
    redis.call('pexpire', KEYS[6], lease)
  end
  if back > 0 or redis.call('hlen', KEYS[6]) > redis.call('zcard', KEYS[2]) then
    local ids = redis.call('hkeys', KEYS[6])
    for i = 1, #ids do
      if not redis.call('zscore', KEYS[2], ids[i]) then
        redis.call('hdel', KEYS[6], ids[i])
      end
    end
  end
end
local dead = redis.call('zrangebyscore', KEYS[5], '-inf', now)
for i = 1, #dead do
  redis.call('zrem', KEYS[4], dead[i])
  redis.call('zrem', KEYS[5], dead[i])
end
local available = tonumber(redis.call('get', KEYS[1]) or '0')
if redis.call('zscore', KEYS[2], ARGV[2]) then
  redis.call('zadd', KEYS[2], now + lease, ARGV[2])
  record_holder()
  redis.call('zrem', KEYS[4], ARGV[2])
  redis.call('zrem', KEYS[5], ARGV[2])
  return {1, 0, available}
end
local ahead = redis.call('zrank', KEYS[4], ARGV[2]) or redis.call('zcard', KEYS[4])
if available > ahead then
  redis.call('decr', KEYS[1])
  redis.call('zadd', KEYS[2], now + lease, ARGV[2])
  record_holder()
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
    redis.call('pexpire', KEYS[6], ttl)
  end
  redis.call('zrem', KEYS[4], ARGV[2])
  redis.call('zrem', KEYS[5], ARGV[2])
  return {1, 0, available - 1}
end
if ARGV[4] == '1' then
  redis.call('zadd', KEYS[4], 'NX', now, ARGV[2])
  redis.call('zadd', KEYS[5], now + tonumber(ARGV[5]), ARGV[2])
end
return sem_refused(available)
