-- lock_reenter.lua (after refuse.lua, count_down.lua and lease.lua): add a
-- level to a hold the caller has (every reentrant lock kind, plain,
-- fenced or fair, keeps its holds in the same hash).
-- KEYS[1] lock hash
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- KEYS[3] unlock channel redisson_lock__channel:{name}
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- ARGV[3] the hold count the field has after the call (the caller's count
--         plus one): the count is incremented by HINCRBY when it stands at
--         one under it, and left when it is there already (an earlier send
--         of this request), so sending the script twice has the effect of
--         sending it once (see count_down.lua)
-- ARGV[4] publish command ('publish' or 'spublish')
-- Returns the counter's value (0 when there is none) after moving the
-- count and resetting the lease (a re-entry with a shorter lease tells
-- the waiters, see lease.lua), or nil when the field holds nothing: the
-- hold was lost, and nothing was changed. A field in a read-write lock's
-- hash (the owner's read hold) is refused (see refuse.lua).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local refused = lock_refusal(KEYS[1], KEYS[1], nil)
if refused then
  return refused
end
count_up(KEYS[1], ARGV[2], tonumber(ARGV[3]))
set_lease(KEYS[1], tonumber(ARGV[1]), KEYS[3], ARGV[4])
return tonumber(redis.call('get', KEYS[2]) or '0')
