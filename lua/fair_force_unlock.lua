-- fair_force_unlock.lua (after fair_prune.lua): delete a fair lock whoever
-- holds it and wake the head of its queue (the keys are fair_prune.lua's).
-- ARGV[1] unlock message ('0')
-- ARGV[2] publish command ('publish' or 'spublish')
-- Returns 1 when there was a hold, else 0. The waiters that are gone are
-- pruned and the head left is woken either way (the lock is free after
-- the call). When there was a hold, the message also goes to KEYS[5]
-- itself, where the holders of the lock listen for a force-unlock.
local deleted = redis.call('del', KEYS[1])
wake(prune(), ARGV[2], ARGV[1])
if deleted == 1 then
  redis.call(ARGV[2], KEYS[5], ARGV[1])
  return 1
end
return 0
