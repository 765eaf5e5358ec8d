-- sem_delete.lua (after refuse.lua): delete a semaphore: its count, its
-- permits' leases and its queue of waiters.
-- KEYS[1] available permits <name>
-- KEYS[2] permit leases {<name>}:timeout
-- KEYS[3] waiter queue {<name>}:relock_queue
-- KEYS[4] waiter deadlines {<name>}:relock_queue_timeout
-- KEYS[5] permit holders {<name>}:relock_holders
-- KEYS[6] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- Returns 1 when there was a count, else 0. Refused, with nothing
-- changed, while the name's other form is in use: the leases and the
-- queue are its keys too, and deleting them would lose its permits.
if in_use(KEYS[1], KEYS[6]) then
  return name_conflict(KEYS[6])
end
local had = redis.call('exists', KEYS[1])
redis.call('del', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return had
