-- lock_reenter.lua: add a level to a hold the caller believes it has
-- (every lock kind: they all keep holds in the same hash).
-- KEYS[1] lock hash
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- Returns the counter's value (0 when there is none) after adding a level
-- and resetting the lease, or nil when the field holds nothing: the hold
-- was lost, and nothing was changed (no new acquisition is made in its
-- place).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return tonumber(redis.call('get', KEYS[2]) or '0')
