-- latch_count_down.lua (after latch_opened.lua): count a count-down latch
-- down by one.
-- KEYS[1] the count <name>
-- KEYS[2] relock's mark of the latch's last opening {<name>}:relock_opened
-- ARGV[1] channel redisson_countdownlatch__channel__{<name>}
-- ARGV[2] publish command ('publish' or 'spublish')
-- ARGV[3] the mark's life, ms
-- Returns the count left. At 0 the key is deleted, the mark written and
-- '0' published: the latch is open, every waiter goes on. A latch that is
-- not set stays unset and nothing is published. Not safe to resend: a
-- resent request counts down twice.
local left = redis.call('decr', KEYS[1])
if left <= 0 then
  redis.call('del', KEYS[1])
end
if left == 0 then
  latch_opened(KEYS[2], ARGV[3])
  redis.call(ARGV[2], ARGV[1], '0')
end
return math.max(left, 0)
