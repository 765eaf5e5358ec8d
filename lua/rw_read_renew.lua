-- rw_read_renew.lua (after rw_reads.lua): extend a read hold's lease if
-- the field still holds it.
-- KEYS[1] lock hash <name>
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] reader field <clientID>:<owner>
-- ARGV[3] key prefix: {<name>}, or <name> when it has a hash tag
-- Returns 1 when every level's lease key
-- <prefix>:<field>:rwlock_timeout:<level> got the lease again and the
-- hash's lease is at least that long; 0 when the field holds nothing or a
-- level's key has expired (the hold ran out: a reader's release would no
-- longer count it). A renewal never re-creates a hold.
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if not n then
  return 0
end
local key = ARGV[3] .. ':' .. ARGV[2] .. ':rwlock_timeout:'
for level = n, 1, -1 do
  if redis.call('pexpire', key .. level, ARGV[1]) == 0 then
    return 0
  end
end
extend(KEYS[1], tonumber(ARGV[1]))
return 1
