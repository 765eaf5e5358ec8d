-- rate_set.lua: set a rate limiter's rate (type overall, Redisson's
-- RateType.OVERALL, without a keep-alive time).
-- KEYS[1] configuration <name> (hash)
-- KEYS[2] value {<name>}:value
-- KEYS[3] grants {<name>}:permits
-- KEYS[4] channel relock_ratelimiter:{<name>}
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] the rate: permits per interval (>= 1)
-- ARGV[3] the interval, ms (>= 1)
-- ARGV[4] '1': only when the limiter has no configuration (TrySetRate);
--         '0': always (SetRate)
-- Returns 1 when the rate was set, 0 when ARGV[4] is '1' and the limiter
-- had one (nothing changes), -1 when KEYS[1] is a hash of another kind
-- (a lock's: it has no rate field), which is left as it is. Setting it always (ARGV[4] '0') starts an
-- empty window, as Redisson's setRate does (its value and grants go),
-- and publishes the rate, so that waiters look again.
if redis.call('exists', KEYS[1]) == 1 then
  if redis.call('hexists', KEYS[1], 'rate') == 0 then
    return -1
  end
  if ARGV[4] == '1' then
    return 0
  end
end
redis.call('hset', KEYS[1], 'rate', ARGV[2], 'interval', ARGV[3], 'type', '0', 'keepAliveTime', '0')
if ARGV[4] == '0' then
  redis.call('del', KEYS[2], KEYS[3])
  redis.call(ARGV[1], KEYS[4], ARGV[2])
end
return 1
