-- rate_set.lua (after refuse.lua): set a rate limiter's rate (type
-- overall, Redisson's RateType.OVERALL, without a keep-alive time).
-- KEYS[1] configuration <name> (hash)
-- KEYS[2] value {<name>}:value
-- KEYS[3] grants {<name>}:permits
-- KEYS[4] channel relock_ratelimiter:{<name>}
-- KEYS[5] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] the rate: permits per interval (>= 1)
-- ARGV[3] the interval, ms (>= 1)
-- ARGV[4] '1': only when the limiter has no configuration (TrySetRate);
--         '0': always (SetRate)
-- Returns 1 when the rate was set, 0 when ARGV[4] is '1' and the limiter
-- had one (nothing changes). Setting it always (ARGV[4] '0') starts an
-- empty window, as Redisson's setRate does (its value and grants go),
-- and publishes the rate, so that waiters look again. Refused, with
-- nothing changed (see refuse.lua): while the name's other form is in
-- use (its value, grants and channel are the same keys), and when
-- KEYS[1] is a hash of another kind (a lock's: it has no rate field).
local refused = rate_refusal(KEYS[1], KEYS[5])
if refused then
  return refused
end
if ARGV[4] == '1' and redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('hset', KEYS[1], 'rate', ARGV[2], 'interval', ARGV[3], 'type', '0', 'keepAliveTime', '0')
if ARGV[4] == '0' then
  redis.call('del', KEYS[2], KEYS[3])
  redis.call(ARGV[1], KEYS[4], ARGV[2])
end
return 1
