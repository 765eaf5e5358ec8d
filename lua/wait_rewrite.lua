-- wait_rewrite.lua: writes again the records of a Client's running waits
-- that its wait record hash lost (it expired during an outage longer than
-- its expiry, or was deleted), as they were first written (with their
-- since), and sets the hash's expiry.
-- KEYS[1]: the Client's wait record hash.
-- ARGV[1]: the expiry in ms; ARGV[2..]: field, record pairs.
-- Returns 1.
for i = 2, #ARGV, 2 do
  redis.call('hset', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('pexpire', KEYS[1], ARGV[1])
return 1
