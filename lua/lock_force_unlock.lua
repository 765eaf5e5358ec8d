-- lock_force_unlock.lua: delete a lock whoever holds it.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel redisson_lock__channel:{name}
-- ARGV[1] unlock message ('0')
-- ARGV[2] publish command ('publish' or 'spublish')
-- Returns 1 when there was a hold (the key was deleted and the message
-- published), else 0.
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0
