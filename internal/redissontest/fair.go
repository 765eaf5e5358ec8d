package redissontest

import (
	"context"
	"strings"

	"github.com/redis/rueidis"
)

// FairLock stands for Redisson's RFairLock (RedissonFairLock). Its
// waiters queue in redisson_lock_queue:{name} with deadlines, in the
// Client's wall-clock ms, in redisson_lock_timeout:{name}; each listens
// on its own channel redisson_lock__channel:{name}:<field>.
//
// A waiter's deadline is the deadline of the waiter queued before it (or,
// first in the queue, now plus the holder's TTL) plus the thread wait time
// (the Client's fairLockWaitTimeout, or tryLock's wait). Every acquisition
// takes the thread wait time off every deadline still queued, and a
// waiter whose deadline passed is dropped when it is at the head.
type FairLock struct{ *lockBase }

// FairLock returns the RFairLock of name (getFairLock).
func (c *Client) FairLock(name string) *FairLock { return &FairLock{newLockBase(c, name, fairLock{})} }

// Queue is the fair lock's queue key; Timeouts its deadlines' key.
func (l *FairLock) Queue() string { return prefixName("redisson_lock_queue", l.name) }

// Timeouts is the key of the fair lock's waiter deadlines.
func (l *FairLock) Timeouts() string { return prefixName("redisson_lock_timeout", l.name) }

// fairLock is RedissonFairLock's scripts.
type fairLock struct{ plainLock }

// fairDropStale is how each fair-lock script begins: drop the waiters at
// the head of the queue KEYS[2] whose deadline in KEYS[3] is not after
// the time in ARGV[NOW] (a head with no deadline stops it). NOW is
// replaced by the argument's index.
const fairDropStale = `
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if head == false then break end
  local deadline = redis.call('zscore', KEYS[3], head)
  if deadline == false or tonumber(deadline) > tonumber(ARGV[NOW]) then break end
  redis.call('zrem', KEYS[3], head)
  redis.call('lpop', KEYS[2])
end
`

func withNow(body, now string) string {
	return strings.ReplaceAll(fairDropStale, "ARGV[NOW]", "ARGV["+now+"]") + body
}

// fairTake is the part of the fair acquire scripts that takes the lock:
// when it is free and nobody is queued, or the field heads the queue, the
// field leaves the queue, every queued deadline loses the wait time
// ARGV[WAIT], and the field holds the lock with the lease ARGV[1]; a
// field that already holds it gets a level more. Both answer nil.
const fairTake = `
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (head == false or head == ARGV[2]) then
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], ARGV[2])
  for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[WAIT]), waiter)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
`

// fairAcquire stands for RedissonFairLock.tryLockInnerAsync with
// EVAL_LONG (lock(), tryLock(wait)). KEYS[1] the lock hash, KEYS[2] the
// queue, KEYS[3] the deadlines; ARGV[1] lease ms, ARGV[2] the field,
// ARGV[3] the thread wait time ms, ARGV[4] the Client's clock ms. Taken
// (see fairTake): nil. A field already queued: the lock's PTTL, at least
// 0. Else the field joins the tail of the queue with the deadline of the
// waiter before it (or now plus the lock's PTTL) plus the wait time, and
// the answer is that deadline less now (or the PTTL).
var fairAcquire = rueidis.NewLuaScript(withNow(strings.ReplaceAll(fairTake, "ARGV[WAIT]", "ARGV[3]")+`
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local ahead
local tail = redis.call('lindex', KEYS[2], -1)
if tail ~= false and tail ~= ARGV[2] then
  local due = redis.call('zscore', KEYS[3], tail)
  if due ~= false then
    ahead = tonumber(due) - tonumber(ARGV[4])
  end
end
if ahead == nil then
  ahead = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ahead + tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ahead`, "4"))

// fairAcquireOnce stands for RedissonFairLock.tryLockInnerAsync with
// EVAL_NULL_BOOLEAN (tryLock() without a wait): the same keys, ARGV[1]
// lease ms, ARGV[2] the field, ARGV[3] the Client's clock ms, ARGV[4] the
// thread wait time ms. Taken (see fairTake): nil; else 1, and the queue
// is left as it was (but for stale heads).
var fairAcquireOnce = rueidis.NewLuaScript(withNow(strings.ReplaceAll(fairTake, "ARGV[WAIT]", "ARGV[4]")+`
return 1`, "3"))

// fairRelease stands for RedissonFairLock.unlockInnerAsync. KEYS[1] the
// hash, KEYS[2] the queue, KEYS[3] the deadlines, KEYS[4] the channel
// (the head listens on KEYS[4]:<its field>), KEYS[5] the request's unlock
// latch; ARGV[1] the message (0), ARGV[2] lease ms, ARGV[3] the field,
// ARGV[4] the Client's clock ms, ARGV[5] the publish command, ARGV[6] the
// latch's life in ms. A request already answered answers the same again.
// No lock: the head is told, 1. Not held by the field: nil. A level
// left: the lease is reset, 0. The last level: the hash goes, the head is
// told, 1.
var fairRelease = rueidis.NewLuaScript(`
local before = redis.call('get', KEYS[5])
if before ~= false then
  return tonumber(before)
end` + withNow(`
local function tell_head()
  local head = redis.call('lindex', KEYS[2], 0)
  if head ~= false then
    redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1])
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  tell_head()
  redis.call('set', KEYS[5], 1, 'px', ARGV[6])
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], 0, 'px', ARGV[6])
  return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], 1, 'px', ARGV[6])
tell_head()
return 1`, "4"))

// fairGiveUp stands for RedissonFairLock.acquireFailedAsync. KEYS[1] the
// queue, KEYS[2] the deadlines; ARGV[1] the field, ARGV[2] the thread
// wait time ms. Every waiter queued behind the field loses the wait time
// off its deadline, and the field leaves the queue.
var fairGiveUp = rueidis.NewLuaScript(`
local queue = redis.call('lrange', KEYS[1], 0, -1)
local behind = false
for _, waiter in ipairs(queue) do
  if behind then
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), waiter)
  elseif waiter == ARGV[1] then
    behind = true
  end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])`)

// fairForceRelease stands for RedissonFairLock.forceUnlockAsync. KEYS[1]
// the hash, KEYS[2] the queue, KEYS[3] the deadlines, KEYS[4] the
// channel; ARGV[1] the message (0), ARGV[2] the Client's clock ms,
// ARGV[3] the publish command. When there was a hash it goes and the head
// is told: 1. Else 0.
var fairForceRelease = rueidis.NewLuaScript(withNow(`
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
local head = redis.call('lindex', KEYS[2], 0)
if head ~= false then
  redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
end
return 1`, "2"))

func (fairLock) keys(l *lockBase) (queue, timeouts string) {
	return prefixName("redisson_lock_queue", l.name), prefixName("redisson_lock_timeout", l.name)
}

// waitTime is the thread wait time of an acquisition: tryLock's wait when
// it has one, else the Client's fairLockWaitTimeout.
func waitTime(l *lockBase, waitMs int64) int64 {
	if waitMs > 0 {
		return waitMs
	}
	return l.c.fairWait.Milliseconds()
}

func (f fairLock) channel(l *lockBase, tid int64) string {
	return prefixName("redisson_lock__channel", l.name) + ":" + l.Field(tid)
}

func (f fairLock) tryLockInner(ctx context.Context, l *lockBase, tid, waitMs, leaseMs int64, once bool) (attempt, error) {
	queue, timeouts := f.keys(l)
	keys := []string{l.name, queue, timeouts}
	wait, now := itoa(waitTime(l, waitMs)), itoa(l.c.nowMillis())
	if once {
		_, isNil, err := optInt64(l.c.eval(ctx, fairAcquireOnce, keys, itoa(leaseMs), l.Field(tid), now, wait))
		return attempt{acquired: isNil && err == nil}, err
	}
	return ttlReply(l.c.eval(ctx, fairAcquire, keys, itoa(leaseMs), l.Field(tid), wait, now))
}

func (f fairLock) unlockInner(ctx context.Context, l *lockBase, tid int64, latch string, leaseMs int64) (int64, bool, error) {
	queue, timeouts := f.keys(l)
	return optInt64(l.c.eval(ctx, fairRelease,
		[]string{l.name, queue, timeouts, prefixName("redisson_lock__channel", l.name), latch},
		"0", itoa(leaseMs), l.Field(tid), itoa(l.c.nowMillis()), l.c.publish, ms(UnlockLatchTimeout)))
}

func (f fairLock) acquireFailed(ctx context.Context, l *lockBase, tid, waitMs int64) error {
	queue, timeouts := f.keys(l)
	return noReply(l.c.eval(ctx, fairGiveUp, []string{queue, timeouts}, l.Field(tid), itoa(waitTime(l, waitMs))).Error())
}

func (f fairLock) forceUnlock(ctx context.Context, l *lockBase) (bool, error) {
	queue, timeouts := f.keys(l)
	n, err := l.c.eval(ctx, fairForceRelease,
		[]string{l.name, queue, timeouts, prefixName("redisson_lock__channel", l.name)},
		"0", itoa(l.c.nowMillis()), l.c.publish).AsInt64()
	return n == 1, err
}
