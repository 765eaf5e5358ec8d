-- wake.lua: put before the scripts of the wake-one registry (see
-- lock_unlock.lua). It defines
-- register(registry, id, ttl): registers client id (again) for one
-- wake-up at a time, for ttl ms from now (the server's clock), when id is
-- given (not nil or ''): the attempts of a waiter that goes on waiting
-- register its client; and
-- offer_grant(grantees, id, value, ttl): records the waiter a release may
-- grant the lock to (see below);
-- next_waker(registry, prefix, numsub, skip, all, grantees): the client
-- registered longest ago in the sorted set registry (client ID ->
-- deadline) that still listens on its wake channel prefix .. ID, other
-- than skip; nil when there is none. With all, it looks at every
-- registration, and returns as its second value the number of live ones
-- (skip's too). On the way it drops the registrations whose
-- deadline passed and those of clients that no longer listen (closed, or
-- dead: the server dropped their connection), so that a dead client never
-- swallows a wake-up; with grantees (the hash of grantees entries, see
-- offer_grant), their entries too, which would otherwise stay as long as
-- other clients' attempts keep the hash. numsub is the PUBSUB subcommand
-- that counts a channel's subscribers ('numsub' or 'shardnumsub').
local function register(registry, id, ttl)
  if (id or '') == '' then
    return
  end
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('zadd', registry, now + tonumber(ttl), id)
  redis.call('pexpire', registry, ttl)
end

-- offer_grant records, in the hash grantees, value as the grant a
-- release may make to client id's waiter (see layout.Grantees), for ttl
-- ms (the registration's lifetime). No-op when value is missing or ''.
local function offer_grant(grantees, id, value, ttl)
  if (value or '') == '' then
    return
  end
  redis.call('hset', grantees, id, value)
  redis.call('pexpire', grantees, ttl)
end

-- knock records, in the sorted set knocks, that the client id was refused
-- the lock (an acquisition found it held), as register records a
-- registration: id's deadline is ttl ms from now, and the set lives as
-- long as its last deadline. No-op when id is missing or ''.
local knock = register

-- knocked reports whether a client other than id was refused the lock
-- within its knock's lifetime (see knock).
local function knocked(knocks, id)
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, other in ipairs(redis.call('zrangebyscore', knocks, now, '+inf')) do
    if other ~= id then
      return true
    end
  end
  return false
end

local function next_waker(registry, prefix, numsub, skip, all, grantees)
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if grantees then
    for _, id in ipairs(redis.call('zrangebyscore', registry, '-inf', now)) do
      redis.call('hdel', grantees, id)
    end
  end
  redis.call('zremrangebyscore', registry, '-inf', now)
  local first = nil
  local live = 0
  for _, id in ipairs(redis.call('zrange', registry, 0, -1)) do
    if redis.call('pubsub', numsub, prefix .. id)[2] == 0 then
      redis.call('zrem', registry, id)
      if grantees then
        redis.call('hdel', grantees, id)
      end
    else
      live = live + 1
      if not first and id ~= skip then
        first = id
        if not all then
          return first, live
        end
      end
    end
  end
  return first, live
end
