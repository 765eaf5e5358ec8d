-- latch_set.lua: set a count-down latch's count if it is not set
-- (Redisson RCountDownLatch layout).
-- KEYS[1] the count <name> (a string holding an integer; no key: 0, open)
-- ARGV[1] the count (> 0)
-- ARGV[2] channel redisson_countdownlatch__channel__{<name>} (always the
--         name in braces; given as an argument, not a key: for a name
--         with braces of its own it is in another cluster slot)
-- ARGV[3] publish command ('publish' or 'spublish')
-- Returns 1 when the count was set (and '1', a new count, published), 0
-- when the latch already has one (nothing is changed).
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[3], ARGV[2], '1')
return 1
