-- lock_unlock.lua: release one hold level of a reentrant lock.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel redisson_lock__channel:{name}
-- KEYS[3] latch redisson_unlock_latch:{name}:<requestID>
-- ARGV[1] unlock message ('0')
-- ARGV[2] lease in ms, re-armed while hold levels remain
-- ARGV[3] hash field <clientID>:<owner>
-- ARGV[4] publish command ('publish' or 'spublish')
-- ARGV[5] latch lifetime in ms
-- Returns the field's remaining hold count (0: released, the key deleted and
-- the message published), or -1 when the field holds nothing.
-- The result is kept in the latch key for a while, so a resent request with
-- the same request ID returns the first answer instead of releasing twice.
local latched = redis.call('get', KEYS[3])
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
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    result = 0
  end
end
redis.call('set', KEYS[3], result, 'px', ARGV[5])
return result
