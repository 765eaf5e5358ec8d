-- rw_read_reenter.lua (after refuse.lua, count_down.lua, rw_reads.lua and
-- lease.lua): add a level to a read hold the caller has.
-- KEYS[1] lock hash <name>
-- KEYS[2] channel redisson_rwlock:{name}
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] reader field <clientID>:<owner>
-- ARGV[3] key prefix: {<name>}, or <name> when it has a hash tag
-- ARGV[4] the hold count the field has after the call (the caller's count
--         plus one): the count is incremented by HINCRBY when it stands at
--         one under it, and left when it is there already (an earlier send
--         of this request), so sending the script twice has the effect of
--         sending it once (see count_down.lua)
-- ARGV[5] publish command ('publish' or 'spublish')
-- Returns 0 after moving the count and giving every level's lease key
-- <prefix>:<field>:rwlock_timeout:<level> (1..count) the lease (a
-- re-entry resets the hold's lease); in read mode the hash's lease then
-- becomes the longest lease among the read holds (shorter when this
-- re-entry shortened the longest: the waiters are told, see lease.lua),
-- in write mode (the owner is the writer too) it is only ever made
-- longer. Returns nil when the field holds nothing: the hold was lost,
-- and nothing was changed. A field in a lock's hash without 'mode' (the
-- owner's plain hold) is refused (see refuse.lua).
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if not n then
  return nil
end
if redis.call('hexists', KEYS[1], 'mode') == 0 then
  return wrong_kind('lock')
end
local target = tonumber(ARGV[4])
local key = ARGV[3] .. ':' .. ARGV[2] .. ':rwlock_timeout:'
for level = n, target + 1, -1 do
  redis.call('del', key .. level)
end
count_up(KEYS[1], ARGV[2], target)
for level = 1, target do
  redis.call('set', key .. level, 1, 'px', ARGV[1])
end
if redis.call('hget', KEYS[1], 'mode') == 'read' then
  set_lease(KEYS[1], reads_left(KEYS[1], ARGV[3]), KEYS[2], ARGV[5])
else
  extend(KEYS[1], tonumber(ARGV[1]))
end
return 0
