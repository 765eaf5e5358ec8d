-- wait_expire.lua: renews the expiry of a Client's wait record hash, on
-- the watchdog's tick, deletes the records the Client no longer has (a
-- record whose delete failed when its wait ended), and tells whether the
-- records of its running waits are still there.
-- KEYS[1]: the Client's wait record hash.
-- ARGV[1]: the expiry in ms; ARGV[2]: the greatest field (a number) the
-- Client had given when it made the call; ARGV[3]: how many of the live
-- fields that follow were written (their write answered), listed first;
-- ARGV[4..]: the fields of its live records. A field not live and not
-- greater than ARGV[2] is deleted (a greater one is a record written after
-- the call was made). The expiry is set when a live record is given.
-- Returns 1, or 2 when a written live record is missing (the hash expired
-- during an outage longer than the expiry, or was deleted): the Client
-- then writes its records again (wait_rewrite.lua). A hash that is gone is
-- no hold lost: never 0.
local live = {}
for i = 4, #ARGV do
  live[ARGV[i]] = true
end
local last = tonumber(ARGV[2])
for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
  local n = tonumber(f)
  if not live[f] and n ~= nil and n <= last then
    redis.call('hdel', KEYS[1], f)
  end
end
local missing = false
for i = 4, 3 + tonumber(ARGV[3]) do
  if redis.call('hexists', KEYS[1], ARGV[i]) == 0 then
    missing = true
  end
end
if #ARGV >= 4 then
  redis.call('pexpire', KEYS[1], ARGV[1])
end
if missing then
  return 2
end
return 1
