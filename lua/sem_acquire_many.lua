-- sem_acquire_many.lua (after sem_reclaim.lua): take several permits of a
-- semaphore in one step, all or none, or keep a waiter's place in its
-- queue.
-- KEYS[1] available permits <name>
-- KEYS[2] permit leases {<name>}:timeout (sorted set)
-- KEYS[3] channel redisson_sc:{name}
-- KEYS[4] waiter queue {<name>}:relock_queue (sorted set: permit ID ->
--         when the waiter joined, ms)
-- KEYS[5] waiter deadlines {<name>}:relock_queue_timeout (sorted set:
--         permit ID -> when the waiter is dropped unless it refreshes, ms)
-- KEYS[6] permit holders {<name>}:relock_holders (hash, see
--         sem_acquire.lua)
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] lease in ms (> 0), for each permit
-- ARGV[3] '1' to join (or stay in) the queue when nothing is taken, '0'
--         to leave no trace
-- ARGV[4] waiter timeout in ms
-- ARGV[5] who takes the permits: "<clientID>:<owner>"
-- ARGV[6...] the permit IDs (16 raw bytes each), one per permit wanted,
--         the same for every attempt of a call
-- Returns {1, 0, permits left} when the permits are held after the call,
-- each with its lease ending ARGV[2] from now (when one of them is held
-- already, an attempt whose reply was lost took them: the leases of
-- those held are reset, so sending the script twice has the effect of
-- sending it once); else {0, ms, permits available} as sem_acquire.lua
-- replies. A semaphore whose count is set and whose permits, available
-- and held, are fewer than asked for refuses the call, changing nothing,
-- with the error reply 'RELOCK_TOO_MANY_PERMITS <permits>'.
-- A queued waiter for n permits has n members in the queue, one per
-- permit ID, joined at the same time, so that each member holds one
-- permit back for it (as sem_acquire.lua counts them): it may take its
-- permits while at least n more are available than members are queued
-- ahead of its first member; a caller out of the queue while at least n
-- more are available than members are queued.
-- Each permit taken is recorded in the holders hash, as sem_acquire.lua
-- records one.
local lease = tonumber(ARGV[2])
local n = #ARGV - 5
local function record_holders()
  for i = 6, #ARGV do
    if redis.call('zscore', KEYS[2], ARGV[i]) then
      redis.call('hset', KEYS[6], ARGV[i], ARGV[5])
    end
  end
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
local held = 0
for i = 6, #ARGV do
  if redis.call('zscore', KEYS[2], ARGV[i]) then
    held = held + 1
    redis.call('zadd', KEYS[2], now + lease, ARGV[i])
  end
end
if held > 0 then
  record_holders()
  for i = 6, #ARGV do
    redis.call('zrem', KEYS[4], ARGV[i])
    redis.call('zrem', KEYS[5], ARGV[i])
  end
  return {1, 0, available}
end
local total = available + redis.call('zcard', KEYS[2])
if n > total and redis.call('exists', KEYS[1]) == 1 then
  return redis.error_reply('RELOCK_TOO_MANY_PERMITS ' .. total)
end
-- A queued caller's place is its first member's: the members ranked
-- before it are of waiters ahead. Waiters that joined in the same ms have
-- their members in byte order, interleaved: counting the others' members
-- before the caller's last member instead would make two such waiters
-- each wait for the other's permits, for ever.
local first
for i = 6, #ARGV do
  local rank = redis.call('zrank', KEYS[4], ARGV[i])
  if rank and (not first or rank < first) then
    first = rank
  end
end
local ahead = first or redis.call('zcard', KEYS[4])
if available - ahead >= n then
  redis.call('decrby', KEYS[1], n)
  for i = 6, #ARGV do
    redis.call('zadd', KEYS[2], now + lease, ARGV[i])
    redis.call('zrem', KEYS[4], ARGV[i])
    redis.call('zrem', KEYS[5], ARGV[i])
  end
  record_holders()
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
    redis.call('pexpire', KEYS[6], ttl)
  end
  return {1, 0, available - n}
end
if ARGV[3] == '1' then
  for i = 6, #ARGV do
    redis.call('zadd', KEYS[4], 'NX', now, ARGV[i])
    redis.call('zadd', KEYS[5], now + tonumber(ARGV[4]), ARGV[i])
  end
end
return sem_refused(available)
