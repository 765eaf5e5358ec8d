-- sem_set.lua (after refuse.lua): set a semaphore's permits if they were
-- never set.
-- KEYS[1] available permits <name>
-- KEYS[2] channel redisson_sc:{name}
-- KEYS[3] the key of the name's other form, or KEYS[1] (see refuse.lua)
-- ARGV[1] publish command ('publish' or 'spublish')
-- ARGV[2] the number of permits (>= 0)
-- Returns 1 when the count was set (and published), 0 when the semaphore
-- already had one (nothing is changed). Refused, with nothing changed,
-- while the name's other form is in use.
if in_use(KEYS[1], KEYS[3]) then
  return name_conflict(KEYS[3])
end
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('set', KEYS[1], ARGV[2])
redis.call(ARGV[1], KEYS[2], ARGV[2])
return 1
