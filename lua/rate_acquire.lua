-- rate_acquire.lua (after rate_window.lua): take permits of a rate
-- limiter's window, all of them or none.
-- KEYS as rate_window.lua
-- ARGV[1] permits wanted (>= 1)
-- ARGV[2] the call's grant ID (16 random bytes), the same for every
--         attempt of a call
-- Returns {1, available, 0} when the call holds its grant after the
-- script: granted now (scored now, the window's available count goes down
-- by ARGV[1]), or by an earlier send of the same request whose reply was
-- lost (its grant is in the window: nothing more is taken, so sending the
-- script twice has the effect of sending it once). Else {0, ms,
-- available}: too few permits are left in the window, nothing is taken,
-- and ms (>= 1) is how long until enough grants leave it. {-1, 0, 0}: the
-- limiter has no rate; {-2, rate, 0}: ARGV[1] is more than the rate
-- (never granted). The window never holds grants of more permits than
-- the rate.
local wanted = tonumber(ARGV[1])
if wanted > rate then
  return {-2, rate, 0}
end
local grant = struct.pack('Bc0I', string.len(ARGV[2]), ARGV[2], wanted)
if redis.call('zscore', grants, grant) then
  keep()
  return {1, available, 0}
end
if available < wanted then
  keep()
  local need = wanted - available
  local wait = interval
  local oldest = redis.call('zrange', grants, 0, need - 1, 'withscores')
  for i = 1, #oldest, 2 do
    local _, p = struct.unpack('Bc0I', oldest[i])
    need = need - p
    if need <= 0 then
      wait = tonumber(oldest[i + 1]) + interval - now
      break
    end
  end
  return {0, math.max(wait, 1), available}
end
redis.call('zadd', grants, now, grant)
available = available - wanted
keep()
return {1, available, 0}
