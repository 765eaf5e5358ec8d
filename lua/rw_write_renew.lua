-- rw_write_renew.lua (after rw_reads.lua): extend a write hold's lease if
-- the field still holds it.
-- KEYS[1] lock hash <name>
-- ARGV[1] lease in ms (> 0)
-- ARGV[2] writer field <clientID>:<owner>:write
-- ARGV[3] key prefix: {<name>}, or <name> when it has a hash tag
-- Returns 1 when the hash's lease was reset to the lease (or to the
-- longest lease of the owner's own read holds, if longer), 0 when the
-- field holds nothing (the key is then left untouched: a renewal never
-- re-creates a lock).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return 0
end
redis.call('pexpire', KEYS[1], math.max(tonumber(ARGV[1]), reads_left(KEYS[1], ARGV[3])))
return 1
