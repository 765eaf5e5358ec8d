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
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
)

// invalid returns an relock.ErrInvalidArgument with detail.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{relock.ErrInvalidArgument}, args...)...)
}

// redisError wraps an error from Redis with what was being done.
func redisError(op, name string, err error) error {
	return fmt.Errorf("relock: %s %q: %w", op, name, err)
}

// ScriptError is the error of op on name, a lock, semaphore or latch of
// kind k, from a script's failure err: a refusal of the name (see Refusal)
// as the error it stands for, any other failure wrapped with op and name.
func ScriptError(k layout.Kind, op, name string, err error) error {
	if refused := Refusal(k, name, err); refused != nil {
		return refused
	}
	return redisError(op, name, err)
}

// Refusal turns a script's refusal of name, of kind k (see lua.NameConflict
// and lua.WrongKind), into the error a caller matches: one that wraps
// relock.ErrNameConflict and names both names, or relock.ErrWrongKind and
// names the kind found. It returns nil when err is no refusal.
func Refusal(k layout.Kind, name string, err error) error {
	re, ok := replyOf(err)
	if !ok {
		return nil
	}
	code, detail, _ := strings.Cut(re.Error(), " ")
	noun := string(k)
	if spec, ok := layout.SpecOf(k); ok {
		noun = spec.Noun
	}
	switch code {
	case lua.NameConflict:
		other := detail
		if other == "" {
			other, _ = layout.OtherForm(name)
		}
		return fmt.Errorf("%w: %s %q and %q derive the same Redis keys (a name is wrapped in braces for its other keys unless it has a '{'), and %q is in use",
			relock.ErrNameConflict, noun, name, other, other)
	case lua.WrongKind:
		var found string
		switch layout.Kind(detail) {
		case layout.KindRWLock:
			found = "holds a read-write lock (a hash with its mode field)"
		case layout.KindFair:
			found = "has a fair lock's queue of waiters"
		case layout.KindLock:
			found = "holds a plain, fenced or fair lock (a hash without a read-write lock's mode field)"
		case layout.KindRateLimiter:
			found = "holds a rate limiter (a hash with its rate field)"
		default:
			found = "holds a " + detail
		}
		return fmt.Errorf("%w: %s %q: the name %s", relock.ErrWrongKind, noun, name, found)
	}
	return nil
}

// layoutKind is the kind of lock m is, as package layout names it.
func (m *Mutex) layoutKind() layout.Kind {
	switch label(m.kind) {
	case observe.KindFenced:
		return layout.KindFenced
	case observe.KindFair:
		return layout.KindFair
	case observe.KindRead, observe.KindWrite:
		return layout.KindRWLock
	}
	return layout.KindLock
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
