-- sem_renew.lua (after sem_reclaim.lua): extend a permit's lease if it is
-- still held.
-- KEYS[1] available permits <name>
-- KEYS[2] permit leases {<name>}:timeout (sorted set)
-- KEYS[3] channel redisson_sc:{name}
-- KEYS[4] permit holders {<name>}:relock_holders (hash, see
--         sem_acquire.lua): it is made to live at least as long as the
--         renewed lease
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] permit ID (16 raw bytes)
-- ARGV[3] lease in ms (> 0)
-- Returns 1 when the permit's lease now ends ARGV[3] from now, 0 when it
-- is not held (released, or its lease ended first): a renewal never
-- brings a permit back.
if redis.call('zscore', KEYS[2], ARGV[2]) then
  redis.call('zadd', KEYS[2], now + tonumber(ARGV[3]), ARGV[2])
  local left = redis.call('pttl', KEYS[4])
  if left ~= -2 and left < tonumber(ARGV[3]) then
    redis.call('pexpire', KEYS[4], ARGV[3])
  end
  return 1
end
return 0
