-- rate_undo.lua (after rate_window.lua): give back a grant that a call
-- took and will not use (its context ended meanwhile, or its reply was
-- lost).
-- KEYS as rate_window.lua
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] the call's grant ID
-- ARGV[3] its permits
-- Returns {1, available, 0} when the grant was in the window: it leaves
-- it, its permits are available again, and the count available is
-- published on the channel. {0, available, 0} when it was not (never
-- granted, given back before, or gone with the window): nothing changes.
-- Safe to resend.
local grant = struct.pack('Bc0I', string.len(ARGV[2]), ARGV[2], tonumber(ARGV[3]))
if redis.call('zrem', grants, grant) == 0 then
  return {0, available, 0}
end
available = math.min(available + tonumber(ARGV[3]), rate)
keep()
redis.call(ARGV[1], KEYS[6], available)
return {1, available, 0}
