package lockcore

import (
	"fmt"
	"time"
)

// The lease of a hold, as the Client knows it. Redis counts a lease from
// when a script set it: the acquisition, a re-entry (which resets it), a
// partial release (which resets it too), a renewal. The Client cannot see
// that moment, only when it sent the script and when the reply came, so
// it keeps two bounds:
//
//   - leaseAt, the send of the latest script that set the lease and
//     answered: the hold cannot have ended in Redis before leaseAt +
//     lease, and may have ended right after. A watched hold on a fixed
//     lease ends then (armExpiryLocked), so that its life never outlasts
//     what Redis may keep;
//   - leaseMax, the latest end that a script of the hold may have set,
//     answered or not: the hold cannot be in Redis after it (a renewal
//     moves it on; see settleUntilLocked). A last release that Redis did
//     not confirm is tried again until then (settleReserved).

// leaseSetLocked records that a script sent at sent set the hold's lease
// (h.lease) and answered just now. c.mu is held.
func (h *hold) leaseSetLocked(sent time.Time) {
	h.leaseAt = sent
	h.confirmBy = time.Time{} // the script set the whole lease
	h.leaseMayBeSetLocked(h.lease)
}

// leaseMayBeSetLocked records that a script that sets the hold's lease to
// lease may have run (its reply was lost, or it just answered). c.mu is
// held.
func (h *hold) leaseMayBeSetLocked(lease time.Duration) {
	h.leaseMax = maxTime(h.leaseMax, time.Now().Add(lease))
}

// leaseMayBeSet is leaseMayBeSetLocked for hold gen, if it is still h's.
func (h *hold) leaseMayBeSet(gen uint64, lease time.Duration) {
	h.core.mu.Lock()
	if h.gen == gen && h.want > 0 {
		h.leaseMayBeSetLocked(lease)
	}
	h.core.mu.Unlock()
}

// settleUntilLocked is the latest the hold, which the caller is ending
// without Redis confirming it, may last in Redis: leaseMax, or a lease
// from now when it was renewed until now (every renewal was sent before
// the caller stopped them). c.mu is held.
func (h *hold) settleUntilLocked(renewed bool) time.Time {
	if renewed {
		return maxTime(h.leaseMax, time.Now().Add(h.lease))
	}
	return h.leaseMax
}

// armExpiryLocked makes a hold that is watched (its life was made) on a
// fixed lease end at leaseAt + lease, the earliest Redis may have let it
// go, by a timer of its own (the runtime's, as the deadline of a permit's
// context on a fixed lease); it stops the timer of a hold that is not,
// or no longer, such a hold. A re-entry or a partial release moves the
// end (they reset the lease), a re-entry on the watchdog lease stops it.
// No Redis call is made: the lease's end is known. c.mu is held.
//
// The timer is the runtime's, not the watchdog's wheel: the wheel renews
// leases, and a lease that must not be renewed would need a kind of
// entry of its own there; a runtime timer costs nothing while it waits,
// starts no goroutine until it fires, is reset in place by a re-entry,
// and is made only for a hold that someone watches.
func (h *hold) armExpiryLocked() {
	if h.life == nil || !h.fixed || h.want == 0 {
		if h.expiry != nil {
			h.expiry.Stop()
		}
		return
	}
	d := time.Until(h.leaseEndLocked())
	if h.expiry == nil {
		h.expiry = time.AfterFunc(d, h.leaseRanOut)
		return
	}
	h.expiry.Reset(d)
}

// leaseRanOut is the expiry timer's function: the hold ends as lost, if
// it is still a watched hold on a fixed lease that has run out (a
// re-entry or a release may have moved or ended it while the timer
// fired), unless Close ended it first.
func (h *hold) leaseRanOut() {
	c := h.core
	c.mu.Lock()
	if h.want == 0 || !h.fixed || h.life == nil || time.Now().Before(h.leaseEndLocked()) || c.CheckOpen() != nil {
		c.mu.Unlock()
		return
	}
	if !h.confirmBy.IsZero() {
		h.loseLocked(h.loss(whyUnconfirmed, nil))
		return
	}
	h.loseLocked(h.loss(leaseRanOut(h.lease), nil))
}

// leaseEndLocked is when a hold on a fixed lease may end in Redis, as far as
// the Client knows: leaseAt + lease, or the end of its grant's window
// while the grant is not confirmed (see confirmGrant). c.mu is held.
func (h *hold) leaseEndLocked() time.Time {
	end := h.leaseAt.Add(h.lease)
	if !h.confirmBy.IsZero() && h.confirmBy.Before(end) {
		return h.confirmBy
	}
	return end
}

// stopExpiriesLocked stops the expiry timers of every hold: Close ends
// the holds. c.mu is held, and Close has begun.
func (c *Core) stopExpiriesLocked() {
	for _, h := range c.holds {
		if h.expiry != nil {
			h.expiry.Stop()
		}
		h.stopConfirmLocked()
	}
}

// leaseRanOut is why a hold on a fixed lease of lease ended at its end.
func leaseRanOut(lease time.Duration) string {
	return fmt.Sprintf("its fixed lease of %v ran out", lease)
}

// goneWhy is why a hold that a call of its owner (named by call:
// "release", "re-entry") found gone was lost, as far as the Client can
// tell: on a fixed lease, whether that lease had run out by the Client's
// clock. The caller holds c.mu, or uses h.
func (h *hold) goneWhy(call string) string {
	switch {
	case h.fixed && !time.Now().Before(h.leaseAt.Add(h.lease)):
		return fmt.Sprintf("its %s found it gone: its fixed lease of %v had run out", call, h.lease)
	case h.fixed:
		return fmt.Sprintf("its %s found it gone before its fixed lease of %v ran out (deleted or force-unlocked)", call, h.lease)
	}
	return "its " + call + " found it gone (deleted or force-unlocked, or expired while no renewal got through)"
}
