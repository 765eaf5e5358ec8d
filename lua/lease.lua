-- lease.lua: put before the scripts that set a lock's lease to a value
-- that may be shorter than the lease it had (a re-entry with a shorter
-- fixed lease, a release that leaves the lock to holds with shorter
-- leases). It defines set_lease(key, ms, channel, publish): the key's
-- lease becomes ms; when that is shorter than the lease it had, '1' is
-- published on channel with the publish command ('publish' or
-- 'spublish'). Waiters sleep until the end of the lease their last
-- attempt saw (a holder that dies publishes nothing); '1' wakes every
-- waiter, in relock and in Redisson, so that they look again instead of
-- sleeping past the new end.
local function set_lease(key, ms, channel, publish)
  local before = redis.call('pttl', key)
  redis.call('pexpire', key, ms)
  if before > ms then
    redis.call(publish, channel, '1')
  end
end
