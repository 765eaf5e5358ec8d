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
-- ARGV[6] missing or '' (wake-one off) or the prefix of the clients' wake
--         channels (relock_wake:{name}:, followed by a client ID)
-- ARGV[7] with ARGV[6], the PUBSUB subcommand that counts a channel's
--         subscribers ('numsub' or 'shardnumsub'): a registered client
--         whose wake channel has none is gone
-- ARGV[8] with ARGV[6], the mark published on KEYS[2] before the unlock
--         message when a registered client was woken ('2')
-- ARGV[9] with ARGV[6], the caller's client ID
-- ARGV[10] with ARGV[6], '1' when the caller has a waiter for the lock
--         (it may be the one woken), else '0'
-- KEYS[3] (KEYS[1] again when wake-one is off: ARGV[6..10] are then ''),
--         KEYS[4] (the record of refused clients relock_knocks:{name}) and
--         KEYS[5] (for a fenced lock: its counter
--         redisson_lock_token:{name}) with ARGV[11]: a grant on release
-- ARGV[11] missing or '' (no grant), or the hash field of a waiter of
--         the caller's client (<clientID>:<owner>) that holds nothing and
--         takes the lock if this release frees it (see below)
-- ARGV[12] with ARGV[11], the granted hold's lease in ms: a short
--         confirmation window, which the waiter's client confirms (renews)
--         once it handed the hold to the waiter
-- ARGV[13] with ARGV[11], the PUBSUB subcommand that counts KEYS[2]'s
--         subscribers ('numsub' or 'shardnumsub')
-- ARGV[14] with ARGV[11], the mark published on KEYS[2] by a release
--         that granted ('3'): it wakes nobody and tells those who watch
--         the channel (relock top, a Watch) that the lock changed hands
-- ARGV[15] with ARGV[11], the caller's client ID
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
-- A grant on release: when the release frees the lock, ARGV[11] names a
-- waiter, KEYS[2] has at most one subscriber (the caller's client,
-- whose waiters listen there: no other client and no Redisson waiter
-- waits for the lock) and no other client was refused the lock lately
-- (KEYS[4]: a spin waiter, a poller or a client on the other kind of
-- pub/sub, which are no subscribers of KEYS[2], may want it), the
-- waiter's field is written (HINCRBY 1, PEXPIRE
-- ARGV[12]) instead of the unlock message (only the mark ARGV[14] is
-- published), and, with KEYS[5], a
-- token is taken from the counter as an acquisition takes one. The reply
-- is then {0, token} (token 0 without KEYS[5]): the count left (0) and
-- the grant. With another subscriber the release publishes as above:
-- waiters of other clients are never passed over by the caller's own.
local target = tonumber(ARGV[5])
if target <= 0 then
  if redis.call('hdel', KEYS[1], ARGV[3]) == 0 then
    return -1
  end
  if redis.call('exists', KEYS[1]) == 0 then
    if (ARGV[11] or '') ~= '' and redis.call('pubsub', ARGV[13], KEYS[2])[2] <= 1 and
        not knocked(KEYS[4], ARGV[15]) then
      local token = 0
      if KEYS[5] then
        token = redis.call('incr', KEYS[5])
      end
      redis.call('hincrby', KEYS[1], ARGV[11], 1)
      redis.call('pexpire', KEYS[1], ARGV[12])
      redis.call(ARGV[4], KEYS[2], ARGV[14])
      return {0, token}
    end
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
