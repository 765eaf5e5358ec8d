-- lock_renew.lua: extend a hold's lease if the field still holds the lock.
-- KEYS[1] lock hash
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- Returns 1 when the lease was reset, 0 when the field holds nothing (the
-- key is then left untouched: a renewal never re-creates a lock).
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0
