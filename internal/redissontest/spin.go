package redissontest

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/redis/rueidis"
)

// SpinLock stands for Redisson's RSpinLock (RedissonSpinLock): the
// RLock's hash and acquire script, the watchdog, and no pub/sub at all:
// a waiter sleeps Redisson's default back-off between attempts
// (LockOptions.ExponentialBackOff: SpinBackoff), and neither unlock nor
// forceUnlock publishes.
type SpinLock struct{ *lockBase }

// SpinLock returns the RSpinLock of name (getSpinLock, default back-off).
func (c *Client) SpinLock(name string) *SpinLock { return &SpinLock{newLockBase(c, name, spinLock{})} }

// spinLock is RedissonSpinLock's scripts.
type spinLock struct{ plainLock }

// spinRelease stands for RedissonSpinLock.unlockInnerAsync: lockRelease
// without the message. KEYS[1] the lock hash, KEYS[2] the request's
// unlock latch; ARGV[1] lease ms, ARGV[2] the field, ARGV[3] the latch's
// life in ms.
var spinRelease = rueidis.NewLuaScript(`
local before = redis.call('get', KEYS[2])
if before ~= false then
  return tonumber(before)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local result = 0
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
else
  redis.call('del', KEYS[1])
  result = 1
end
redis.call('set', KEYS[2], result, 'px', ARGV[3])
return result`)

// spinForceRelease stands for RedissonSpinLock.forceUnlockAsync: DEL, 1
// when there was a hash, no message.
var spinForceRelease = rueidis.NewLuaScript(`
return redis.call('del', KEYS[1])`)

func (spinLock) unlockInner(ctx context.Context, l *lockBase, tid int64, latch string, leaseMs int64) (int64, bool, error) {
	return optInt64(l.c.eval(ctx, spinRelease, []string{l.name, latch},
		itoa(leaseMs), l.Field(tid), ms(UnlockLatchTimeout)))
}

func (spinLock) forceUnlock(ctx context.Context, l *lockBase) (bool, error) {
	n, err := l.c.eval(ctx, spinForceRelease, []string{l.name}).AsInt64()
	return n == 1, err
}

// SpinBackoff is Redisson's default spin back-off
// (LockOptions.ExponentialBackOff: initial delay 1ms, multiplier 2, max
// delay 128ms): the sleeps of one wait, in order.
type SpinBackoff struct {
	next  time.Duration
	fails int
}

// Next is getNextSleepPeriod: the current sleep; the next one is twice it
// plus a random 0 to fails-1 ms, capped at 128ms.
func (b *SpinBackoff) Next() time.Duration {
	const maxDelay = 128 * time.Millisecond
	if b.next == 0 {
		b.next = time.Millisecond
	}
	if b.next == maxDelay {
		return maxDelay
	}
	d := b.next
	b.fails++
	b.next = min(maxDelay, 2*b.next+time.Duration(rand.N(b.fails))*time.Millisecond)
	return d
}

// sleep sleeps d or until ctx ends; it reports whether ctx is live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Lock is lock() (lease 0) or lock(leaseTime) for thread tid:
// RedissonSpinLock.lockInterruptibly, try and sleep the back-off until
// taken, or until ctx ends.
func (l *SpinLock) Lock(ctx context.Context, tid int64, lease time.Duration) error {
	ctx, cancel := l.c.bind(ctx)
	defer cancel()
	var b SpinBackoff
	for {
		at, err := l.tryAcquire(ctx, tid, -1, lease, false)
		if err != nil || at.acquired {
			return err
		}
		if !sleep(ctx, b.Next()) {
			return ctx.Err()
		}
	}
}

// TryLock is tryLock(waitTime, leaseTime) for thread tid (lease 0: the
// watchdog's): RedissonSpinLock.tryLock, try, then sleep the back-off
// and try until taken or the wait has passed (checked after each
// attempt). When ctx ends first it returns ctx's error.
func (l *SpinLock) TryLock(ctx context.Context, tid int64, wait, lease time.Duration) (bool, error) {
	ctx, cancel := l.c.bind(ctx)
	defer cancel()
	start := time.Now()
	var b SpinBackoff
	for {
		at, err := l.tryAcquire(ctx, tid, -1, lease, false)
		if err != nil || at.acquired {
			return at.acquired, err
		}
		if time.Since(start) >= wait {
			return false, nil
		}
		if !sleep(ctx, b.Next()) {
			return false, ctx.Err()
		}
	}
}
