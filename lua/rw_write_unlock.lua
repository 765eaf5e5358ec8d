-- rw_write_unlock.lua (after count_down.lua, rw_reads.lua and lease.lua):
-- bring a write hold down to a count: one level fewer for an unlock, or
-- back to what its owner was granted after an acquisition whose reply was
-- lost.
-- KEYS[1] lock hash <name>
-- KEYS[2] channel redisson_rwlock:{name}
-- ARGV[1] message of a write release ('1': wakes every waiter)
-- ARGV[2] lease in ms, reset while levels remain
-- ARGV[3] writer field <clientID>:<owner>:write
-- ARGV[4] publish command ('publish' or 'spublish')
-- ARGV[5] the count to leave (>= 0); a count at or under it is kept
-- ARGV[6] key prefix: {<name>}, or <name> when it has a hash tag
-- Returns -1 when the field holds nothing (nothing is changed), else the
-- count left. At 0 the field goes; when the owner still has read holds
-- the lock goes to read mode, living as long as their longest lease,
-- else the hash is deleted; either way the message is published, so
-- that waiting readers come in. Above 0 the count is decremented by
-- HINCRBY when it stands at one over the count to leave, and left when it
-- is there already (an earlier send of this request), so a resent request
-- does not release twice (see count_down.lua).
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
  return -1
end
local target = tonumber(ARGV[5])
if target > 0 then
  local n = count_down(KEYS[1], ARGV[3], target)
  if not n then
    return -1
  end
  set_lease(KEYS[1], math.max(tonumber(ARGV[2]), reads_left(KEYS[1], ARGV[6])), KEYS[2], ARGV[4])
  return n
end
if redis.call('hdel', KEYS[1], ARGV[3]) == 0 then
  return -1
end
if redis.call('hlen', KEYS[1]) > 1 then
  local left = reads_left(KEYS[1], ARGV[6])
  if left > 0 then
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('pexpire', KEYS[1], left)
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
return 0
