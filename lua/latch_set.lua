-- latch_set.lua (after refuse.lua and latch_opened.lua): set a count-down
-- latch's count if it is not set (Redisson RCountDownLatch layout).
-- KEYS[1] the count <name> (a string holding an integer; no key: 0, open)
-- KEYS[2] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- KEYS[3] relock's mark of the latch's last opening {<name>}:relock_opened
-- ARGV[1] the count (> 0)
-- ARGV[2] channel redisson_countdownlatch__channel__{<name>} (always the
--         name in braces; given as an argument, not a key: for a name
--         with braces of its own it is in another cluster slot)
-- ARGV[3] publish command ('publish' or 'spublish')
-- ARGV[4] the mark's life, ms
-- Returns 1 when the count was set (and '1', a new count, published), 0
-- when the latch already has one (nothing is changed). A count set where
-- there was none writes the mark: the latch was open until now (opened by
-- anyone, Redisson included, or deleted), which a waiter that read a
-- count before must not miss. Refused, with nothing changed, while the
-- name's other form is in use (a latch shares only relock's mark with
-- it, but a name and its other form are one key space, which one of them
-- uses, whatever its kind).
if in_use(KEYS[1], KEYS[2]) then
  return name_conflict(KEYS[2])
end
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
latch_opened(KEYS[3], ARGV[4])
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[3], ARGV[2], '1')
return 1
