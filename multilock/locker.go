package multilock

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/lockcore"
)

// Locker is what a MultiLock or a RedLock is built from. *rlock.Lock,
// *rlock.FencedLock, *fairlock.Lock and *rwlock.Lock satisfy it, and so do *MultiLock and
// *RedLock, so the two compose.
//
// The owner of a hold travels in the context, as in rlock: a MultiLock or
// RedLock always calls its locks with a context that carries an owner (the
// caller's, or one it makes up for an anonymous acquisition), so an Unlock
// with that context releases what the TryLock with it took, on any Locker
// that keys holds by that owner.
type Locker interface {
	// Name is the lock's name. It must not do I/O.
	Name() string
	// TryLock acquires the lock for the owner in ctx, waiting up to wait
	// (0: one attempt); lease 0 means a lease kept alive by a watchdog,
	// lease > 0 a fixed lease. It returns (false, nil) when the wait ended
	// without the lock while ctx is live.
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	// Unlock releases one hold level of the owner in ctx. It must work when
	// ctx has ended, and return an error matching ErrNotHeld when the owner
	// holds nothing.
	Unlock(ctx context.Context) error
}

// Watchable is the optional interface through which a MultiLock or a
// RedLock learns that the hold of one of its locks has ended. Done returns a
// channel that is closed when the current hold of the owner in ctx ends (by
// its final Unlock, by loss, or because its client closed), and that is
// already closed when the owner holds nothing.
//
// *rlock.Lock, *rlock.FencedLock, *fairlock.Lock, *rwlock.Lock, *MultiLock and *RedLock
// implement it. A hold taken on the watchdog lease (lease 0) watches every
// lock that implements it; the loss of a lock that does not is never
// noticed.
type Watchable interface {
	Done(ctx context.Context) <-chan struct{}
}

// The errors of this package are those of package relock, which every
// kind returns, so errors.Is works with rlock.ErrNotHeld and the others.
var (
	// ErrNotAcquired: a wait ended without the lock. When the context
	// ended the wait, the error also matches the context's error.
	ErrNotAcquired = relock.ErrNotAcquired
	// ErrNotHeld: Unlock by an owner that holds none of the locks.
	ErrNotHeld = relock.ErrNotHeld
	// ErrLockLost: too many of the locks of a held MultiLock (any) or
	// RedLock (more than a minority) were lost while held.
	ErrLockLost = relock.ErrLockLost
	// ErrInvalidArgument: no locks, a nil lock, a negative wait, a lease
	// under 1ms, an invalid owner or option, a nil function. A call that
	// returns it has sent nothing to Redis.
	ErrInvalidArgument = relock.ErrInvalidArgument
)

// NodeError is the failure of one of the locks of a MultiLock or a RedLock.
// Failures of several locks are joined into one error that reads on one
// line ("; " between them) and unwraps to each of them: find them with
// errors.As.
type NodeError struct {
	// Index is the lock's position among the locks given to New or
	// NewRedLock (for New, with nested MultiLocks expanded in place).
	Index int
	// Name is the lock's name.
	Name string
	// Err is what the lock returned.
	Err error
}

// Error describes the failure with the lock's position and name.
func (e *NodeError) Error() string {
	return fmt.Sprintf("multilock: lock %d (%q): %v", e.Index, e.Name, e.Err)
}

// Unwrap returns the lock's error.
func (e *NodeError) Unwrap() error { return e.Err }

// noLimit is the wait of Lock and LockLease: until the context ends.
const noLimit time.Duration = -1

// maxWait stands for "no limit" when a Locker is asked to wait: the longest
// wait relock's locks accept.
const maxWait = lockcore.MaxLease

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: multilock: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// checkLocks rejects an empty list and nil locks (a nil interface or a nil
// pointer in one), so that no method of a nil lock is ever called.
func checkLocks(kind string, locks []Locker) error {
	if len(locks) == 0 {
		return invalid("%s of no locks", kind)
	}
	for i, l := range locks {
		if isNil(l) {
			return invalid("%s: lock %d is nil", kind, i)
		}
	}
	return nil
}

func isNil(l Locker) bool {
	if l == nil {
		return true
	}
	v := reflect.ValueOf(l)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// MinLease is the shortest fixed lease a MultiLock or a RedLock takes. A
// set held on a fixed lease counts as held for the lease less the time
// acquiring took less a drift of 1% of the lease plus 2ms; a lease that
// short could never be valid, and one only a little longer would need an
// acquisition faster than any round trip.
const MinLease = 3 * time.Millisecond

// checkAcquire checks the wait and lease of TryLock (lease 0: watchdog).
// Lock and LockLease check a wait of 0.
func checkAcquire(wait, lease time.Duration) error {
	if err := lockcore.CheckWait(wait); err != nil {
		return err
	}
	if lease != 0 {
		if err := lockcore.CheckLease(lease); err != nil {
			return err
		}
		if lease < MinLease {
			return invalid("lease %v is under %v: it leaves no time once the drift (1%% of the lease plus 2ms) is taken off", lease, MinLease)
		}
	}
	return nil
}

// notAcquired is the error of a wait that ended with cause.
func notAcquired(cause error) error {
	return lockcore.Join(ErrNotAcquired, cause)
}

// drift is the clock drift allowed for over a lease: 1% of it plus 2ms, for
// the rate difference between this process's clock and the servers' and for
// PEXPIRE's millisecond rounding.
func drift(lease time.Duration) time.Duration {
	return lease/100 + 2*time.Millisecond
}

// validity is how long a set of holds taken with lease since start can
// still be counted on: lease minus the time acquiring took minus drift.
// The elapsed time is measured from before the first request, so it is an
// upper bound on the time since any lease was set on a server.
func validity(lease time.Duration, start time.Time) time.Duration {
	return lease - time.Since(start) - drift(lease)
}
