-- fair_prune.lua: prepended to every fair-lock script that reads the queue.
-- It sets `now` (the server's clock, in ms) and drops waiters at the head
-- of the queue whose deadline has passed: they stopped refreshing their
-- place (their process died), so they must not stall the queue.
-- KEYS[2] waiter queue redisson_lock_queue:{name}
-- KEYS[3] waiter deadlines redisson_lock_timeout:{name}
-- Returns nothing; the script it prefixes goes on.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local deadline = tonumber(redis.call('zscore', KEYS[3], head))
  if deadline and deadline > now then break end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
end
