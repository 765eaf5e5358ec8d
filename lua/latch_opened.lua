-- latch_opened.lua: put before the latch's scripts. It defines
-- latch_opened(key, ttl): relock found the latch open (its count went to 0,
-- or a new count is set where there was none): key, the latch's mark
-- {<name>}:relock_opened, gets the server's time in microseconds, or one
-- more than the value it holds when that is not below (so the mark never
-- takes a value it holds), and expires in ttl ms. Redis keeps no other
-- record of an opening: a waiter that finds the mark changed since it read
-- a count goes on, even if a new count was set since.
local function latch_opened(key, ttl)
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  -- pcall: a key of another type (not relock's) is replaced, and
  -- fails nothing after the count was changed.
  local last = tonumber(redis.pcall('get', key))
  if last and last >= now then
    now = last + 1
  end
  redis.call('set', key, string.format('%.0f', now), 'px', ttl)
end
