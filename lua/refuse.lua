-- refuse.lua: put first in every script that creates or takes state under
-- a name: the acquire and re-enter scripts of every lock kind, the
-- semaphore's scripts that may write its count (set, add, and those that
-- follow sem_reclaim.lua), the counting semaphore's acquire, add and
-- drain, the rate limiter's set and the scripts that follow
-- rate_window.lua, a latch's set. A name is a key space, and a hash has
-- one kind; a script refuses, before it writes anything, with an error
-- reply that the client turns into relock.ErrNameConflict or
-- relock.ErrWrongKind:
--   in_use(name, other): whether other, the key under the other form of
--     the name, exists. Redisson wraps a name in braces to make its other
--     keys unless it has a '{', so the names "a" and "{a}" derive the same
--     keys and channels and differ only in the key under the name itself;
--     other is that key of the other form (internal/layout.OtherKey), in
--     the name's slot, or the name itself when it has no other form.
--   name_conflict(other): the reply 'RELOCK_NAME_CONFLICT <other>'.
--   wrong_kind(kind): the reply 'RELOCK_WRONG_KIND <kind>', kind being
--     the kind found under the name (internal/layout.Kind): 'rwlock' (a
--     hash with the read-write lock's 'mode' field), 'rate_limiter' (a
--     hash with the rate limiter's 'rate' field), 'lock' (a lock's hash
--     with neither: plain, fenced or fair, which look alike) or 'fair' (a
--     fair lock's queue of waiters beside the name). A lock's fields are
--     "<client ID>:<owner>", never 'mode' or 'rate'.
--   hash_kind(hash): the kind of a hash that a read-write lock finds
--     without its 'mode' field: 'rate_limiter' or 'lock'.
--   lock_refusal(hash, other, queue): the refusal of an acquisition of a
--     plain or fenced lock (queue: its fair queue key) or a re-entry of
--     any reentrant lock (queue nil), or nil: the other form in use, a
--     read-write lock's hash, a rate limiter's, a fair lock's queue.
--   rate_refusal(config, other): the refusal of a rate limiter's script,
--     or nil: the other form in use, a hash under the name without the
--     rate limiter's 'rate' field (a read-write lock's or a lock's).
local function in_use(name, other)
  return other ~= name and redis.call('exists', other) == 1
end

local function name_conflict(other)
  return redis.error_reply('RELOCK_NAME_CONFLICT ' .. other)
end

local function wrong_kind(kind)
  return redis.error_reply('RELOCK_WRONG_KIND ' .. kind)
end

local function hash_kind(hash)
  if redis.call('hexists', hash, 'rate') == 1 then
    return 'rate_limiter'
  end
  return 'lock'
end

local function lock_refusal(hash, other, queue)
  if in_use(hash, other) then
    return name_conflict(other)
  end
  if redis.call('hexists', hash, 'mode') == 1 then
    return wrong_kind('rwlock')
  end
  if redis.call('hexists', hash, 'rate') == 1 then
    return wrong_kind('rate_limiter')
  end
  if queue and redis.call('exists', queue) == 1 then
    return wrong_kind('fair')
  end
  return nil
end

local function rate_refusal(config, other)
  if in_use(config, other) then
    return name_conflict(other)
  end
  if redis.call('hexists', config, 'rate') == 0 and redis.call('exists', config) == 1 then
    if redis.call('hexists', config, 'mode') == 1 then
      return wrong_kind('rwlock')
    end
    return wrong_kind('lock')
  end
  return nil
end
