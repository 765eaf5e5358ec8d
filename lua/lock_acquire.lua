-- lock_acquire.lua: take or re-enter a reentrant lock (Redisson RLock layout).
-- KEYS[1] lock hash
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- Returns nil when the field holds the lock after the call (the hold count
-- went up by one and the lease was reset), else the holder's remaining lease
-- in ms (-1 when the key has no expiry).
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
