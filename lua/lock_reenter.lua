-- lock_reenter.lua: add a level to a hold the caller has (every lock kind
-- keeps its holds in the same hash).
-- KEYS[1] lock hash
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- ARGV[3] the hold count the field has after the call (the caller's count
--         plus one): the count is set, not incremented, so sending the
--         script twice has the effect of sending it once
-- Returns the counter's value (0 when there is none) after setting the
-- count and resetting the lease, or nil when the field holds nothing: the
-- hold was lost, and nothing was changed.
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
redis.call('hset', KEYS[1], ARGV[2], ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[1])
return tonumber(redis.call('get', KEYS[2]) or '0')
