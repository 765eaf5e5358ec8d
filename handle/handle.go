// Package handle holds the methods that every lock of relock shares.
//
// rlock.Lock, rlock.FencedLock, fairlock.Lock and both sides of an
// rwlock.ReadWriteLock embed a *Mutex: what differs between them is what
// their scripts do in Redis, not how they are called. The package rlock
// explains owners, leases and the watchdog, waiting, and the promise
// every hold keeps; the package of each kind explains its layout and its
// rules. Handles are made by a Client (rlock.Client.GetLock and the other
// getters), never directly.
package handle

// The kinds' types (rlock.Lock, rlock.FencedLock, rlock.SpinLock,
// fairlock.Lock, rwlock.Lock) declare forwarders of Mutex's methods, with
// their docs, so that go doc shows them; they are generated from this
// package:
//go:generate go run ../internal/forward ..

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/observe"
)

// Mutex is a handle on one lock: cheap, safe for concurrent use, doing no
// I/O until a method is called. Any number of handles may name the same
// lock: a hold belongs to its owner and its Client, not to a handle.
//
// The owner a call acts for is the one in its context (rlock.WithOwner);
// without one, an acquisition takes the lock for a fresh owner of its own
// (so a goroutine that locks twice waits for itself), and Unlock and the
// questions about a hold act on the Client's latest such anonymous hold
// of the lock.
type Mutex struct {
	m *lockcore.Mutex
	site
}

// site marks the handle with its Client, for multilock.NewRedLock's check
// that its locks live on independent servers.
type site = lockcore.Site

func init() {
	lockcore.Provide(func(m *lockcore.Mutex) *Mutex { return &Mutex{m: m, site: lockcore.SiteOf(m.Core())} })
}

// Name is the lock's name as it was given to the Client. Its Redis hash
// is that name after the Client's key prefix (rlock.WithKeyPrefix; none
// by default), as are its other keys and channels.
func (h *Mutex) Name() string { return h.m.GivenName() }

// Lock acquires the lock for the owner in ctx, waiting until it is free or
// ctx ends, and holds it on the watchdog lease. If the owner already holds
// it, Lock re-enters it: the hold count goes up by one and the lease is
// reset. A waiting Lock rides out a Redis outage (it retries every 100ms),
// so give ctx a deadline to bound it. If Lock returns an error, the owner
// holds no more than before and nothing of the call is left in Redis; when
// ctx ended the wait, the error matches ErrNotAcquired and ctx.Err(); when
// Close did, ErrNotAcquired and ErrClosed.
func (h *Mutex) Lock(ctx context.Context) error { return h.m.Lock(ctx) }

// LockLease is Lock with a fixed lease: the hold ends lease after it was
// taken (or re-entered, or partly released: both reset the lease) unless
// released first, and is never renewed. lease must be at least 1ms. A hold
// that someone watches (Done, HoldContext, a Hold's Context) ends on this
// Client at that moment too, counted from when the acquisition was sent,
// as lost (a cause matching ErrLockLost that says the lease ran out; the
// lost handler is told); one nobody watches is found ended at its owner's
// next call.
func (h *Mutex) LockLease(ctx context.Context, lease time.Duration) error {
	return h.m.LockLease(ctx, lease)
}

// TryLock acquires the lock like Lock but gives up after wait (wait 0
// makes one attempt). lease 0 holds on the watchdog lease, lease > 0 is a
// fixed lease. It returns (true, nil) when the owner holds the lock,
// (false, nil) when the wait ended while ctx is live, and (false, err)
// for errors, a context that ended among them.
//
// An attempt that was sent counts. The wait ends only the sleeping
// between attempts: however short it is, TryLock makes the attempt wait 0
// makes, and an attempt sent before the wait ended is not abandoned when
// it ends: its reply decides, and a grant that comes back after the wait
// ended is a success (the caller asked for the lock). So TryLock may
// return up to a round trip after wait, and, when Redis does not answer,
// only when the connection gives up or ctx ends: give ctx a deadline to
// bound it. ctx still ends an attempt: a level won by a reply that comes
// after ctx ended is given back, and the error matches ErrNotAcquired and
// ctx.Err().
func (h *Mutex) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	return h.m.TryLock(ctx, wait, lease)
}

// Unlock releases one hold level of the owner in ctx; the last level frees
// the lock and wakes a waiter. Release with the context that carries the
// owner that acquired: an Unlock whose owner holds nothing returns an
// error matching ErrNotHeld and sends nothing to Redis; when the hold was
// lost, the error also matches ErrLockLost and says why. Unlock works when
// ctx has already ended (it runs on a detached context, for up to 5s). If
// it returns another error (Redis did not answer), the level counts as
// released all the same: do not call Unlock again for it; at the last
// level the Client goes on releasing it in the background until Redis
// answers, for as long as the hold could last in Redis (its lease as the
// Client last set it, counted from then: a fixed lease, or the watchdog
// lease from the last renewal), or until Close, whichever comes first; it
// gives up at once on an error reply that sending again cannot cure.
func (h *Mutex) Unlock(ctx context.Context) error { return h.m.Unlock(ctx) }

// ForceUnlock deletes the lock whoever holds it and wakes a waiter; it
// reports whether there was a hold. Holds of this Client on the lock are
// reported lost. It works when ctx has already ended.
func (h *Mutex) ForceUnlock(ctx context.Context) (bool, error) { return h.m.ForceUnlock(ctx) }

// IsLocked reports whether any owner holds the lock.
func (h *Mutex) IsLocked(ctx context.Context) (bool, error) { return h.m.IsLocked(ctx) }

// IsHeldByOwner reports whether the owner in ctx holds the lock.
func (h *Mutex) IsHeldByOwner(ctx context.Context) (bool, error) { return h.m.IsHeldByOwner(ctx) }

// HoldCount is the hold count of the owner in ctx, as Redis has it; 0 when
// it holds nothing.
func (h *Mutex) HoldCount(ctx context.Context) (int, error) { return h.m.HoldCount(ctx) }

// RemainingLease is the time left on the lock's lease, whoever holds it: 0
// when it is not locked, negative when its key has no expiry.
func (h *Mutex) RemainingLease(ctx context.Context) (time.Duration, error) {
	return h.m.RemainingLease(ctx)
}

// Do acquires the lock like Lock, runs fn, and releases it. fn's context
// carries the owner (a fresh one when ctx has none, so that calls made
// with it re-enter) and is cancelled as soon as the hold is known to be
// lost (context.Cause matches ErrLockLost) or the Client closes
// (ErrClosed). Do returns fn's error, joined with the loss if there was
// one. If acquiring fails, fn does not run and Do returns that error. The
// release runs in a deferred call: if fn panics, the lock is released and
// the panic goes on. A nil fn is ErrInvalidArgument.
func (h *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return h.m.Do(ctx, fn)
}

// TryDo is Do that runs fn only if the lock can be taken within wait (0:
// at once, one attempt), counted as TryLock counts it (an attempt sent
// within the wait counts): it reports whether fn ran. When the wait ends
// without the lock while ctx is live, it returns (false, nil); fn's
// context, the release and the errors are Do's.
func (h *Mutex) TryDo(ctx context.Context, wait time.Duration, fn func(ctx context.Context) error) (ran bool, err error) {
	return h.m.TryDo(ctx, wait, fn)
}

// Done returns a channel that is closed when the current hold of the owner
// in ctx ends: by its final Unlock, by loss (a hold on a fixed lease is
// lost when its lease ends), or by Close. It is how a user of Lock and
// Unlock learns that a hold was lost. If the owner holds nothing this
// Client knows of, it is closed already.
func (h *Mutex) Done(ctx context.Context) <-chan struct{} { return h.m.Done(ctx) }

// HoldContext returns a context that ends when the current hold of the
// owner in ctx ends, like Done, and says why: context.Cause is
// context.Canceled after the final Unlock, an error matching ErrLockLost
// after a loss (the end of a fixed lease among them: see LockLease),
// ErrClosed after Close, and an error matching ErrNotHeld when the owner
// held nothing. It carries no values and no deadline.
func (h *Mutex) HoldContext(ctx context.Context) context.Context { return h.m.HoldContext(ctx) }

// Observer returns the observer of the lock's Client (nil if it has none):
// MultiLock and RedLock report to it.
func (h *Mutex) Observer() observe.Observer { return h.m.Core().Observer() }

// Hold is one acquisition of a lock: the level it took, bound to the owner
// that took it, so that it cannot be released with the wrong context. Get
// one with Mutex.Acquire or Mutex.TryAcquire. A Hold is safe for
// concurrent use.
type Hold struct {
	m     *lockcore.Mutex
	ctx   context.Context // carries the owner
	owner string
	token int64
	life  context.Context
	done  atomic.Bool
}

// Acquire is Lock that returns the hold it took. Without an owner in ctx,
// the hold gets a fresh owner of its own, so that it is released by its
// Release and by nothing else. The errors are Lock's.
func (h *Mutex) Acquire(ctx context.Context) (*Hold, error) {
	return h.acquire(ctx, func(ctx context.Context) (int64, bool, error) {
		return h.m.Acquire(ctx, lockcore.NoLimit, 0)
	})
}

// TryAcquire is TryLock that returns the hold it took: nil, and no error,
// when the wait ended without the lock while ctx is live. The wait is
// TryLock's: an attempt sent within it counts.
func (h *Mutex) TryAcquire(ctx context.Context, wait, lease time.Duration) (*Hold, error) {
	return h.acquire(ctx, func(ctx context.Context) (int64, bool, error) {
		return h.m.TryAcquire(ctx, wait, lease)
	})
}

// acquire takes the lock with take, for the owner in ctx or a fresh one,
// and returns its Hold (nil when take did not get it).
func (h *Mutex) acquire(ctx context.Context, take func(context.Context) (int64, bool, error)) (*Hold, error) {
	ctx, owner := h.m.BindOwner(ctx)
	token, ok, err := take(ctx)
	if !ok {
		return nil, err
	}
	return &Hold{m: h.m, ctx: lockcore.WithOwnerOf(context.Background(), ctx), owner: owner, token: token,
		life: h.m.HoldContext(ctx)}, nil
}

// Release releases the level the hold took, as Unlock does for its owner;
// it works when ctx has ended. A second Release returns an error matching
// ErrNotHeld and sends nothing to Redis. When the hold was lost, the error
// matches ErrLockLost too and says why, whether the Hold's context
// carried an owner or not.
func (h *Hold) Release(ctx context.Context) error {
	if h.done.Swap(true) {
		return h.m.ReleasedTwice(h.owner)
	}
	return h.m.Unlock(lockcore.WithOwnerOf(ctx, h.ctx))
}

// Context returns a context that ends when the owner's hold of the lock
// ends: after its final release (context.Cause is context.Canceled), at
// its loss (a cause matching ErrLockLost; a hold on a fixed lease is lost
// when its lease ends) or at Close (ErrClosed). It carries no values; work
// that needs the lock should run under it.
func (h *Hold) Context() context.Context { return h.life }

// Done is Context().Done().
func (h *Hold) Done() <-chan struct{} { return h.life.Done() }

// Owner is the owner the hold belongs to: the one in the context it was
// taken with, or the fresh one it was given.
func (h *Hold) Owner() string { return h.owner }

// Token is the hold's fencing token, for a rlock.FencedLock (strictly
// greater than every token of an earlier hold of the lock); 0 for the
// other kinds.
func (h *Hold) Token() int64 { return h.token }
