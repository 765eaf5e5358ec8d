-- rw_read_unlock.lua (after count_down.lua, rw_reads.lua and lease.lua):
-- bring a read hold down to a count: one level fewer for an unlock, or
-- back to what its owner was granted after an acquisition whose reply was
-- lost.
-- KEYS[1] lock hash <name>
-- KEYS[2] channel redisson_rwlock:{name}
-- ARGV[1] message of a read release ('0': wakes one waiter)
-- ARGV[2] lease in ms, reset while levels remain
-- ARGV[3] reader field <clientID>:<owner>
-- ARGV[4] publish command ('publish' or 'spublish')
-- ARGV[5] the count to leave (>= 0); a count at or under it is kept
-- ARGV[6] key prefix: {<name>}, or <name> when it has a hash tag
-- Returns -1 when the field holds nothing (nothing is changed), else the
-- count left. The lease keys of the levels released are deleted; those of
-- the levels left get the lease again. At 0 the field goes, and then:
-- in write mode the writer (the same owner) holds on; in read mode the
-- hash lives on for the longest lease among the other read holds' keys;
-- when none is alive (the other readers died) or no field is left, the
-- hash is deleted and the message published. When the longest lease left
-- is shorter than the hash's, the waiters are told (see lease.lua): a
-- writer sleeping until the hash's old end looks again. Above 0 the count
-- is decremented by HINCRBY when it stands at one over the count to
-- leave, and left when it is there already (an earlier send of this
-- request), so a resent request does not release twice (see
-- count_down.lua).
local n = tonumber(redis.call('hget', KEYS[1], ARGV[3]))
if not n then
  return -1
end
local target = tonumber(ARGV[5])
local key = ARGV[6] .. ':' .. ARGV[3] .. ':rwlock_timeout:'
for level = n, math.max(target, 0) + 1, -1 do
  redis.call('del', key .. level)
end
if target > 0 then
  n = count_down(KEYS[1], ARGV[3], target)
  for level = 1, n do
    redis.call('set', key .. level, 1, 'px', ARGV[2])
  end
  extend(KEYS[1], tonumber(ARGV[2]))
  return n
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) > 1 then
  if redis.call('hget', KEYS[1], 'mode') == 'write' then
    return 0
  end
  local left = reads_left(KEYS[1], ARGV[6])
  if left > 0 then
    set_lease(KEYS[1], left, KEYS[2], ARGV[4])
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
return 0
