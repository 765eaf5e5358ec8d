-- lock_unlock.lua: bring a hold of a reentrant lock down to a count: one
-- level fewer for an unlock, or back to what its owner was granted after
-- an acquisition whose reply was lost.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel redisson_lock__channel:{name}
-- ARGV[1] unlock message ('0')
-- ARGV[2] lease in ms, reset while levels remain
-- ARGV[3] hash field <clientID>:<owner>
-- ARGV[4] publish command ('publish' or 'spublish')
-- ARGV[5] the count to leave (>= 0); a count at or under it is kept
-- Returns -1 when the field holds nothing (nothing is changed), else the
-- count left. At 0 the field is removed, and when that frees the lock the
-- unlock message is published. The count is set, not decremented, so a
-- resent request does not release twice; nothing else is written.
local n = tonumber(redis.call('hget', KEYS[1], ARGV[3]))
if not n then
  return -1
end
local target = tonumber(ARGV[5])
if target <= 0 then
  redis.call('hdel', KEYS[1], ARGV[3])
  if redis.call('exists', KEYS[1]) == 0 then
    redis.call(ARGV[4], KEYS[2], ARGV[1])
  end
  return 0
end
if n > target then
  redis.call('hset', KEYS[1], ARGV[3], target)
  n = target
end
redis.call('pexpire', KEYS[1], ARGV[2])
return n
