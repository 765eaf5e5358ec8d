-- wait_expire.lua: renews the expiry of a Client's wait record hash, on
-- the watchdog's tick, and deletes the records the Client no longer has
-- (a record whose delete failed when its wait ended).
-- KEYS[1]: the Client's wait record hash.
-- ARGV[1]: the expiry in ms; ARGV[2]: the greatest field (a number) the
-- Client had given when it made the call; ARGV[3..]: the fields of its
-- live records. A field not live and not greater than ARGV[2] is deleted
-- (a greater one is a record written after the call was made). The
-- expiry is set when a live record is given.
-- Returns 1 always: a hash that is gone is no hold lost.
local live = {}
for i = 3, #ARGV do
  live[ARGV[i]] = true
end
local last = tonumber(ARGV[2])
for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
  local n = tonumber(f)
  if not live[f] and n ~= nil and n <= last then
    redis.call('hdel', KEYS[1], f)
  end
end
if #ARGV >= 3 then
  redis.call('pexpire', KEYS[1], ARGV[1])
end
return 1
