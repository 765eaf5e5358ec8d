-- fenced_acquire.lua: take or re-enter a fenced lock.
-- KEYS[1] lock hash
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- Returns {1, token} when the field holds the lock after the call: a new
-- acquisition increments the counter and gets its new value; a re-entry keeps
-- the current value. Returns {0, pttl} when another field holds the lock
-- (pttl -1 when the key has no expiry).
if redis.call('exists', KEYS[1]) == 0 then
  local token = redis.call('incr', KEYS[2])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, token}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, tonumber(redis.call('get', KEYS[2]) or '0')}
end
return {0, redis.call('pttl', KEYS[1])}
