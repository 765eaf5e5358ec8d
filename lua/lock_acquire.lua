-- lock_acquire.lua (after refuse.lua, count_down.lua and wake.lua): take
-- a reentrant lock for an owner that holds none of it as far as its
-- client knows (Redisson RLock layout).
-- KEYS[1] lock hash
-- KEYS[2] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- KEYS[3] the fair lock queue redisson_lock_queue:{name}
-- KEYS[4] with ARGV[3], the wake registry relock_wakers:{name} (sorted
--         set: client ID -> deadline in server ms)
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- ARGV[3] missing or, for a waiter that goes on waiting with wake-one on, its
--         client ID: when the lock is not taken, the client is (again)
--         registered for one wake-up at a time, until the deadline
-- ARGV[4] with ARGV[3], the registration's lifetime in ms
-- KEYS[5] with ARGV[5], the record of refused clients relock_knocks:{name}
--         (KEYS[4] is then KEYS[1] when the caller does not register, and
--         ARGV[3..4] '')
-- ARGV[5] missing or the caller's client ID: when the lock is held by
--         another, the client is recorded as refused (see knock in
--         wake.lua), for ARGV[6] ms
-- KEYS[6] with ARGV[7], the grantees of the lock relock_grantees:{name}
--         (KEYS[5] is then KEYS[1] when the caller does not knock, and
--         ARGV[5..6] '')
-- ARGV[7] missing or '', or, with ARGV[3], the grant a release may make
--         to the caller (see offer_grant in wake.lua), recorded with the
--         registration
-- Returns nil when the field holds the lock after the call, with a count
-- of exactly 1 and the lease reset; else the holder's remaining lease in ms
-- (-1 when the key has no expiry).
-- The count goes from 0 to 1 by HINCRBY. A field that is already there can
-- only be a level of this owner whose reply was lost (at 1: an earlier
-- send of this request): it is taken over at 1, not stacked on, so sending
-- the script twice has the effect of sending it once.
-- Refused, with nothing changed (see refuse.lua): while the name's other
-- form is in use, and when the name holds a read-write lock's hash, a
-- rate limiter's or a fair lock's queue. A free name whose other form
-- and queue are not there either is refused nothing: one EXISTS of both
-- says so, and the refusals' reads of a hash that is not there are
-- skipped (the path of every uncontended acquisition).
local free = redis.call('exists', KEYS[1]) == 0
local refused = nil
if not free or redis.call('exists', KEYS[2], KEYS[3]) > 0 then
  refused = lock_refusal(KEYS[1], KEYS[2], KEYS[3])
end
if refused then
  return refused
end
if free then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  count_up(KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
register(KEYS[4], ARGV[3], ARGV[4])
offer_grant(KEYS[6], ARGV[3], ARGV[7], ARGV[4])
knock(KEYS[5], ARGV[5], ARGV[6])
return redis.call('pttl', KEYS[1])
