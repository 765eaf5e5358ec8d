-- rw_write_reenter.lua (after refuse.lua, count_down.lua, rw_reads.lua
-- and lease.lua): add a level to a write hold the caller has.
-- KEYS[1] lock hash <name>
-- KEYS[2] channel redisson_rwlock:{name}
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] writer field <clientID>:<owner>:write
-- ARGV[3] key prefix: {<name>}, or <name> when it has a hash tag
-- ARGV[4] the hold count the field has after the call (the caller's count
--         plus one): the count is incremented by HINCRBY when it stands at
--         one under it, and left when it is there already (an earlier send
--         of this request), so sending the script twice has the effect of
--         sending it once (see count_down.lua)
-- ARGV[5] publish command ('publish' or 'spublish')
-- Returns 0 after moving the count and resetting the hash's lease to the
-- lease (or to the longest lease of the owner's read holds, if longer; a
-- shorter lease than before is told to the waiters, see lease.lua); nil
-- when the field holds nothing: the hold was lost, and nothing was
-- changed. A field in a lock's hash without 'mode' is refused (see
-- refuse.lua).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if redis.call('hexists', KEYS[1], 'mode') == 0 then
  return wrong_kind('lock')
end
count_up(KEYS[1], ARGV[2], tonumber(ARGV[4]))
set_lease(KEYS[1], math.max(tonumber(ARGV[1]), reads_left(KEYS[1], ARGV[3])), KEYS[2], ARGV[5])
return 0
