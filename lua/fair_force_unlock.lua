-- fair_force_unlock.lua (after fair_prune.lua): delete a fair lock whoever holds it and wake the
-- head of its queue.
-- KEYS[1] lock hash
-- KEYS[2] waiter queue redisson_lock_queue:{name}
-- KEYS[3] waiter deadlines redisson_lock_timeout:{name}
-- KEYS[4] unlock channel redisson_lock__channel:{name}
-- ARGV[1] unlock message ('0')
-- ARGV[2] publish command ('publish' or 'spublish')
-- Returns 1 when there was a hold, else 0. The message also goes to
-- KEYS[4] itself, where the holders of the lock listen for a force-unlock.
if redis.call('del', KEYS[1]) == 1 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(ARGV[2], KEYS[4] .. ':' .. head, ARGV[1])
  end
  redis.call(ARGV[2], KEYS[4], ARGV[1])
  return 1
end
return 0
