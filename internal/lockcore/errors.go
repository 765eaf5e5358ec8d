// Package lockcore holds what every kind of relock shares: the per-Client
// state (Core), owner identity from the context, argument checks, the
// wait loop every kind waits through (Wait), the hold records of a
// Client's owners and their renewal, and the generic reentrant lock
// (Mutex) that every lock kind is. The public packages are thin,
// documented faces of it.
package lockcore

import (
	"fmt"
	"strings"

	"github.com/relock-go/relock"
)

// invalid returns an relock.ErrInvalidArgument with detail.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{relock.ErrInvalidArgument}, args...)...)
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
