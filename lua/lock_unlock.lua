-- lock_unlock.lua (after count_down.lua, lease.lua and wake.lua): bring a
-- hold of a reentrant lock down to a count: one level fewer for an unlock,
-- or back to what its owner was granted after an acquisition whose reply
-- was lost.
-- KEYS[1] lock hash
-- KEYS[2] unlock channel redisson_lock__channel:{name}
-- KEYS[3] with ARGV[6], the wake registry relock_wakers:{name}
-- ARGV[1] unlock message ('0')
-- ARGV[2] lease in ms, reset while levels remain
-- ARGV[3] hash field <clientID>:<owner>
-- ARGV[4] publish command ('publish' or 'spublish')
-- ARGV[5] the count to leave (>= 0); a count at or under it is kept
-- ARGV[6] missing or '' (wake-one off) or the prefix of the clients' wake
--         channels (relock_wake:{name}:, followed by a client ID)
-- ARGV[7] with ARGV[6], the PUBSUB subcommand that counts a channel's
--         subscribers ('numsub' or 'shardnumsub'): a registered client
--         whose wake channel has none is gone
-- ARGV[8] with ARGV[6], the mark published on KEYS[2] before the unlock
--         message when a registered client was woken ('2')
-- ARGV[9] with ARGV[6], the caller's client ID
-- ARGV[10] with ARGV[6], '1' when the caller has a waiter for the lock
--         (it may be the one woken), else '0'
-- KEYS[3] (KEYS[1] again when wake-one is off: ARGV[6..10] are then ''),
--         KEYS[4] (the record of refused clients relock_knocks:{name}),
--         KEYS[5] (the fencing counter redisson_lock_token:{name}) and
--         KEYS[6] (the grantees relock_grantees:{name} with ARGV[17],
--         else KEYS[1]) with ARGV[11..18]: grants on release
-- KEYS[7] with the grant arguments, the fair lock's queue
--         redisson_lock_queue:{name}: while it exists, a plain or fenced
--         acquisition is refused (see refuse.lua), and no release grants
--         the lock (it wakes and publishes as without grants), so that no
--         grant takes the lock past the queue
-- ARGV[11] missing or '' (no grant to the caller's own waiter), or the
--         hash field of a waiter of the caller's client
--         (<clientID>:<owner>) that holds nothing and takes the lock if
--         this release frees it (see below)
-- ARGV[12] with ARGV[11], the granted hold's lease in ms: a short
--         confirmation window, which the waiter's client confirms (renews)
--         once it handed the hold to the waiter
-- ARGV[13] the PUBSUB subcommand that counts KEYS[2]'s subscribers
--         ('numsub' or 'shardnumsub')
-- ARGV[14] the mark published on KEYS[2] by a release that granted to a
--         waiter of its own client with nobody else subscribed ('3'): it
--         wakes nobody and tells those who watch the channel (relock top,
--         a Watch) that the lock changed hands
-- ARGV[15] the caller's client ID
-- ARGV[16] with ARGV[11], 'f' when that waiter's hold takes a token (a
--         fenced lock's), else ''
-- ARGV[17] with ARGV[6], '' (no grant to another client's waiter) or the
--         start of the grant message published on a client's wake
--         channel ('g ', see layout.GrantMessagePrefix)
-- ARGV[18] with ARGV[17], the longest window of a grant in ms: an entry
--         with a longer one (or none), of another kind than 'r' or 'f',
--         or whose field is not of the entry's client, was not written
--         by a client, and is not granted to; nor is one of the other
--         form of the name: the kind is upper case ('R', 'F') in the
--         entries of a name with a '{' (KEYS[1] is then its own hash
--         tag), lower case in those of a name without, and the names
--         "x" and "{x}" share KEYS[6] (a grant of an entry of "x" by a
--         release of "{x}" would write the field in "{x}")
-- Returns -1 when the field holds nothing (nothing is changed), else the
-- count left. At 0 the field is removed, and when that frees the lock
-- waiters are told: on KEYS[2], always; with wake-one on and live clients
-- registered, first on the wake channel of the one registered longest ago
-- (it registers again when it tries; registrations of clients that no
-- longer listen are dropped, see wake.lua), then the mark ARGV[8] and the
-- unlock message on KEYS[2]. The unlock message reaches every waiter that
-- is not registered (Redisson's, those of clients without wake-one),
-- whoever else subscribes: no count of subscribers decides it. A client
-- with registered waiters lets an unlock message that follows the mark
-- pass (the two are adjacent on the channel: one script sends both), so
-- that only the client woken on its own channel tries; Redisson's
-- waiters ignore the mark (an integer that is neither 0 nor 1). Above 0
-- the count is decremented by HINCRBY when it stands at one over the
-- count to leave, and left when it is there already (an earlier send of
-- this request), so a resent request does not release twice (see
-- count_down.lua); nothing else is written.
-- A grant on release, to the caller's own waiter: when the release
-- frees the lock, ARGV[11] names a waiter, KEYS[2] has at most one
-- subscriber (the caller's client, whose waiters listen there: no other
-- client and no Redisson waiter waits for the lock) and no other client
-- was refused the lock lately (KEYS[4]: a spin waiter, a poller or a
-- client on the other kind of pub/sub, which are no subscribers of
-- KEYS[2], may want it), the waiter's field is written (HINCRBY 1,
-- PEXPIRE ARGV[12]) instead of the unlock message (only the mark ARGV[14]
-- is published), and, with ARGV[16] 'f', a token is taken from the
-- counter as an acquisition takes one. The reply is then {0, token}
-- (token 0 for a plain lock): the count left (0) and the grant.
-- A grant on release through the wake-one registry (ARGV[17]): when the
-- release frees the lock and would wake a registered client (its turn,
-- see above), every subscriber of KEYS[2] is accounted for by the
-- registry (no more subscribers than live registrations, all of which
-- the release looks at: no Redisson waiter and no client without
-- wake-one waits) and no client was refused
-- the lock lately, the turn's client is granted the lock instead of
-- woken: when it is the caller and ARGV[11] names its waiter, that
-- waiter, with the reply {0, token} as above; else the waiter its
-- grantee entry in KEYS[6] names (recorded by that waiter's last refused
-- attempt, "<kind> <window> <stamp> <field>"), whose field is written
-- with the entry's window (and a token for kind 'f'), and told by the
-- grant message ARGV[17] .. "<kind> <token> <stamp> <field>" (the kind
-- as the entry has it: its case names the form of the name) on its
-- client's wake channel; the reply is {0, 0, 1}. An entry that does not
-- read so (see ARGV[18]) is used up, and the client woken. The turn's
-- entry is used up either way. Nothing is published on KEYS[2] after a
-- grant: its subscribers are all registered clients (a registered client
-- stays subscribed to KEYS[2] while its registration can be live), none
-- of which the unlock message would wake, and the granted client tells
-- KEYS[2] itself (the mark ARGV[14]) once its waiter has the lock, for
-- those who watch it; the server then writes to two connections only
-- (the caller's reply and the granted client's message), not to every
-- subscriber, before the waiter goes on. A grant to the caller's own
-- waiter in its turn publishes the mark ARGV[14] on KEYS[2], as a grant
-- to its own waiter does. A caller's own entry that names the field it releases (its
-- waiter got the lock by an attempt) is removed first, so that no
-- release grants the lock back to the field it frees. With another
-- subscriber, or a knock, the release wakes and publishes as above:
-- grants never pass over a waiter that is not registered.
local function grant_to(field, window, fenced)
  local token = 0
  if fenced then
    token = redis.call('incr', KEYS[5])
  end
  redis.call('hincrby', KEYS[1], field, 1)
  redis.call('pexpire', KEYS[1], window)
  return token
end

local target = tonumber(ARGV[5])
if target <= 0 then
  if redis.call('hdel', KEYS[1], ARGV[3]) == 0 then
    return -1
  end
  if redis.call('exists', KEYS[1]) == 0 then
    -- A fair lock's queue beside the lock: a plain or fenced acquisition
    -- is refused (refuse.lua), so no grant makes one past the queue.
    local queued = KEYS[7] ~= nil and redis.call('exists', KEYS[7]) == 1
    local own = (ARGV[11] or '') ~= '' and not queued
    if own and redis.call('pubsub', ARGV[13], KEYS[2])[2] <= 1 and not knocked(KEYS[4], ARGV[15]) then
      local token = grant_to(ARGV[11], ARGV[12], ARGV[16] == 'f')
      redis.call(ARGV[4], KEYS[2], ARGV[14])
      return {0, token}
    end
    if (ARGV[6] or '') ~= '' then
      local remote = (ARGV[17] or '') ~= ''
      if remote then
        local mine = redis.call('hget', KEYS[6], ARGV[9])
        if mine and string.sub(mine, -(#ARGV[3] + 1)) == ' ' .. ARGV[3] then
          redis.call('hdel', KEYS[6], ARGV[9])
        end
      end
      local skip = nil
      if ARGV[10] == '0' then
        skip = ARGV[9]
      end
      local grantees = nil
      if remote then
        grantees = KEYS[6]
      end
      local first, live = next_waker(KEYS[3], ARGV[6], ARGV[7], skip, remote, grantees)
      if first then
        local g = nil
        if remote then
          g = redis.call('hget', KEYS[6], first)
          if g then
            redis.call('hdel', KEYS[6], first)
          end
        end
        local turn = own and first == ARGV[9]
        if (turn or g) and not queued and redis.call('pubsub', ARGV[13], KEYS[2])[2] <= live and
            not knocked(KEYS[4], nil) then
          if turn then
            local token = grant_to(ARGV[11], ARGV[12], ARGV[16] == 'f')
            redis.call(ARGV[4], KEYS[2], ARGV[14])
            return {0, token}
          end
          local kind, window, stamp, field = string.match(g, '^([rfRF]) (%d+) (%d+) (.+)$')
          local braced = string.find(KEYS[1], '{', 1, true) ~= nil
          if field and (kind == string.upper(kind)) == braced and
              string.sub(field, 1, #first + 1) == first .. ':' and
              tonumber(window) > 0 and tonumber(window) <= tonumber(ARGV[18]) then
            local token = grant_to(field, window, string.lower(kind) == 'f')
            redis.call(ARGV[4], ARGV[6] .. first, ARGV[17] .. kind .. ' ' .. token .. ' ' .. stamp .. ' ' .. field)
            return {0, 0, 1}
          end
        end
        redis.call(ARGV[4], ARGV[6] .. first, ARGV[1])
        redis.call(ARGV[4], KEYS[2], ARGV[8])
      end
    end
    redis.call(ARGV[4], KEYS[2], ARGV[1])
  end
  return 0
end
local n = count_down(KEYS[1], ARGV[3], target)
if not n then
  return -1
end
set_lease(KEYS[1], tonumber(ARGV[2]), KEYS[2], ARGV[4])
return n
