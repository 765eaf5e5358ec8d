-- fair_unlock.lua (after fair_prune.lua): release one hold level of a fair lock and wake the head
-- of its queue.
-- KEYS[1] lock hash
-- KEYS[2] waiter queue redisson_lock_queue:{name}
-- KEYS[3] waiter deadlines redisson_lock_timeout:{name}
-- KEYS[4] unlock channel redisson_lock__channel:{name}; the head waiter
--         listens on KEYS[4] .. ':' .. <its field>
-- KEYS[5] latch redisson_unlock_latch:{name}:<requestID>
-- ARGV[1] unlock message ('0')
-- ARGV[2] lease in ms, re-armed while hold levels remain
-- ARGV[3] hash field <clientID>:<owner>
-- ARGV[4] publish command ('publish' or 'spublish')
-- ARGV[5] latch lifetime in ms
-- Returns the field's remaining hold count (0: released and the head
-- waiter woken), or -1 when the field holds nothing (the head waiter is
-- still woken if the lock is free). A resent request with the same request
-- ID returns the first answer.
local latched = redis.call('get', KEYS[5])
if latched then
  return tonumber(latched)
end

local result
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  result = -1
else
  result = redis.call('hincrby', KEYS[1], ARGV[3], -1)
  if result > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
  else
    redis.call('del', KEYS[1])
    result = 0
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(ARGV[4], KEYS[4] .. ':' .. head, ARGV[1])
  end
end
redis.call('set', KEYS[5], result, 'px', ARGV[5])
return result
