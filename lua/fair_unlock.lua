-- fair_unlock.lua (after count_down.lua and fair_prune.lua): bring a hold of a fair lock down
-- to a count, and wake the head of its queue when that frees the lock.
-- KEYS[1] lock hash
-- KEYS[2] waiter queue redisson_lock_queue:{name}
-- KEYS[3] waiter deadlines redisson_lock_timeout:{name}
-- KEYS[4] unlock channel redisson_lock__channel:{name}; the head waiter
--         listens on KEYS[4] .. ':' .. <its field>
-- ARGV[1] unlock message ('0')
-- ARGV[2] lease in ms, reset while levels remain
-- ARGV[3] hash field <clientID>:<owner>
-- ARGV[4] publish command ('publish' or 'spublish')
-- ARGV[5] the count to leave (>= 0); a count at or under it is kept
-- Returns -1 when the field holds nothing (nothing is changed), else the
-- count left. The count is set, not decremented, so a resent request does
-- not release twice.
local target = tonumber(ARGV[5])
if target > 0 then
  local n = count_down(KEYS[1], ARGV[3], target)
  if not n then
    return -1
  end
  redis.call('pexpire', KEYS[1], ARGV[2])
  return n
end
if redis.call('hdel', KEYS[1], ARGV[3]) == 0 then
  return -1
end
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(ARGV[4], KEYS[4] .. ':' .. head, ARGV[1])
  end
end
return 0
