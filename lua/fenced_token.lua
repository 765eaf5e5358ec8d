-- fenced_token.lua: the token of a field's current hold.
-- KEYS[1] lock hash
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- ARGV[1] hash field <clientID>:<owner>
-- Returns the counter's value while the field holds the lock (no other
-- acquisition can move it then), else nil.
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  return tonumber(redis.call('get', KEYS[2]) or '0')
end
return nil
