-- rw_reads.lua: prepended to the read-write lock scripts that weigh the
-- leases of read holds (Redisson RReadWriteLock layout). It defines:
--   reads_left(hash, prefix): the longest remaining lease, in ms, among the
--     read holds of every field of the hash. A read hold at count n keeps
--     one key per level, <prefix>:<field>:rwlock_timeout:<level> for
--     level 1..n, each with its own PEXPIRE; prefix is {<name>}, or <name>
--     when the name has a hash tag. Returns -3 when no such key is alive.
--     Write fields (<clientID>:<owner>:write) keep no such keys.
--   extend(hash, ms): makes the hash's lease at least ms, never shorter.
-- Returns nothing; the script it prefixes goes on.
local function reads_left(hash, prefix)
  local longest = -3
  local all = redis.call('hgetall', hash)
  for i = 1, #all, 2 do
    local n = tonumber(all[i + 1])
    if n and string.sub(all[i], -6) ~= ':write' then
      for level = n, 1, -1 do
        local left = redis.call('pttl', prefix .. ':' .. all[i] .. ':rwlock_timeout:' .. level)
        if left > longest then
          longest = left
        end
      end
    end
  end
  return longest
end

local function extend(hash, ms)
  if redis.call('pttl', hash) < ms then
    redis.call('pexpire', hash, ms)
  end
end
