// Package lockcore holds what every lock kind of relock shares: the error
// sentinels, owner identity from the context, key and channel names,
// argument checks, the per-Client state (Core) and the generic reentrant
// lock (Mutex) with its acquire-wait loop. The public packages rlock and
// fairlock are thin, documented wrappers around it.
package lockcore

import (
	"errors"
	"fmt"
	"strings"
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

// Join joins errs (nils left out) as errors.Join does, so that errors.Is
// and errors.As find each of them, but its message reads on one line: the
// messages joined by ": ", a sentinel first and its cause after it
// ("relock: lock not acquired: context deadline exceeded"), with the
// package prefix "relock: " said once. It returns
// nil when every err is nil, and a lone err as it is.
func Join(errs ...error) error { return join(": ", errs) }

// JoinList is Join for failures side by side (of several locks): their
// messages are joined by "; ".
func JoinList(errs ...error) error { return join("; ", errs) }

func join(sep string, errs []error) error {
	var kept []error
	for _, err := range errs {
		if err != nil {
			kept = append(kept, err)
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		return kept[0]
	}
	return &joinError{errs: kept, sep: sep}
}

type joinError struct {
	errs []error
	sep  string
}

func (e *joinError) Error() string {
	var b strings.Builder
	for i, err := range e.errs {
		msg := err.Error()
		if i > 0 {
			b.WriteString(e.sep)
			msg = strings.TrimPrefix(msg, "relock: ")
		}
		b.WriteString(msg)
	}
	return b.String()
}

func (e *joinError) Unwrap() []error { return e.errs }
