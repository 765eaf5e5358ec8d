package redissontest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// attempt is the outcome of one acquire script: taken, or the TTL the
// script answered instead (-1: no expiry, -2: no key), and for the fenced
// lock's token script the token.
type attempt struct {
	acquired bool
	ttl      int64
	token    int64
}

// variant is what differs between Redisson's lock classes, all of which
// wait as RedissonLock does.
type variant interface {
	// field is the hash field of thread tid (getLockName).
	field(l *lockBase, tid int64) string
	// channel is where a waiter of thread tid listens (getChannelName, and
	// the fair lock's per-thread subscribe).
	channel(l *lockBase, tid int64) string
	// tryLockInner runs the acquire script (tryLockInnerAsync); waitMs is
	// tryLock's wait, -1 for lock(); once picks the fair lock's
	// single-attempt form (tryLock() without a wait).
	tryLockInner(ctx context.Context, l *lockBase, tid, waitMs, leaseMs int64, once bool) (attempt, error)
	// unlockInner runs the unlock script (unlockInnerAsync): 1 released
	// (or nothing was locked, for the fair lock), 0 a level left, isNil
	// when the thread held nothing.
	unlockInner(ctx context.Context, l *lockBase, tid int64, latch string, leaseMs int64) (n int64, isNil bool, err error)
	// acquireFailed is run when tryLock's wait ends (acquireFailedAsync).
	acquireFailed(ctx context.Context, l *lockBase, tid, waitMs int64) error
	// forceUnlock runs forceUnlockAsync's script.
	forceUnlock(ctx context.Context, l *lockBase) (bool, error)
	// readRenewal is set for the read lock, which the watchdog renews with
	// ReadLockTask's script.
	readRenewal() bool
}

// lockBase is RedissonLock: the waiting, the lease bookkeeping and the
// unlock, shared by every lock kind.
type lockBase struct {
	c    *Client
	name string
	v    variant
	// leaseMs is internalLockLeaseTime: the watchdog timeout, or the lease
	// of the last acquisition that gave one (RedissonLock keeps it per
	// instance).
	leaseMs atomic.Int64
}

func newLockBase(c *Client, name string, v variant) *lockBase {
	l := &lockBase{c: c, name: name, v: v}
	l.leaseMs.Store(c.watchdog.Milliseconds())
	return l
}

// Name is the lock's name.
func (l *lockBase) Name() string { return l.name }

// Field is the hash field of thread tid.
func (l *lockBase) Field(tid int64) string { return l.v.field(l, tid) }

// Channel is the channel a waiter of thread tid listens on.
func (l *lockBase) Channel(tid int64) string { return l.v.channel(l, tid) }

// keyPrefix is what the read holds' lease keys start with: "{name}", or
// the name when it has a '{' (the part of suffixName before the suffix).
func (l *lockBase) keyPrefix() string {
	if strings.Contains(l.name, "{") {
		return l.name
	}
	return "{" + l.name + "}"
}

// bind returns ctx, ended also when the Client closes.
func (c *Client) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// tryAcquire is RedissonLock.tryAcquireAsync: one script, and on success
// the lease bookkeeping: a given lease becomes internalLockLeaseTime,
// none puts the hold on the watchdog.
func (l *lockBase) tryAcquire(ctx context.Context, tid, waitMs int64, lease time.Duration, once bool) (attempt, error) {
	leaseMs := l.leaseMs.Load()
	if lease > 0 {
		leaseMs = lease.Milliseconds()
	}
	at, err := l.v.tryLockInner(ctx, l, tid, waitMs, leaseMs, once)
	if err != nil || !at.acquired {
		return at, err
	}
	if lease > 0 {
		l.leaseMs.Store(lease.Milliseconds())
	} else {
		l.c.schedule(l.name, l.v.readRenewal(), l.keyPrefix(), tid, l.Field(tid))
	}
	return at, nil
}

// Attempt makes one attempt for thread tid as lock() makes it (lease 0:
// the watchdog's) and reports whether it took the lock, else the TTL the
// script answered.
func (l *lockBase) Attempt(ctx context.Context, tid int64, lease time.Duration) (bool, int64, error) {
	at, err := l.tryAcquire(ctx, tid, -1, lease, false)
	return at.acquired, at.ttl, err
}

// TryLockOnce is tryLock() without a wait: one attempt on the watchdog
// lease.
func (l *lockBase) TryLockOnce(ctx context.Context, tid int64) (bool, error) {
	at, err := l.tryAcquire(ctx, tid, -1, 0, true)
	return at.acquired, err
}

// Lock is lock() (lease 0) or lock(leaseTime) for thread tid: it waits as
// RedissonLock.lock waits until it holds the lock, or ctx ends.
func (l *lockBase) Lock(ctx context.Context, tid int64, lease time.Duration) error {
	_, err := l.lockWait(ctx, tid, lease, l.tryAcquire)
	return err
}

type tryFunc func(ctx context.Context, tid, waitMs int64, lease time.Duration, once bool) (attempt, error)

// lockWait is RedissonLock.lock: try; subscribe; then, until taken, try
// and sleep on the entry's semaphore for the TTL answered (without a
// limit when the key has no expiry).
func (l *lockBase) lockWait(ctx context.Context, tid int64, lease time.Duration, try tryFunc) (attempt, error) {
	ctx, cancel := l.c.bind(ctx)
	defer cancel()
	at, err := try(ctx, tid, -1, lease, false)
	if err != nil || at.acquired {
		return at, err
	}
	e, err := l.c.ps.subscribe(ctx, lockEntry, l.Channel(tid))
	if err != nil {
		return attempt{}, err
	}
	defer l.c.ps.unsubscribe(e)
	for {
		at, err = try(ctx, tid, -1, lease, false)
		if err != nil || at.acquired {
			return at, err
		}
		sleep := time.Duration(-1)
		if at.ttl >= 0 {
			sleep = time.Duration(at.ttl) * time.Millisecond
		}
		e.sem.tryAcquire(ctx, sleep)
		if err := ctx.Err(); err != nil {
			return attempt{}, err
		}
	}
}

// TryLock is tryLock(waitTime, leaseTime) for thread tid (lease 0: the
// watchdog's). When the wait runs out it runs the kind's acquireFailed
// and reports false; when ctx ends first it does the same and returns
// ctx's error.
func (l *lockBase) TryLock(ctx context.Context, tid int64, wait, lease time.Duration) (bool, error) {
	at, err := l.tryWait(ctx, tid, wait, lease, l.tryAcquire)
	return at.acquired, err
}

// tryWait is RedissonLock.tryLock(waitTime, leaseTime, unit): try;
// subscribe within the time left; then, until taken or the time is up,
// try and sleep on the entry's semaphore for the TTL answered or the time
// left, whichever is shorter.
func (l *lockBase) tryWait(ctx context.Context, tid int64, wait, lease time.Duration, try tryFunc) (attempt, error) {
	bctx, cancel := l.c.bind(ctx)
	defer cancel()
	waitMs := wait.Milliseconds()
	left := wait
	start := time.Now()
	at, err := try(bctx, tid, waitMs, lease, false)
	if err != nil || at.acquired {
		return at, err
	}
	left -= time.Since(start)
	if left <= 0 {
		return attempt{}, l.failed(bctx, tid, waitMs, nil)
	}
	start = time.Now()
	sctx, scancel := context.WithTimeout(bctx, left)
	e, err := l.c.ps.subscribe(sctx, lockEntry, l.Channel(tid))
	scancel()
	if err != nil {
		return attempt{}, l.failed(bctx, tid, waitMs, bctx.Err())
	}
	defer l.c.ps.unsubscribe(e)
	left -= time.Since(start)
	if left <= 0 {
		return attempt{}, l.failed(bctx, tid, waitMs, nil)
	}
	for {
		start = time.Now()
		at, err = try(bctx, tid, waitMs, lease, false)
		if err != nil || at.acquired {
			if err != nil {
				return attempt{}, l.failed(bctx, tid, waitMs, err)
			}
			return at, nil
		}
		left -= time.Since(start)
		if left <= 0 {
			return attempt{}, l.failed(bctx, tid, waitMs, nil)
		}
		start = time.Now()
		sleep := left
		if at.ttl >= 0 && time.Duration(at.ttl)*time.Millisecond < left {
			sleep = time.Duration(at.ttl) * time.Millisecond
		}
		e.sem.tryAcquire(bctx, sleep)
		left -= time.Since(start)
		if bctx.Err() != nil {
			return attempt{}, l.failed(bctx, tid, waitMs, bctx.Err())
		}
		if left <= 0 {
			return attempt{}, l.failed(bctx, tid, waitMs, nil)
		}
	}
}

// failed runs acquireFailed (on a detached context) and returns cause, or
// acquireFailed's error.
func (l *lockBase) failed(ctx context.Context, tid, waitMs int64, cause error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unsubscribeTimeout)
	defer cancel()
	if err := l.v.acquireFailed(dctx, l, tid, waitMs); err != nil && cause == nil {
		return err
	}
	return cause
}

// Unlock is unlock() for thread tid: one level. It returns
// ErrIllegalMonitorState when the thread holds nothing.
func (l *lockBase) Unlock(ctx context.Context, tid int64) error {
	_, err := l.UnlockResult(ctx, tid)
	return err
}

// UnlockResult is Unlock that also returns the script's reply: 1 when
// the lock was freed (the fair lock: or was not locked at all), 0 when
// levels are left.
func (l *lockBase) UnlockResult(ctx context.Context, tid int64) (int64, error) {
	requestID := generateID()
	latch := prefixName("redisson_unlock_latch", l.name) + ":" + requestID
	n, isNil, err := l.v.unlockInner(ctx, l, tid, latch, l.leaseMs.Load())
	// RedissonBaseLock deletes the latch once the reply is in.
	_ = l.c.rdb.Do(context.WithoutCancel(ctx), l.c.rdb.B().Del().Key(latch).Build()).Error()
	// cancelExpirationRenewal: one level off the watchdog, and the lease
	// back to the watchdog's once the lock is free or was not held.
	l.c.cancelRenewal(l.name, l.v.readRenewal(), tid)
	if err == nil && (isNil || n == 1) {
		l.leaseMs.Store(l.c.watchdog.Milliseconds())
	}
	switch {
	case err != nil:
		return 0, err
	case isNil:
		return 0, ErrIllegalMonitorState
	}
	return n, nil
}

// ForceUnlock is forceUnlock(): it deletes the lock whoever holds it.
func (l *lockBase) ForceUnlock(ctx context.Context) (bool, error) {
	l.c.cancelRenewal(l.name, l.v.readRenewal(), -1)
	return l.v.forceUnlock(ctx, l)
}

// HoldCount is getHoldCount() for thread tid.
func (l *lockBase) HoldCount(ctx context.Context, tid int64) (int, error) {
	n, err := l.c.rdb.Do(ctx, l.c.rdb.B().Hget().Key(l.name).Field(l.Field(tid)).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return int(n), err
}

// IsLocked is isLocked() of RedissonLock: the hash exists.
func (l *lockBase) IsLocked(ctx context.Context) (bool, error) {
	n, err := l.c.rdb.Do(ctx, l.c.rdb.B().Exists().Key(l.name).Build()).AsInt64()
	return n == 1, err
}

// RLock stands for Redisson's RLock (RedissonLock).
type RLock struct{ *lockBase }

// Lock returns the RLock of name (getLock).
func (c *Client) Lock(name string) *RLock { return &RLock{newLockBase(c, name, plainLock{})} }

// plainLock is RedissonLock's scripts.
type plainLock struct{}

// lockAcquire stands for RedissonLock.tryLockInnerAsync. KEYS[1] the lock
// hash; ARGV[1] lease ms, ARGV[2] the thread's field. A free lock, or one
// the field already holds, gets one more level and the lease: nil. Else
// the hash's PTTL.
var lockAcquire = rueidis.NewLuaScript(`
if redis.call('exists', KEYS[1]) == 1 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return redis.call('pttl', KEYS[1])
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return nil`)

// lockRelease stands for RedissonLock.unlockInnerAsync. KEYS[1] the lock
// hash, KEYS[2] its channel, KEYS[3] the request's unlock latch; ARGV[1]
// the message (0), ARGV[2] lease ms, ARGV[3] the field, ARGV[4] the
// publish command, ARGV[5] the latch's life in ms. A request already
// answered answers the same again. Not held: nil. A level left: the lease
// is reset, 0. The last level: the hash goes, the message is published, 1.
var lockRelease = rueidis.NewLuaScript(`
local before = redis.call('get', KEYS[3])
if before ~= false then
  return tonumber(before)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local result = 0
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
else
  redis.call('del', KEYS[1])
  redis.call(ARGV[4], KEYS[2], ARGV[1])
  result = 1
end
redis.call('set', KEYS[3], result, 'px', ARGV[5])
return result`)

// lockForceRelease stands for RedissonLock.forceUnlockAsync. KEYS[1] the
// hash, KEYS[2] its channel; ARGV[1] the message (0), ARGV[2] the publish
// command. 1 and the message when there was a hash, else 0.
var lockForceRelease = rueidis.NewLuaScript(`
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1`)

func (plainLock) field(l *lockBase, tid int64) string { return l.c.Field(tid) }

func (plainLock) channel(l *lockBase, _ int64) string {
	return prefixName("redisson_lock__channel", l.name)
}

func (plainLock) tryLockInner(ctx context.Context, l *lockBase, tid, _, leaseMs int64, _ bool) (attempt, error) {
	return ttlReply(l.c.eval(ctx, lockAcquire, []string{l.name}, itoa(leaseMs), l.Field(tid)))
}

// ttlReply reads an acquire script's reply: nil taken, else a TTL.
func ttlReply(res rueidis.RedisResult) (attempt, error) {
	ttl, isNil, err := optInt64(res)
	if err != nil {
		return attempt{}, err
	}
	return attempt{acquired: isNil, ttl: ttl}, nil
}

func (p plainLock) unlockInner(ctx context.Context, l *lockBase, tid int64, latch string, leaseMs int64) (int64, bool, error) {
	return optInt64(l.c.eval(ctx, lockRelease, []string{l.name, p.channel(l, tid), latch},
		"0", itoa(leaseMs), l.Field(tid), l.c.publish, ms(UnlockLatchTimeout)))
}

func (plainLock) acquireFailed(context.Context, *lockBase, int64, int64) error { return nil }

func (p plainLock) forceUnlock(ctx context.Context, l *lockBase) (bool, error) {
	n, err := l.c.eval(ctx, lockForceRelease, []string{l.name, p.channel(l, 0)}, "0", l.c.publish).AsInt64()
	return n == 1, err
}

func (plainLock) readRenewal() bool { return false }

// FencedLock stands for Redisson's RFencedLock (RedissonFencedLock): an
// RLock whose every acquisition, a re-entry too, increments the counter
// redisson_lock_token:{name}.
type FencedLock struct{ *lockBase }

// FencedLock returns the RFencedLock of name (getFencedLock).
func (c *Client) FencedLock(name string) *FencedLock {
	return &FencedLock{newLockBase(c, name, fencedLock{})}
}

// fencedLock is RedissonFencedLock's scripts.
type fencedLock struct{ plainLock }

// fencedAcquire stands for RedissonFencedLock.tryLockInnerAsync(waitTime,
// leaseTime, unit, threadId, command), what lock() runs: lockAcquire that
// also increments the counter KEYS[2] when it takes the lock (its token is
// not returned).
var fencedAcquire = rueidis.NewLuaScript(`
if redis.call('exists', KEYS[1]) == 1 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return redis.call('pttl', KEYS[1])
end
redis.call('incr', KEYS[2])
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return nil`)

// fencedAcquireToken stands for RedissonFencedLock.tryLockInnerAsync(
// leaseTime, unit, threadId), what lockAndGetToken and
// tryLockAndGetToken run: as fencedAcquire, answering {-1, token} when
// taken and {PTTL, -1} when not.
var fencedAcquireToken = rueidis.NewLuaScript(`
if redis.call('exists', KEYS[1]) == 1 and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return {redis.call('pttl', KEYS[1]), -1}
end
local token = redis.call('incr', KEYS[2])
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return {-1, token}`)

func (f fencedLock) tokenKey(l *lockBase) string { return prefixName("redisson_lock_token", l.name) }

func (f fencedLock) tryLockInner(ctx context.Context, l *lockBase, tid, _, leaseMs int64, _ bool) (attempt, error) {
	return ttlReply(l.c.eval(ctx, fencedAcquire, []string{l.name, f.tokenKey(l)}, itoa(leaseMs), l.Field(tid)))
}

// tryToken is RedissonFencedLock.tryAcquireAsync: the token script and
// the lease bookkeeping.
func (l *FencedLock) tryToken(ctx context.Context, tid, _ int64, lease time.Duration, _ bool) (attempt, error) {
	leaseMs := l.leaseMs.Load()
	if lease > 0 {
		leaseMs = lease.Milliseconds()
	}
	vals, err := l.c.eval(ctx, fencedAcquireToken, []string{l.name, fencedLock{}.tokenKey(l.lockBase)},
		itoa(leaseMs), l.Field(tid)).AsIntSlice()
	if err != nil {
		return attempt{}, err
	}
	if len(vals) != 2 {
		return attempt{}, errors.New("redissontest: fenced acquire: unexpected reply")
	}
	if vals[0] != -1 {
		return attempt{ttl: vals[0]}, nil
	}
	if lease > 0 {
		l.leaseMs.Store(lease.Milliseconds())
	} else {
		l.c.schedule(l.name, false, "", tid, l.Field(tid))
	}
	return attempt{acquired: true, token: vals[1]}, nil
}

// LockAndGetToken is lockAndGetToken() for thread tid: it waits until it
// holds the lock (or ctx ends) and returns the token of the acquisition.
// (Redisson runs it as tryLockAndGetToken with no wait limit, which sleeps
// as RedissonLock.lock does.)
func (l *FencedLock) LockAndGetToken(ctx context.Context, tid int64) (int64, error) {
	at, err := l.lockWait(ctx, tid, 0, l.tryToken)
	return at.token, err
}

// TryLockAndGetToken is tryLockAndGetToken(waitTime, leaseTime) for
// thread tid: ok false when the wait ran out.
func (l *FencedLock) TryLockAndGetToken(ctx context.Context, tid int64, wait, lease time.Duration) (token int64, ok bool, err error) {
	at, err := l.tryWait(ctx, tid, wait, lease, l.tryToken)
	return at.token, at.acquired, err
}

// Token is getToken(): the counter's value (0 when there is none).
func (l *FencedLock) Token(ctx context.Context) (int64, error) {
	key := fencedLock{}.tokenKey(l.lockBase)
	n, err := l.c.rdb.Do(ctx, l.c.rdb.B().Get().Key(key).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return n, err
}
