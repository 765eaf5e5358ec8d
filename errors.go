package relock

import "errors"

// The errors every kind of relock returns, compared with errors.Is. Every
// package of relock returns these same values (rlock, fairlock, rwlock,
// semaphore and latch name them too), so errors.Is(err, ErrNotHeld) holds
// whichever kind returned err. Each message starts with "relock: " once,
// followed by what was being done and why.
var (
	// ErrNotAcquired: a wait ended without the lock or permit. When the
	// context ended the wait, the error also matches the context's error;
	// when Close did, it also matches ErrClosed.
	ErrNotAcquired = errors.New("relock: not acquired")
	// ErrNotHeld: a release (Unlock, Release) or a question about a hold
	// (Token) by an owner that holds nothing, or of a permit that is not
	// held. When the hold was lost while held, the error also matches
	// ErrLockLost.
	ErrNotHeld = errors.New("relock: not held")
	// ErrLockLost: a hold (a lock's, a permit's) ended while held: its key
	// expired or was deleted, it was force-unlocked, or no renewal
	// succeeded before its lease ran out.
	ErrLockLost = errors.New("relock: hold lost")
	// ErrClosed: the Client is closed.
	ErrClosed = errors.New("relock: client closed")
	// ErrInvalidArgument: an empty or malformed name or owner, a negative
	// wait, a negative lease or one under 1ms, a nil function. A call that
	// returns it has sent nothing to Redis.
	ErrInvalidArgument = errors.New("relock: invalid argument")
	// ErrReplicaSync: with rlock.WithReplicaSync, an acquisition that too
	// few replicas confirmed in time; it was released, and the error also
	// matches ErrNotAcquired.
	ErrReplicaSync = errors.New("relock: too few replicas confirmed the acquisition")
)
