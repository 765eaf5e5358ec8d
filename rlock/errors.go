package rlock

import "github.com/relock-go/relock/internal/lockcore"

// The errors every lock kind returns, compared with errors.Is. They are the
// same values in every package of relock, so errors.Is(err, rlock.ErrNotHeld)
// holds for an error from a fair lock too.
var (
	// ErrNotAcquired: a wait ended without the lock. When the context
	// ended the wait, the error also matches the context's error; when
	// Close did, it also matches ErrClosed.
	ErrNotAcquired = lockcore.ErrNotAcquired
	// ErrNotHeld: Unlock (or Token) by an owner that holds nothing.
	ErrNotHeld = lockcore.ErrNotHeld
	// ErrLockLost: a held lock expired or was removed while held.
	ErrLockLost = lockcore.ErrLockLost
	// ErrClosed: the Client is closed.
	ErrClosed = lockcore.ErrClosed
	// ErrInvalidArgument: an empty or malformed name or owner, a negative
	// wait, a negative lease or one under 1ms, a nil function. A call that
	// returns it has sent nothing to Redis.
	ErrInvalidArgument = lockcore.ErrInvalidArgument
	// ErrReplicaSync: with WithReplicaSync, an acquisition that too few
	// replicas confirmed in time; it was released, and the error also
	// matches ErrNotAcquired.
	ErrReplicaSync = lockcore.ErrReplicaSync
)
