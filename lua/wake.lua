-- wake.lua: put before the scripts that wake one registered client
-- (wake-one; see lock_unlock.lua). It defines
-- next_waker(registry, prefix, numsub, skip): the client registered
-- longest ago in the sorted set registry (client ID -> deadline) that
-- still listens on its wake channel prefix .. ID, other than skip; nil
-- when there is none. On the way it drops the registrations whose
-- deadline passed and those of clients that no longer listen (closed, or
-- dead: the server dropped their connection), so that a dead client never
-- swallows a wake-up. numsub is the PUBSUB subcommand that counts a
-- channel's subscribers ('numsub' or 'shardnumsub').
local function next_waker(registry, prefix, numsub, skip)
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('zremrangebyscore', registry, '-inf', now)
  for _, id in ipairs(redis.call('zrange', registry, 0, -1)) do
    if redis.call('pubsub', numsub, prefix .. id)[2] == 0 then
      redis.call('zrem', registry, id)
    elseif id ~= skip then
      return id
    end
  end
  return nil
end
