-- latch_set.lua (after refuse.lua): set a count-down latch's count if it
-- is not set (Redisson RCountDownLatch layout).
-- KEYS[1] the count <name> (a string holding an integer; no key: 0, open)
-- KEYS[2] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- ARGV[1] the count (> 0)
-- ARGV[2] channel redisson_countdownlatch__channel__{<name>} (always the
--         name in braces; given as an argument, not a key: for a name
--         with braces of its own it is in another cluster slot)
-- ARGV[3] publish command ('publish' or 'spublish')
-- Returns 1 when the count was set (and '1', a new count, published), 0
-- when the latch already has one (nothing is changed). Refused, with
-- nothing changed, while the name's other form is in use (a latch shares
-- no key with it, but a name and its other form are one key space, which
-- one of them uses, whatever its kind).
if in_use(KEYS[1], KEYS[2]) then
  return name_conflict(KEYS[2])
end
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[3], ARGV[2], '1')
return 1
