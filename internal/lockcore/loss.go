package lockcore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/watchdog"
)

// Why a hold was lost, as its cause says it: one "relock:" prefix, what
// was held, and how the loss was found, where the library can tell.
const (
	whyForced   = "this Client force-unlocked it"
	whyReplaced = "its lease ran out, and a later hold without an owner of this Client took it"
	whyPermit   = "it was gone when it was released (its lease ran out, or it was removed)"
)

// lossError is the cause of a hold's end by loss. It matches ErrLockLost
// and what the loss was found by (a watchdog error), and reads "relock:
// hold lost: <what>: <why>".
type lossError struct {
	what, why string
	found     error // what found the loss, or nil
}

func (e *lossError) Error() string { return relock.ErrLockLost.Error() + ": " + e.what + ": " + e.why }

func (e *lossError) Unwrap() []error {
	if e.found == nil {
		return []error{relock.ErrLockLost}
	}
	return []error{relock.ErrLockLost, e.found}
}

// loss returns the cause of the loss of h's hold, found as why says. The
// caller holds c.mu, or uses h (so that it cannot be reused meanwhile).
func (h *hold) loss(why string, found error) error {
	return &lossError{what: h.describe(), why: why, found: found}
}

// describe names what h holds: `lock "orders"`, `write lock "doc"`,
// `permit 0f3a... of semaphore "exports"`. The caller holds c.mu, or uses
// h.
func (h *hold) describe() string {
	switch {
	case h.key.suffix == permitSuffix:
		return fmt.Sprintf("permit %s of semaphore %q", h.key.owner, h.key.name)
	case h.key.suffix != "":
		return fmt.Sprintf("write lock %q", h.key.name)
	case h.shared:
		return fmt.Sprintf("read lock %q", h.key.name)
	}
	return fmt.Sprintf("lock %q", h.key.name)
}

// errHeardGone is a renewal's answer that the hold is gone, for a
// renewal sent after a message on the lock's channel (where a
// force-unlock is published) brought it forward (see Core.renew). It
// matches watchdog.ErrNotHeld.
var errHeardGone = fmt.Errorf("%w, after a message on the lock's channel", watchdog.ErrNotHeld)

// renewalLoss is the cause of a loss of what (see describe) the watchdog
// found: a renewal that found the hold gone (heard: a renewal that a
// message on the lock's channel, such as a force-unlock's, brought
// forward), or no renewal in time. It says what the Client saw, no more:
// a hold deleted without a message (a DEL), or force-unlocked while
// nobody watched it (its Client listens on the channel only for a
// watched hold), is found by its next renewal.
func renewalLoss(what string, found error, lease string, heard bool) error {
	why := "its renewal found it gone (deleted or force-unlocked; no message on its channel was heard)"
	switch {
	case errors.Is(found, watchdog.ErrExpired):
		why = "no renewal succeeded before its lease of " + lease + " ran out"
		if last := strings.TrimPrefix(found.Error(), watchdog.ErrExpired.Error()); last != "" {
			why += " (" + strings.TrimPrefix(last, ": ") + ")"
		}
	case heard:
		why = "it was force-unlocked: a message on its channel was heard, and the renewal it brought forward found it gone"
	}
	return &lossError{what: what, why: why, found: found}
}
