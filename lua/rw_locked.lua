-- rw_locked.lua: whether one side of a read-write lock is held.
-- KEYS[1] lock hash <name>
-- ARGV[1] 'read' or 'write'
-- Returns 1 when that side is held by anyone: 'write' while the hash is
-- in write mode; 'read' in read mode, or in write mode when the writer
-- also holds read levels. Else 0. Read-only.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == ARGV[1] then
  return 1
end
if ARGV[1] == 'read' and mode == 'write' and redis.call('hlen', KEYS[1]) > 2 then
  return 1
end
return 0
