-- fair_unlock.lua (after count_down.lua and fair_prune.lua): bring a hold
-- of a fair lock down to a count, and wake the head of its queue when
-- that frees the lock (the keys are fair_prune.lua's).
-- ARGV[1] unlock message ('0')
-- ARGV[2] lease in ms, reset while levels remain
-- ARGV[3] hash field <clientID>:<owner>
-- ARGV[4] publish command ('publish' or 'spublish')
-- ARGV[5] the count to leave (>= 0); a count at or under it is kept
-- Returns -1 when the field holds nothing (nothing is changed), else the
-- count left. Above 0 the count is decremented by HINCRBY when it stands
-- at one over the count to leave, and left when it is there already (an
-- earlier send of this request), so a resent request does not release
-- twice (see count_down.lua); at 0 the field goes. Whenever the lock is
-- free after the call, the waiters that are gone are pruned and the head
-- is woken.
local target = tonumber(ARGV[5])
local left = -1
if target > 0 then
  local n = count_down(KEYS[1], ARGV[3], target)
  if n then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return n
  end
elseif redis.call('hdel', KEYS[1], ARGV[3]) == 1 then
  left = 0
end
if redis.call('exists', KEYS[1]) == 0 then
  wake(prune(), ARGV[4], ARGV[1])
end
return left
