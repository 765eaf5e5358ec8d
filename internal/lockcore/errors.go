// Package lockcore holds what every lock kind of relock shares: the error
// sentinels, owner identity from the context, key and channel names,
// argument checks, the per-Client state (Core) and the generic reentrant
// lock (Mutex) with its acquire-wait loop. The public packages rlock and
// fairlock are thin, documented wrappers around it.
package lockcore

import (
	"errors"
	"fmt"
)

// The sentinels every lock kind returns. rlock and fairlock re-export these
// same values, so errors.Is works across the lock kinds.
var (
	ErrNotAcquired     = errors.New("relock: lock not acquired")
	ErrNotHeld         = errors.New("relock: lock not held by this owner")
	ErrLockLost        = errors.New("relock: lock lost while held")
	ErrClosed          = errors.New("relock: client closed")
	ErrInvalidArgument = errors.New("relock: invalid argument")
	// ErrReplicaSync: an acquisition that fewer replicas than required
	// confirmed in time (it was released again).
	ErrReplicaSync = errors.New("relock: too few replicas confirmed the acquisition")
)

// invalid returns an ErrInvalidArgument with detail.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// redisError wraps an error from Redis with what was being done.
func redisError(op, name string, err error) error {
	return fmt.Errorf("relock: %s %q: %w", op, name, err)
}

// errUnexpected reports a reply of a shape the scripts never return.
func errUnexpected(what string, reply any) error {
	return fmt.Errorf("relock: %s: unexpected reply %v", what, reply)
}
