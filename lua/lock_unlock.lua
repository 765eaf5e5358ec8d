-- lock_unlock.lua (after count_down.lua, lease.lua and wake.lua): bring a
-- hold of a reentrant lock down to a count: one level fewer for an unlock,
-- or back to what its owner was granted after an acquisition whose reply
-- was lost.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel redisson_lock__channel:{name}
-- KEYS[3] with ARGV[6], the wake registry relock_wakers:{name}
-- ARGV[1] unlock message ('0')
-- ARGV[2] lease in ms, reset while levels remain
-- ARGV[3] hash field <clientID>:<owner>
-- ARGV[4] publish command ('publish' or 'spublish')
-- ARGV[5] the count to leave (>= 0); a count at or under it is kept
-- ARGV[6] missing (wake-one off) or the prefix of the clients' wake
--         channels (relock_wake:{name}:, followed by a client ID)
-- ARGV[7] with ARGV[6], the PUBSUB subcommand that counts a channel's
--         subscribers ('numsub' or 'shardnumsub'): a registered client
--         whose wake channel has none is gone
-- ARGV[8] with ARGV[6], the mark published on KEYS[2] before the unlock
--         message when a registered client was woken ('2')
-- ARGV[9] with ARGV[6], the caller's client ID
-- ARGV[10] with ARGV[6], '1' when the caller has a waiter for the lock
--         (it may be the one woken), else '0'
-- Returns -1 when the field holds nothing (nothing is changed), else the
-- count left. At 0 the field is removed, and when that frees the lock
-- waiters are told: on KEYS[2], always; with wake-one on and live clients
-- registered, first on the wake channel of the one registered longest ago
-- (it registers again when it tries; registrations of clients that no
-- longer listen are dropped, see wake.lua), then the mark ARGV[8] and the
-- unlock message on KEYS[2]. The unlock message reaches every waiter that
-- is not registered (Redisson's, those of clients without wake-one),
-- whoever else subscribes: no count of subscribers decides it. A client
-- with registered waiters lets an unlock message that follows the mark
-- pass (the two are adjacent on the channel: one script sends both), so
-- that only the client woken on its own channel tries; Redisson's
-- waiters ignore the mark (an integer that is neither 0 nor 1). Above 0
-- the count is decremented by HINCRBY when it stands at one over the
-- count to leave, and left when it is there already (an earlier send of
-- this request), so a resent request does not release twice (see
-- count_down.lua); nothing else is written.
local target = tonumber(ARGV[5])
if target <= 0 then
  if redis.call('hdel', KEYS[1], ARGV[3]) == 0 then
    return -1
  end
  if redis.call('exists', KEYS[1]) == 0 then
    if (ARGV[6] or '') ~= '' then
      local skip = nil
      if ARGV[10] == '0' then
        skip = ARGV[9]
      end
      local first = next_waker(KEYS[3], ARGV[6], ARGV[7], skip)
      if first then
        redis.call(ARGV[4], ARGV[6] .. first, ARGV[1])
        redis.call(ARGV[4], KEYS[2], ARGV[8])
      end
    end
    redis.call(ARGV[4], KEYS[2], ARGV[1])
  end
  return 0
end
local n = count_down(KEYS[1], ARGV[3], target)
if not n then
  return -1
end
set_lease(KEYS[1], tonumber(ARGV[2]), KEYS[2], ARGV[4])
return n
