-- rw_read_acquire.lua (after refuse.lua, count_down.lua and
-- rw_reads.lua): take the read lock of a read-write lock for an owner
-- that holds no read level of it as far as its client knows.
-- KEYS[1] lock hash <name>: field 'mode' ('read' or 'write'), reader
--         fields <clientID>:<owner> and the writer field
--         <clientID>:<owner>:write, each -> hold count
-- KEYS[2] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] reader field <clientID>:<owner>
-- ARGV[3] key prefix: {<name>}, or <name> when it has a hash tag
-- Returns nil when the field holds a read lock after the call, with a
-- count of exactly 1 (from 0 by HINCRBY), its lease key <prefix>:<field>:rwlock_timeout:1 set
-- to the lease and the hash's lease at least that long; else the hash's
-- remaining lease in ms (-1 when it has no expiry). It is taken when the
-- lock is free, in read mode, or in write mode held by the same owner's
-- writer field. A level of the field that is already there can only be
-- this owner's, won by an attempt whose reply was lost (at 1: an earlier
-- send of this request): it is taken over (count 1, the keys of higher
-- levels deleted), so sending the script twice has the effect of sending
-- it once. Refused, with nothing changed (see refuse.lua): while the
-- name's other form is in use, and when the name holds a lock's hash
-- without 'mode' (plain, fenced or fair) or a rate limiter's.
if in_use(KEYS[1], KEYS[2]) then
  return name_conflict(KEYS[2])
end
local mode = redis.call('hget', KEYS[1], 'mode')
local free = (not mode) and redis.call('exists', KEYS[1]) == 0
if not (mode or free) then
  return wrong_kind(hash_kind(KEYS[1]))
end
if free or mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 1) then
  local key = ARGV[3] .. ':' .. ARGV[2] .. ':rwlock_timeout:'
  local old = tonumber(redis.call('hget', KEYS[1], ARGV[2])) or 0
  for level = old, 2, -1 do
    redis.call('del', key .. level)
  end
  if free then
    redis.call('hset', KEYS[1], 'mode', 'read')
  end
  count_up(KEYS[1], ARGV[2], 1)
  redis.call('set', key .. '1', 1, 'px', ARGV[1])
  extend(KEYS[1], tonumber(ARGV[1]))
  return nil
end
return redis.call('pttl', KEYS[1])
