-- rw_force_unlock.lua: delete a read-write lock in one mode, whoever holds
-- it.
-- KEYS[1] lock hash <name>
-- KEYS[2] channel redisson_rwlock:{name}
-- ARGV[1] the mode to open: 'read' or 'write'
-- ARGV[2] message ('0' after read holds, '1' after a write hold)
-- ARGV[3] publish command ('publish' or 'spublish')
-- Returns 1 when the lock was in that mode (the hash, with every hold in
-- it, was deleted and the message published), else 0 and nothing is
-- changed. The read holds' lease keys are left to expire.
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call(ARGV[3], KEYS[2], ARGV[2])
  return 1
end
return 0
