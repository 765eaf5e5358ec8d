-- rw_write_acquire.lua (after refuse.lua, count_down.lua and
-- rw_reads.lua): take the write lock of a read-write lock for an owner
-- that holds no write level of it as far as its client knows.
-- KEYS[1] lock hash <name>
-- KEYS[2] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] writer field <clientID>:<owner>:write
-- ARGV[3] key prefix: {<name>}, or <name> when it has a hash tag
-- Returns nil when the field holds the write lock after the call, with a
-- count of exactly 1 (from 0 by HINCRBY) and the hash's lease reset to the lease (or to the
-- longest lease of the owner's own read holds, if longer); else the
-- hash's remaining lease in ms (-1 when it has no expiry). It is taken
-- only when the lock is free: a read hold, even the owner's own, keeps it
-- out. A field that is already there can only be a level of this owner
-- whose reply was lost (at 1: an earlier send of this request): it is
-- taken over at 1, so sending the script twice has the effect of sending
-- it once. Refused, with nothing changed (see refuse.lua): while the
-- name's other form is in use, and when the name holds a lock's hash
-- without 'mode' (plain, fenced or fair) or a rate limiter's.
if in_use(KEYS[1], KEYS[2]) then
  return name_conflict(KEYS[2])
end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], 'mode', 'write')
  count_up(KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  return wrong_kind(hash_kind(KEYS[1]))
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  count_up(KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], math.max(tonumber(ARGV[1]), reads_left(KEYS[1], ARGV[3])))
  return nil
end
return redis.call('pttl', KEYS[1])
