-- csem_acquire.lua (after refuse.lua): take permits of a counting
-- semaphore (Redisson's RSemaphore layout), all of them or none.
-- KEYS[1] the count <name> (a string holding an integer)
-- KEYS[2] grants {<name>}:relock_grants (sorted set, relock's own: a
--         call's grant "<request ID>:<permits>" -> when it is forgotten,
--         server ms)
-- KEYS[3] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- ARGV[1] permits wanted (>= 1)
-- ARGV[2] the call's grant "<request ID>:<permits>", the same for every
--         attempt of a call
-- ARGV[3] how long a grant is remembered, ms
-- Returns {1, count} when the call holds its permits after the script:
-- taken now (the count goes down by ARGV[1], and the grant is
-- remembered), or by an earlier send of the same request whose reply was
-- lost (its grant is remembered: nothing more is taken, so sending the
-- script twice has the effect of sending it once). Else {0, count}:
-- fewer than ARGV[1] permits are available (or the count was never set:
-- 0), and nothing changes. Grants past their time are forgotten first.
-- Refused, with nothing changed, while the name's other form is in use:
-- the grants and the channel are that form's too.
if in_use(KEYS[1], KEYS[3]) then
  return name_conflict(KEYS[3])
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('zremrangebyscore', KEYS[2], '-inf', now)
local count = tonumber(redis.call('get', KEYS[1]) or '0')
if redis.call('zscore', KEYS[2], ARGV[2]) then
  return {1, count}
end
local wanted = tonumber(ARGV[1])
if count < wanted then
  return {0, count}
end
-- Lua's numbers hold integers exactly only up to 2^53: above that, count
-- and wanted may round to one number although fewer are available. The
-- server's integers decide: DECRBY is exact, and a count it takes below
-- 0 is put back (INCRBY restores it exactly), nothing taken.
local left = redis.call('decrby', KEYS[1], ARGV[1])
if left < 0 then
  redis.call('incrby', KEYS[1], ARGV[1])
  return {0, count}
end
count = left
redis.call('zadd', KEYS[2], now + tonumber(ARGV[3]), ARGV[2])
redis.call('pexpire', KEYS[2], ARGV[3])
return {1, count}
