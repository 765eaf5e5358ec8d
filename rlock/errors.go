package rlock

import "github.com/relock-go/relock"

// The errors every kind of relock returns, compared with errors.Is: the
// values of package relock, so errors.Is(err, rlock.ErrNotHeld) holds for
// an error from a fair lock, a read-write lock or a semaphore too.
var (
	ErrNotAcquired     = relock.ErrNotAcquired     // a wait ended without the lock
	ErrNotHeld         = relock.ErrNotHeld         // a release by an owner that holds nothing
	ErrLockLost        = relock.ErrLockLost        // a hold ended while held
	ErrClosed          = relock.ErrClosed          // the Client is closed
	ErrInvalidArgument = relock.ErrInvalidArgument // bad input; nothing was sent to Redis
	ErrReplicaSync     = relock.ErrReplicaSync     // WithReplicaSync: too few replicas confirmed
	ErrNameConflict    = relock.ErrNameConflict    // the name's other form ("a" for "{a}") is in use
	ErrWrongKind       = relock.ErrWrongKind       // the name holds a lock of another kind
	ErrDeadlock        = relock.ErrDeadlock        // the wait was chosen to end a cycle of owners (WithDeadlockDetection)
)
