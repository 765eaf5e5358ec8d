-- count_down.lua: put before every script that changes a hold's count
-- (the acquire, re-enter and unlock scripts of every lock kind). A count
-- moves by HINCRBY, one level at a time, as in Redisson; each script is
-- told the count its client expects the field to have after the call (the
-- target), so that a request sent twice moves the count once:
--   count_up(key, field, target): the count of field in hash key goes to
--     target (>= 1). It is incremented by 1 when it stands at target - 1
--     (0: the field is absent), the count the client expects before the
--     call; a count already at target is an earlier send of this same
--     request and is left; any other count (one that an unanswered
--     request moved) is set to target: the client's count is the truth
--     about its own field. Returns target.
--   count_down(key, field, target): the same downwards, for target >= 1:
--     decremented by 1 when it stands at target + 1, left at target, set
--     to target when higher still, never raised (a count under target
--     stays). Returns the count left, or nil when the field holds nothing
--     (then nothing is changed).
-- A release to 0 removes the field (HDEL) in the script itself.
local function count_up(key, field, target)
  local n = tonumber(redis.call('hget', key, field)) or 0
  if n == target - 1 then
    redis.call('hincrby', key, field, 1)
  elseif n ~= target then
    redis.call('hset', key, field, target)
  end
  return target
end

local function count_down(key, field, target)
  local n = tonumber(redis.call('hget', key, field))
  if not n then
    return nil
  end
  if n == target + 1 then
    redis.call('hincrby', key, field, -1)
    n = target
  elseif n > target then
    redis.call('hset', key, field, target)
    n = target
  end
  return n
end
