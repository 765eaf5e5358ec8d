package rwlock

import (
	"github.com/relock-go/relock"
	"github.com/relock-go/relock/handle"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
)

// The errors of every kind of relock (the values of package relock).
var (
	ErrNotAcquired     = relock.ErrNotAcquired
	ErrNotHeld         = relock.ErrNotHeld
	ErrLockLost        = relock.ErrLockLost
	ErrClosed          = relock.ErrClosed
	ErrInvalidArgument = relock.ErrInvalidArgument
	ErrDeadlock        = relock.ErrDeadlock
)

// writeSuffix ends a writer's hash field: "<clientID>:<owner>:write".
const writeSuffix = layout.WriteSuffix

// ReadWriteLock is a handle on a read-write lock: a read side that any
// number of owners hold at once, and a write side that one owner holds
// alone. Get one with rlock.Client.GetReadWriteLock. Handles are cheap and
// safe for concurrent use.
type ReadWriteLock struct {
	read, write *Lock
}

func init() {
	newHandle := lockcore.Use[func(*lockcore.Mutex) *handle.Mutex]()
	lockcore.Provide(func(c *lockcore.Core, name string) *ReadWriteLock {
		return &ReadWriteLock{
			read: &Lock{newHandle(lockcore.NewMutexRole(c, name,
				lockcore.Role{Name: "read", Shared: true}, readKind{}))},
			write: &Lock{newHandle(lockcore.NewMutexRole(c, name,
				lockcore.Role{Name: "write", FieldSuffix: writeSuffix}, writeKind{}))},
		}
	})
}

// Name is the lock's name as it was given to the Client. The key of its
// Redis hash is that name after the Client's key prefix
// (rlock.WithKeyPrefix; none by default).
func (rw *ReadWriteLock) Name() string { return rw.write.Name() }

// ReadLock returns the read side: shared by any number of owners while no
// other owner holds the write side. Its IsLocked reports whether anyone
// holds a read level (in read mode, or a writer that also reads).
func (rw *ReadWriteLock) ReadLock() *Lock { return rw.read }

// WriteLock returns the write side: held by one owner alone, while no
// other owner holds either side. Its owner may also take the read side
// (never the other way round: an owner that holds read and asks for write
// waits for itself, a deadlock that ends the wait with an error matching
// ErrDeadlock after the Client's detection delay, rlock.WithDeadlockDetection;
// with detection off, it waits until its context ends).
func (rw *ReadWriteLock) WriteLock() *Lock { return rw.write }

// Lock is one side of a read-write lock. Its methods are those of the
// handle.Mutex it embeds (declared here too, for go doc), with rlock.Lock's owner rules and errors; what
// differs is who may hold it at once (see the package documentation), and
// that an owner may not end with ":write" (its read field would be the
// write field of another owner): calls with such an owner fail with
// ErrInvalidArgument. ForceUnlock deletes the lock, with every hold in it,
// only when it is in this side's mode. RemainingLease is the hash's lease:
// for the read side, the longest among the readers'.
type Lock struct {
	*handle.Mutex
}
