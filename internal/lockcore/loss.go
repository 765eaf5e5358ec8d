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
	whyReentry  = "it was gone when its owner re-entered it (its lease ran out, or it was deleted)"
	whyRelease  = "it was gone when its owner released it (its lease ran out, or it was deleted)"
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

// renewalLoss is the cause of a loss of what (see describe) the watchdog
// found: a renewal that found the hold gone (forced: one a message on the
// lock's channel, a force-unlock, brought forward), or no renewal in time.
func renewalLoss(what string, found error, lease string, forced bool) error {
	why := "its renewal found it gone (deleted, force-unlocked, or expired while Redis did not answer)"
	switch {
	case errors.Is(found, watchdog.ErrExpired):
		why = "no renewal succeeded before its lease of " + lease + " ran out"
		if last := strings.TrimPrefix(found.Error(), watchdog.ErrExpired.Error()); last != "" {
			why += " (" + strings.TrimPrefix(last, ": ") + ")"
		}
	case forced:
		why = "it was force-unlocked (heard on its channel)"
	}
	return &lossError{what: what, why: why, found: found}
}
