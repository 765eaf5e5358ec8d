-- lock_wake.lua (after wake.lua): hand on a wake-up that reached a client with no waiter
-- left for the lock (wake-one; see lock_unlock.lua).
-- KEYS[1] lock hash
-- KEYS[2] unlock channel redisson_lock__channel:{name}
-- KEYS[3] wake registry relock_wakers:{name}
-- ARGV[1] unlock message ('0')
-- ARGV[2] publish command ('publish' or 'spublish')
-- ARGV[3] the prefix of the clients' wake channels (relock_wake:{name}:)
-- ARGV[4] the PUBSUB subcommand that counts a channel's subscribers
-- ARGV[5] the client ID of the caller, which leaves the registry
-- Returns 1 when a wake-up was handed on (the lock is free), 0 when the
-- lock is taken (its release will wake someone). The wake-up goes to the
-- next registered client on its wake channel, or, when none is left, on
-- KEYS[2]. The waiters that are not registered need no hand-on: the
-- release that sent the wake-up published the unlock message on KEYS[2]
-- for them (see lock_unlock.lua).
redis.call('zrem', KEYS[3], ARGV[5])
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
local first = next_waker(KEYS[3], ARGV[3], ARGV[4], nil)
if first then
  redis.call(ARGV[2], ARGV[3] .. first, ARGV[1])
  return 1
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
