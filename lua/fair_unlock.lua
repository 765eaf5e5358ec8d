-- fair_unlock.lua (after count_down.lua and fair_prune.lua): bring a hold
-- of a fair lock down to a count, and, when that frees the lock, grant it
-- to a waiter of the releasing client that heads the queue, or else wake
-- the head (the keys are fair_prune.lua's).
-- ARGV[1] unlock message ('0')
-- ARGV[2] lease in ms, reset while levels remain
-- ARGV[3] hash field <clientID>:<owner>
-- ARGV[4] publish command ('publish' or 'spublish')
-- ARGV[5] the count to leave (>= 0); a count at or under it is kept
-- ARGV[6] optional: the field of a waiter of the releasing client that
--         the release grants the lock to if it frees it and that waiter
--         heads the queue; '' or absent for none
-- ARGV[7] with ARGV[6]: the granted hold's lease in ms (the client's
--         confirmation window)
-- ARGV[8] with ARGV[6]: the thread wait time in ms (fair_acquire.lua's
--         ARGV[5]), taken off the deadlines still queued as the grant
--         takes the lock
-- ARGV[9] with ARGV[6]: the mark a grant publishes on the lock's channel
--         KEYS[5] ('3'): no fair waiter listens there (each has its
--         own), and it tells those who watch (relock top) that the lock
--         changed hands
-- Returns -1 when the field holds nothing (nothing is changed), else the
-- count left, or {0, 0} when the release freed the lock and granted it to
-- ARGV[6] (then nobody is woken: the head holds it, with a count of 1,
-- out of the queue, and ARGV[9] is published on KEYS[5]). Above 0 the count is decremented by HINCRBY when it
-- stands at one over the count to leave, and left when it is there
-- already (an earlier send of this request), so a resent request does not
-- release twice (see count_down.lua); at 0 the field goes. Whenever the
-- lock is free after the call, the waiters that are gone are pruned and
-- the head is granted the lock (only by the release that freed it) or
-- woken.
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
  local head = prune()
  if left == 0 and head and head == ARGV[6] then
    take(head, head, tonumber(ARGV[8]))
    redis.call('hincrby', KEYS[1], head, 1)
    redis.call('pexpire', KEYS[1], ARGV[7])
    redis.call(ARGV[4], KEYS[5], ARGV[9])
    return {0, 0}
  end
  wake(head, ARGV[4], ARGV[1])
end
return left
