-- wait_record.lua: records a waiting call in its Client's wait record hash
-- (see internal/waitrec), stamped with the server's time.
-- KEYS[1]: the Client's wait record hash ("<prefix>relock_waits:{<clientID>}").
-- ARGV[1]: the call's field; ARGV[2]: its record as JSON without "since"
-- (an object, ending in '}'); ARGV[3]: the hash's expiry in ms (the
-- Client's watchdog timeout); ARGV[4]: how long the wait has lasted, in
-- ms (a wait is recorded once it lasted a while): since is that long
-- before the server's time.
-- Returns the record's since: the server's time in ms, less ARGV[4].
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[4])
local since = string.format('%d', now)
redis.call('hset', KEYS[1], ARGV[1], string.sub(ARGV[2], 1, -2) .. ',"since":' .. since .. '}')
redis.call('pexpire', KEYS[1], ARGV[3])
return now
