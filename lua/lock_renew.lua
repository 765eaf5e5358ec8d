-- lock_renew.lua (after lease.lua): extend a hold's lease if the field
-- still holds the lock.
-- KEYS[1] lock hash
-- KEYS[2] missing, or the lock's unlock channel
--         redisson_lock__channel:{name}: a lease that may be shorter than
--         the one the hold has (the confirmation of a granted hold on a
--         fixed lease, which sets the rest of that lease, counted from
--         the waiter's attempt) is set with set_lease, which publishes
--         '1' there when it is shorter, so that the waiters that read the
--         longer lease look again
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- ARGV[3] with KEYS[2], the publish command ('publish' or 'spublish')
-- Returns 1 when the lease was reset, 0 when the field holds nothing (the
-- key is then left untouched: a renewal never re-creates a lock).
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if KEYS[2] then
    set_lease(KEYS[1], tonumber(ARGV[1]), KEYS[2], ARGV[3])
  else
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return 1
end
return 0
