package fairlock

import (
	"context"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/observe"
)

// The errors of every lock kind (the same values as rlock's).
var (
	ErrNotAcquired     = lockcore.ErrNotAcquired
	ErrNotHeld         = lockcore.ErrNotHeld
	ErrLockLost        = lockcore.ErrLockLost
	ErrClosed          = lockcore.ErrClosed
	ErrInvalidArgument = lockcore.ErrInvalidArgument
)

// Lock is a handle on a fair lock: waiters acquire it in the order they
// first asked. Get one with rlock.Client.GetFairLock. Handles are cheap and
// safe for concurrent use.
type Lock struct {
	m *lockcore.Mutex
	site
}

// site marks the handle with its Client, for multilock.NewRedLock's check.
type site = lockcore.Site

func init() {
	lockcore.NewFairLock = func(c *lockcore.Core, name string) any {
		return &Lock{m: lockcore.NewMutex(c, name, kind{}), site: lockcore.SiteOf(c)}
	}
}

// Name is the lock's name: the key of its Redis hash.
func (l *Lock) Name() string { return l.m.Name() }

// Lock acquires l for the owner in ctx, waiting in the queue until its turn
// or until ctx ends. It holds the lock on the watchdog lease. If Lock
// returns an error, the owner does not hold l (beyond what it held before)
// and has left the queue; when ctx ended the wait, the error matches both
// ErrNotAcquired and ctx.Err(). Like rlock's Lock, a waiting Lock retries
// through a Redis outage every 100ms until Redis answers or ctx ends.
func (l *Lock) Lock(ctx context.Context) error { return l.m.Lock(ctx) }

// LockLease is Lock with a fixed lease (at least 1ms), never renewed.
func (l *Lock) LockLease(ctx context.Context, lease time.Duration) error {
	return l.m.LockLease(ctx, lease)
}

// TryLock acquires l like Lock but gives up after wait: wait 0 makes one
// attempt, which fails while others are queued even if the lock is free.
// lease 0 holds on the watchdog lease; lease > 0 is a fixed lease. It
// returns (false, nil) when the wait ended while ctx is live, and (false,
// err) for errors, a context that ended among them.
func (l *Lock) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	return l.m.TryLock(ctx, wait, lease)
}

// Unlock releases one hold level of the owner in ctx (without one: the
// Client's anonymous hold of the lock); the last level deletes the lock and
// wakes the head of the queue. It returns an error matching ErrNotHeld, and
// sends nothing to Redis, when the owner holds nothing this Client knows
// of. It works when ctx has ended, and a resent request never releases
// twice (see rlock.Lock.Unlock).
func (l *Lock) Unlock(ctx context.Context) error { return l.m.Unlock(ctx) }

// ForceUnlock deletes the lock whoever holds it and wakes the head of the
// queue; it reports whether there was a hold. It works when ctx has ended.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) { return l.m.ForceUnlock(ctx) }

// IsLocked reports whether any owner holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) { return l.m.IsLocked(ctx) }

// IsHeldByOwner reports whether the owner in ctx (without one: the
// Client's anonymous hold of the lock) holds the lock.
func (l *Lock) IsHeldByOwner(ctx context.Context) (bool, error) { return l.m.IsHeldByOwner(ctx) }

// HoldCount is the hold count of the owner in ctx; 0 when it holds nothing.
func (l *Lock) HoldCount(ctx context.Context) (int, error) { return l.m.HoldCount(ctx) }

// RemainingLease is the time left on the lock's lease: 0 when it is not
// locked.
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	return l.m.RemainingLease(ctx)
}

// Do acquires l like Lock, runs fn, then unlocks (in a deferred call, so a
// panic in fn releases the lock and goes on). fn's context is cancelled
// with cause ErrLockLost as soon as the hold is known to be lost (ErrClosed
// at Close), and Do's error then matches it too. If acquiring fails, fn
// does not run.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return l.m.Do(ctx, fn)
}

// Done returns a channel closed when the current hold of the owner in ctx
// ends (final Unlock, loss, or Close); already closed when it holds nothing.
func (l *Lock) Done(ctx context.Context) <-chan struct{} { return l.m.Done(ctx) }

// HoldContext returns a context that ends when the current hold of the
// owner in ctx ends, with the reason as its cause (see
// rlock.Lock.HoldContext).
func (l *Lock) HoldContext(ctx context.Context) context.Context { return l.m.HoldContext(ctx) }

// Observer returns the observer of the lock's Client (nil if it has
// none). MultiLock and RedLock report to it.
func (l *Lock) Observer() observe.Observer { return l.m.Core().Observer() }
