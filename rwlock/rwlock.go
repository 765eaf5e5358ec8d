package rwlock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
)

// The errors of every lock kind (the same values as rlock's).
var (
	ErrNotAcquired     = lockcore.ErrNotAcquired
	ErrNotHeld         = lockcore.ErrNotHeld
	ErrLockLost        = lockcore.ErrLockLost
	ErrClosed          = lockcore.ErrClosed
	ErrInvalidArgument = lockcore.ErrInvalidArgument
)

// writeSuffix ends a writer's hash field: "<clientID>:<owner>:write".
const writeSuffix = ":write"

// ReadWriteLock is a handle on a read-write lock: a read side that any
// number of owners hold at once, and a write side that one owner holds
// alone. Get one with rlock.Client.GetReadWriteLock. Handles are cheap and
// safe for concurrent use.
type ReadWriteLock struct {
	name        string
	read, write *Lock
}

func init() {
	lockcore.NewReadWriteLock = func(c *lockcore.Core, name string) any {
		site := lockcore.SiteOf(c)
		return &ReadWriteLock{
			name: name,
			read: &Lock{m: lockcore.NewMutexRole(c, name, lockcore.Role{Name: "read", Shared: true}, readKind{}),
				side: "read", site: site},
			write: &Lock{m: lockcore.NewMutexRole(c, name, lockcore.Role{Name: "write", FieldSuffix: writeSuffix}, writeKind{}),
				side: "write", site: site},
		}
	}
}

// Name is the lock's name: the key of its Redis hash.
func (rw *ReadWriteLock) Name() string { return rw.name }

// ReadLock returns the read side: shared by any number of owners while no
// other owner holds the write side.
func (rw *ReadWriteLock) ReadLock() *Lock { return rw.read }

// WriteLock returns the write side: held by one owner alone, while no
// other owner holds either side. Its owner may also take the read side.
func (rw *ReadWriteLock) WriteLock() *Lock { return rw.write }

// Lock is one side of a read-write lock. It has the methods of
// rlock.Lock, with the same owner rules and errors; what differs is who
// may hold it at once (see the package documentation).
type Lock struct {
	m    *lockcore.Mutex
	side string // "read" or "write"
	site
}

// site marks the handle with its Client, for multilock.NewRedLock's check.
type site = lockcore.Site

// checkOwner refuses an owner whose reader field would be another owner's
// writer field ("x:write" reading is "x" writing).
func checkOwner(ctx context.Context) error {
	if owner, ok := lockcore.OwnerFrom(ctx); ok && strings.HasSuffix(owner, writeSuffix) {
		return fmt.Errorf("%w: owner %q: an owner of a read-write lock may not end with %q (its read field would be the write field of %q)",
			ErrInvalidArgument, owner, writeSuffix, strings.TrimSuffix(owner, writeSuffix))
	}
	return nil
}

// Name is the lock's name: the key of its Redis hash.
func (l *Lock) Name() string { return l.m.Name() }

// Lock acquires this side for the owner in ctx, waiting until it may or
// ctx ends, on the watchdog lease. The read side is taken at once unless
// another owner holds the write side; the write side only when nobody
// else holds either side and the owner holds no read level (a read hold
// is never upgraded: an owner that holds read and asks for write waits
// for itself until ctx ends). If the owner already holds this side, Lock
// re-enters it. If Lock returns an error, the owner holds no more than
// before and no waiter state is left behind; when ctx ended the wait, the
// error matches both ErrNotAcquired and ctx.Err(); when Close did,
// ErrNotAcquired and ErrClosed.
func (l *Lock) Lock(ctx context.Context) error {
	if err := checkOwner(ctx); err != nil {
		return err
	}
	return l.m.Lock(ctx)
}

// LockLease is Lock with a fixed lease (at least 1ms), never renewed.
func (l *Lock) LockLease(ctx context.Context, lease time.Duration) error {
	if err := checkOwner(ctx); err != nil {
		return err
	}
	return l.m.LockLease(ctx, lease)
}

// TryLock acquires this side like Lock but gives up after wait: wait 0
// makes one attempt. lease 0 holds on the watchdog lease; lease > 0 is a
// fixed lease (at least 1ms). It returns (false, nil) when the wait ended
// without the lock while ctx is live, and (false, err) for errors, a
// context that ended among them.
func (l *Lock) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if err := checkOwner(ctx); err != nil {
		return false, err
	}
	return l.m.TryLock(ctx, wait, lease)
}

// Unlock releases one level of the owner's hold of this side (without an
// owner in ctx: the Client's latest anonymous hold of it, taken through
// any handle of this name, so that ownerless RLock and RUnlock pairs work
// like sync.RWMutex's). Releasing the last read hold wakes a waiting
// writer; releasing the write side wakes every waiter. It returns an error
// matching ErrNotHeld, and sends nothing to Redis, when the owner holds
// nothing this Client knows of; when Redis says the hold was gone, the
// error also matches ErrLockLost. It works when ctx has ended, and a
// resent request never releases twice (see rlock.Lock.Unlock).
func (l *Lock) Unlock(ctx context.Context) error {
	if err := checkOwner(ctx); err != nil {
		return err
	}
	return l.m.Unlock(ctx)
}

// ForceUnlock deletes the lock, with every hold in it, if it is in this
// side's mode (read or write), and wakes waiters. It reports whether it
// did. It works when ctx has ended. Holds of this Client on the lock are
// reported lost.
func (l *Lock) ForceUnlock(ctx context.Context) (bool, error) { return l.m.ForceUnlock(ctx) }

// IsLocked reports whether anyone holds this side: the write side while
// the lock is in write mode; the read side in read mode, or in write mode
// when the writer also holds read levels.
func (l *Lock) IsLocked(ctx context.Context) (bool, error) {
	if err := lockcore.CheckName(l.m.Name()); err != nil {
		return false, err
	}
	c := l.m.Core()
	if err := c.CheckOpen(); err != nil {
		return false, err
	}
	n, err := lua.RWLocked.Exec(ctx, c.RDB, []string{l.m.Name()}, []string{l.side}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("relock: is locked %q: %w", l.m.Name(), err)
	}
	return n == 1, nil
}

// IsHeldByOwner reports whether the owner in ctx (without one: the
// Client's latest anonymous hold of this side) holds this side.
func (l *Lock) IsHeldByOwner(ctx context.Context) (bool, error) {
	if err := checkOwner(ctx); err != nil {
		return false, err
	}
	return l.m.IsHeldByOwner(ctx)
}

// HoldCount is the owner's hold count of this side, as Redis has it; 0
// when it holds nothing.
func (l *Lock) HoldCount(ctx context.Context) (int, error) {
	if err := checkOwner(ctx); err != nil {
		return 0, err
	}
	return l.m.HoldCount(ctx)
}

// RemainingLease is the time left on the lock hash's lease, whichever side
// holds it (for the read side: the longest lease among the readers): 0
// when it is not locked.
func (l *Lock) RemainingLease(ctx context.Context) (time.Duration, error) {
	return l.m.RemainingLease(ctx)
}

// Do acquires this side like Lock, runs fn, then unlocks (in a deferred
// call, so a panic in fn releases the lock and goes on). fn's context
// carries the owner (a fresh one when ctx has none) and is cancelled with
// cause ErrLockLost as soon as the hold is known to be lost (ErrClosed at
// Close); Do's error then matches it too. If acquiring fails, fn does not
// run.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	if err := checkOwner(ctx); err != nil {
		return err
	}
	return l.m.Do(ctx, fn)
}

// Done returns a channel closed when the owner's current hold of this side
// ends (final Unlock, loss, or Close); already closed when it holds
// nothing.
func (l *Lock) Done(ctx context.Context) <-chan struct{} { return l.m.Done(ctx) }

// HoldContext returns a context that ends when the owner's current hold of
// this side ends, with the reason as its cause (see
// rlock.Lock.HoldContext).
func (l *Lock) HoldContext(ctx context.Context) context.Context { return l.m.HoldContext(ctx) }
