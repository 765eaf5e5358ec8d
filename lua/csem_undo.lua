-- csem_undo.lua: give back the permits of a counting semaphore that a
-- call took and will not keep (its context ended meanwhile, or its reply
-- was lost).
-- KEYS[1] the count <name>
-- KEYS[2] grants {<name>}:relock_grants (sorted set, see csem_acquire.lua)
-- KEYS[3] channel redisson_sc:{<name>}
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] the call's grant "<request ID>:<permits>"
-- ARGV[3] its permits
-- Returns 1 when the grant was remembered: it is forgotten, the count
-- goes up by ARGV[3], and the new count is published when above 0.
-- Returns 0 when it was not (never granted, or given back before):
-- nothing changes. Safe to resend. Not refused while the name's other
-- form is in use (it does not follow refuse.lua): it gives back to the
-- call's own count what the call took from it, and the grant, whose
-- request ID is the call's own, says that it did.
if redis.call('zrem', KEYS[2], ARGV[2]) == 0 then
  return 0
end
local count = redis.call('incrby', KEYS[1], ARGV[3])
if count > 0 then
  redis.call(ARGV[1], KEYS[3], count)
end
return 1
