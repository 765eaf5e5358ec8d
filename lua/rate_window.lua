-- rate_window.lua (after refuse.lua): prepended to every rate-limiter
-- script that looks at the window (Redisson's RRateLimiter layout). It
-- reads the rate, drops the grants that have left the window, and sets
-- `available`, the rate less the permits granted in the window (now -
-- interval, now], on the server's clock; keep() writes it back as
-- Redisson's value.
-- KEYS[1] configuration <name> (hash: rate, interval ms, type '0' overall
--         or '1' per client, keepAliveTime ms)
-- KEYS[2] value {<name>}:value (string: permits left in the window)
-- KEYS[3] this client's value {<name>}:value:<clientID> (type '1')
-- KEYS[4] grants {<name>}:permits (sorted set: a grant packed as
--         Redisson packs it, struct 'Bc0I': the length of an ID, the ID,
--         the permits -> when it was granted, ms)
-- KEYS[5] this client's grants {<name>}:permits:<clientID> (type '1')
-- KEYS[6] channel relock_ratelimiter:{<name>}
-- KEYS[7] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- Refused first, with nothing changed (see refuse.lua): while the name's
-- other form is in use (its value, grants and channel are the same keys),
-- and when KEYS[1] is a hash of another kind (a lock's). When the limiter
-- has no rate the script returns {-1, 0, 0} here.
-- Grants of Redisson clients are scored on their own clocks: one ahead of
-- the server's stays in the window longer, one behind leaves it sooner.
local refused = rate_refusal(KEYS[1], KEYS[7])
if refused then
  return refused
end
local rate = redis.call('hget', KEYS[1], 'rate')
local interval = redis.call('hget', KEYS[1], 'interval')
local ratetype = redis.call('hget', KEYS[1], 'type')
if not rate or not interval or not ratetype then
  return {-1, 0, 0}
end
rate = tonumber(rate)
interval = tonumber(interval)
local value, grants = KEYS[2], KEYS[4]
if ratetype == '1' then
  value, grants = KEYS[3], KEYS[5]
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function permitsOf(members)
  local n = 0
  for i = 1, #members do
    local _, p = struct.unpack('Bc0I', members[i])
    n = n + p
  end
  return n
end
local left = redis.call('get', value)
local gone = redis.call('zrangebyscore', grants, 0, now - interval)
if #gone > 0 then
  redis.call('zremrangebyscore', grants, 0, now - interval)
end
local available
if left then
  available = tonumber(left) + permitsOf(gone)
end
if not left or available > rate or redis.call('zcard', grants) == 0 then
  -- No value, one out of step with the grants, or no grant in the
  -- window: count the grants.
  available = rate - permitsOf(redis.call('zrange', grants, 0, -1))
end
-- keep writes `available` back and gives the keys the configuration's
-- lifetime (its keepAliveTime, else its TTL), as Redisson does.
local function keep()
  redis.call('set', value, available)
  local keepAlive = tonumber(redis.call('hget', KEYS[1], 'keepAliveTime') or '0')
  if keepAlive > 0 then
    redis.call('pexpire', KEYS[1], keepAlive)
    redis.call('pexpire', value, keepAlive)
    redis.call('pexpire', grants, keepAlive)
  else
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
      redis.call('pexpire', value, ttl)
      redis.call('pexpire', grants, ttl)
    end
  end
end
