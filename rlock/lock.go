package rlock

import (
	"context"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
)

// Lock is a handle on a reentrant lock, held in the Redis hash <name> with
// one field "<clientID>:<owner>" -> hold count. Handles are cheap and safe
// for concurrent use; any number of handles may name the same lock.
type Lock struct {
	m *lockcore.Mutex
	site
}

// site marks the handle with its Client, for multilock.NewRedLock's check.
type site = lockcore.Site

// Name is the lock's name: the key of its Redis hash.
func (l *Lock) Name() string { return l.m.Name() }

// Lock acquires l for the owner in ctx, waiting until it is free or ctx
// ends. It holds the lock on the watchdog lease, renewed while the owner
// holds it. If the owner already holds l, Lock re-enters it: the hold count
// goes up by one and the lease is reset. If Lock returns an error, the
// owner does not hold l (beyond what it held before) and no waiter state is
// left behind; when ctx ended the wait, the error matches both
// ErrNotAcquired and ctx.Err(); when Close did, ErrNotAcquired and
// ErrClosed.
//
// A waiting Lock rides out a Redis outage (a dropped connection, a
// failover, LOADING, READONLY, OOM...): it retries every 100ms until Redis
// answers or ctx ends, so Lock(context.Background()) may wait through an
// outage for as long as it lasts. When ctx ends first, the error also
// carries the last failure. Give ctx a deadline to bound the wait, or use
// TryLock; WithLogger reports an outage a wait rides out.
func (l *Lock) Lock(ctx context.Context) error { return l.m.Lock(ctx) }

// LockLease is Lock with a fixed lease: the lock expires lease after it was
// taken (or re-entered) unless unlocked first, and is never renewed. lease
// must be at least 1ms; it is rounded up to whole milliseconds.
func (l *Lock) LockLease(ctx context.Context, lease time.Duration) error {
	return l.m.LockLease(ctx, lease)
}

// TryLock acquires l like Lock but gives up after wait: wait 0 makes one
// attempt. lease 0 holds on the watchdog lease; lease > 0 is a fixed lease
// (at least 1ms). It returns (true, nil) when the owner holds l, (false,
// nil) when the wait ended without it while ctx is still live, and (false,
// err) otherwise: a context that ended, a closed Client, a Redis error,
// ErrInvalidArgument.
func (l *Lock) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	return l.m.TryLock(ctx, wait, lease)
}

// Unlock releases one hold level of the owner in ctx; the last level
// deletes the owner's field (and the lock, when no other field is left)
// and wakes a waiter. Without an owner in ctx it releases the Client's
// current anonymous hold of the lock, taken through any handle of this
// name (as sync.Mutex.Unlock releases whatever Lock took). It returns an
// error matching ErrNotHeld, and sends nothing to Redis, when the owner
// holds nothing this Client knows of; when Redis says the hold was gone
// (it expired or was deleted), the error also matches ErrLockLost.
//
// Unlock runs on a context detached from ctx, so it works when ctx has
// already ended: it is bounded by 5s, or by ctx's deadline (at least 250ms
// from now) while ctx is still live. Its script sets the owner's count to
// one less than this Client granted rather than decrementing it, so a
// request resent after a dropped connection never releases twice, and
// nothing but the hold is written. If Unlock returns another error (Redis
// did not answer, or refused), the level counts as released all the same:
// do not call Unlock again for it. Redis' count may stay one higher until
// the owner's next call on the lock, which sets it from the Client's; at
// the last level the hold is no longer renewed and ends in Redis at the
// latest when its lease runs out.
func (l *Lock) Unlock(ctx context.Context) error { return l.m.Unlock(ctx) }

// ForceUnlock deletes the lock whoever holds it and wakes a waiter. It
// reports whether there was a hold. It works when ctx has already ended.
// Holds of this Client on the lock are reported lost.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) { return l.m.ForceUnlock(ctx) }

// IsLocked reports whether any owner holds the lock.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) { return l.m.IsLocked(ctx) }

// IsHeldByOwner reports whether the owner in ctx (without one: the
// Client's anonymous hold of the lock) holds the lock.
func (l *Lock) IsHeldByOwner(ctx context.Context) (bool, error) { return l.m.IsHeldByOwner(ctx) }

// HoldCount is the hold count of the owner in ctx (without one: of the
// Client's anonymous hold of the lock), as Redis has it; 0 when it holds
// nothing.
func (l *Lock) HoldCount(ctx context.Context) (int, error) { return l.m.HoldCount(ctx) }

// RemainingLease is the time left on the lock's lease, whoever holds it: 0
// with no error when it is not locked, and a negative duration when its
// key has no expiry (never the case for a lock relock wrote).
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	return l.m.RemainingLease(ctx)
}

// Do acquires l like Lock (watchdog lease), runs fn, then unlocks. fn's
// context is derived from ctx and carries the owner (a fresh one when ctx
// has none, so that calls made with fn's context re-enter); it is cancelled
// with context.Cause ErrLockLost as soon as the hold is known to be lost,
// and with cause ErrClosed when the Client closes. Do returns fn's error;
// if the hold was lost while fn ran, the error also matches ErrLockLost.
// If acquiring fails, fn does not run and Do returns that error. The
// release works even when ctx has ended, and runs in a deferred call: if
// fn panics, the lock is released and the panic goes on with its value. A
// nil fn is ErrInvalidArgument.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return l.m.Do(ctx, fn)
}

// Done returns a channel that is closed when the current hold of the owner
// in ctx (without one: the Client's anonymous hold of the lock) ends, by
// its final Unlock, by loss, or by Close. It is how a user of Lock and
// Unlock learns that a hold on the watchdog lease was lost: select on it
// beside the work. If the owner holds nothing this Client knows of, the
// channel is already closed. A hold on a fixed lease is not renewed, so
// its expiry is found only by the next call on it (a re-entry or Unlock).
func (l *Lock) Done(ctx context.Context) <-chan struct{} { return l.m.Done(ctx) }

// HoldContext returns a context that ends when the current hold of the
// owner in ctx (without one: the Client's anonymous hold of the lock) ends,
// like Done, and tells why: context.Cause is context.Canceled after the
// final Unlock, an error matching ErrLockLost after a loss, ErrClosed after
// Close. When the owner holds nothing this Client knows of, it has already
// ended with a cause matching ErrNotHeld. It carries no values and no
// deadline; use it with context.AfterFunc, or to derive the context of
// work that must stop when the hold ends.
func (l *Lock) HoldContext(ctx context.Context) context.Context { return l.m.HoldContext(ctx) }
