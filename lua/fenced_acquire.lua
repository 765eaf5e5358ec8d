-- fenced_acquire.lua (after refuse.lua, count_down.lua and wake.lua):
-- take a fenced lock for an owner that holds none of it as far as its
-- client knows.
-- KEYS[1] lock hash
-- KEYS[2] fencing counter redisson_lock_token:{name}
-- KEYS[3] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- KEYS[4] the fair lock queue redisson_lock_queue:{name}
-- KEYS[5] with ARGV[3], the wake registry relock_wakers:{name}
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] hash field <clientID>:<owner>
-- ARGV[3] missing or the client ID of a waiter that goes on waiting with
--         wake-one on (see lock_acquire.lua)
-- ARGV[4] with ARGV[3], the registration's lifetime in ms
-- KEYS[6] with ARGV[5..6], the record of refused clients (KEYS[5] is then
--         KEYS[1] when the caller does not register), as for
--         lock_acquire.lua
-- KEYS[7] with ARGV[7], the grantees of the lock (KEYS[6] is then KEYS[1]
--         when the caller does not knock), as for lock_acquire.lua
-- Returns {1, token} when the field holds the lock after the call, with a
-- count of exactly 1 (from 0 by HINCRBY), the lease reset and a token from
-- the counter that no acquisition had before (a field that was already
-- there, a level of this owner whose reply was lost, is taken over at 1,
-- and also gets a new token).
-- Returns {0, pttl} when another field holds the lock (pttl -1 when the key
-- has no expiry). Refused, with nothing changed (no token taken), as
-- lock_acquire.lua is.
local refused = lock_refusal(KEYS[1], KEYS[3], KEYS[4])
if refused then
  return refused
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local token = redis.call('incr', KEYS[2])
  count_up(KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, token}
end
register(KEYS[5], ARGV[3], ARGV[4])
offer_grant(KEYS[7], ARGV[3], ARGV[7], ARGV[4])
knock(KEYS[6], ARGV[5], ARGV[6])
return {0, redis.call('pttl', KEYS[1])}
