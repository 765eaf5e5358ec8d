package lockcore

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/relock-go/relock/observe"
)

// Spin is the Kind of a spin lock (Redisson's RSpinLock): the reentrant
// lock's hash, scripts and leases, but a waiter never subscribes. Between
// attempts it sleeps the spin backoff (SpinDelay), or until the holder's
// lease ends if that is sooner; the wait loop runs it like every other
// kind, without a channel (see Wait).
//
// Its releases run the reentrant lock's script, which publishes when the
// lock comes free: Redisson's spin lock publishes nothing, but a release
// that wakes the plain lock's waiters on the same name (relock's and
// Redisson's) costs a spinner nothing, and lets those waiters go on at
// once instead of at their next look (see QuietHolderCap).
type Spin struct{}

var _ Kind = Spin{}

// Acquire runs lock_acquire.lua, as Reentrant does (a spin waiter never
// registers for wake-ups: Request.Join stays unset); a refused attempt
// records its Client (see withKnock), waiting or not: a spin waiter
// hears no release.
func (Spin) Acquire(ctx context.Context, r Request) (Attempt, error) {
	return acquireLock(ctx, r, true)
}

// Reenter runs lock_reenter.lua.
func (Spin) Reenter(ctx context.Context, r Request) (Attempt, error) { return r.Core.reenter(ctx, r) }

// Release runs lock_unlock.lua, which publishes the unlock message when
// the lock comes free (for the plain lock's waiters on the name).
func (Spin) Release(ctx context.Context, r Request) (int64, error) {
	return Reentrant{}.Release(ctx, r)
}

// ForceRelease runs lock_force_unlock.lua.
func (Spin) ForceRelease(ctx context.Context, c *Core, name string) (bool, error) {
	return Reentrant{}.ForceRelease(ctx, c, name)
}

// Abandon has nothing to undo for a spin lock.
func (Spin) Abandon(context.Context, Request) error { return nil }

// WaitChannel is "": a spin waiter does not subscribe.
func (Spin) WaitChannel(Request) string { return "" }

// LossChannel is "": a spin lock's hold is not listened for either; a
// force-unlock is found by its next renewal.
func (Spin) LossChannel(string) string { return "" }

// Label names the spin lock to observers.
func (Spin) Label() string { return observe.KindSpin }

// SpinDelay is the spin backoff: the sleep after failed attempt n (n >= 1).
func (Spin) SpinDelay(n int) time.Duration { return SpinDelay(n) }

// Spinner is a Kind whose waiters sleep a backoff between attempts
// instead of subscribing (its WaitChannel is ""): SpinDelay(n) is the
// longest sleep after the call's failed attempt n (n >= 1); the holder's
// lease, when it ends sooner, ends it sooner.
type Spinner interface {
	SpinDelay(n int) time.Duration
}

// The spin backoff, Redisson's default (LockOptions.ExponentialBackOff):
// SpinInitial after the first failed attempt, then each sleep twice the
// one before plus a random 0 to n-1 ms after the n-th, never over
// SpinMax. A waiter makes about 8 attempts in its first quarter second,
// then one every SpinMax.
const (
	SpinInitial = time.Millisecond
	SpinMax     = 128 * time.Millisecond
)

// SpinDelay is the spin backoff's sleep after failed attempt n (n >= 1).
func SpinDelay(n int) time.Duration {
	d := SpinInitial
	for i := 1; i < n && d < SpinMax; i++ {
		d = 2*d + time.Duration(rand.N(i))*time.Millisecond
	}
	return min(d, SpinMax)
}

// QuietHolderCap bounds the sleep of a waiter of the reentrant and the
// fenced lock between attempts when no message comes: it looks again
// within QuietHolderCap plus a random part of it (under 2s), or at the
// holder's lease end if sooner. A release that publishes nothing (that of
// Redisson's spin lock, which shares the lock's hash) would otherwise
// leave it asleep until the lease it last saw ran out (30s on the
// watchdog); a release that publishes wakes it at once.
const QuietHolderCap = time.Second

// quietRetry caps retry, the sleep an attempt asked for, at
// QuietHolderCap plus a random part of it.
func quietRetry(retry time.Duration) time.Duration {
	limit := QuietHolderCap + rand.N(QuietHolderCap)
	if retry <= 0 || retry > limit {
		return limit
	}
	return retry
}
