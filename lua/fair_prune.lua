-- fair_prune.lua: put before every fair-lock script. Every fair-lock
-- script takes the same keys:
--   KEYS[1] lock hash
--   KEYS[2] waiter queue redisson_lock_queue:{name} (list of fields)
--   KEYS[3] waiter deadlines redisson_lock_timeout:{name} (sorted set:
--           field -> deadline in ms, Redisson's)
--   KEYS[4] heartbeats of relock's waiters relock_lock_alive:{name}
--           (sorted set: field -> server ms by which the waiter must
--           refresh its place)
--   KEYS[5] unlock channel redisson_lock__channel:{name}; each waiter
--           listens on KEYS[5] .. ':' .. <its field>
-- It sets `now` (the server's clock, in ms) and defines:
--   prune(): drops the waiters at the head of the queue that are gone and
--     returns the head left (nil when the queue is empty). A relock waiter
--     (one with a heartbeat) is gone when its heartbeat passed, whatever
--     its deadline; any other waiter (Redisson's, or one whose heartbeat
--     record expired) by Redisson's rule: when its deadline passed, or it
--     has none. Like Redisson's pruning it changes no other deadline.
--   take(field, head, wait): takes field out of the waiters as it takes
--     the lock: off the head of the queue when head is set (it is the
--     head), out of the deadlines and the heartbeats, and takes the
--     thread wait time wait (ms) off every deadline still queued
--     (Redisson's rule for an acquisition).
--   wake(head, publish, message): publishes message on head's channel
--     with the publish command ('publish' or 'spublish'), when head is
--     not nil. Every script that finds the lock free with a waiter at the
--     head calls it, so that a head that missed its wake-up (it was
--     pruned while asleep, or woken before it was subscribed) takes the
--     lock now.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function prune()
  while true do
    local head = redis.call('lindex', KEYS[2], 0)
    if not head then
      return nil
    end
    local gone
    local beat = tonumber(redis.call('zscore', KEYS[4], head))
    if beat then
      gone = beat <= now
    else
      local deadline = tonumber(redis.call('zscore', KEYS[3], head))
      gone = (not deadline) or deadline <= now
    end
    if not gone then
      return head
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    redis.call('zrem', KEYS[4], head)
  end
end

local function take(field, head, wait)
  if head then
    redis.call('lpop', KEYS[2])
  end
  redis.call('zrem', KEYS[3], field)
  redis.call('zrem', KEYS[4], field)
  for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -wait, waiter)
  end
end

local function wake(head, publish, message)
  if head then
    redis.call(publish, KEYS[5] .. ':' .. head, message)
  end
end
