package lockcore

import (
	"context"
	"fmt"
	"github.com/relock-go/relock"
	"sync/atomic"
	"time"

	"github.com/relock-go/relock/internal/backoff"
	"github.com/relock-go/relock/internal/layout"
)

// releaseRetry is how long a release waits before resending a script
// that the server refused to run or whose reply was lost.
var releaseRetry = backoff.Policy{Min: 50 * time.Millisecond}

// Unlock releases one hold level of the owner in ctx (or of the Client's
// anonymous hold of the lock). It works when ctx has already ended: the
// release then runs on a detached context, and so does the end of one
// that ctx cut off in flight. When the owner holds nothing this Client
// knows of, it returns relock.ErrNotHeld and sends nothing to Redis.
func (m *Mutex) Unlock(ctx context.Context) error {
	if m.core.obs != nil {
		return m.core.obs.unlock(ctx, m)
	}
	return m.unlock(ctx)
}

// unlock is Unlock, unobserved.
func (m *Mutex) unlock(ctx context.Context) error {
	if err := m.check(); err != nil {
		return err
	}
	owner, named, err := m.contextOwner(ctx)
	if err != nil {
		return err
	}
	for {
		var h *hold
		if named {
			h = m.core.find(m.holdKey(owner))
		} else {
			owner, h = m.core.findAnon(m)
		}
		if owner == "" {
			if lost := m.core.takeAnonLoss(m.anonKey); lost != nil {
				return Join(relock.ErrNotHeld, lost)
			}
			return fmt.Errorf("%w: lock %q: no owner in the context, and no hold without an owner of this Client", relock.ErrNotHeld, m.name)
		}
		nothing, err := m.unlockHold(ctx, owner, h)
		if nothing && !named && m.shared && m.core.anonOwner(m.anonKey) != owner {
			// Another ownerless Unlock released that anonymous hold
			// first; a shared role (a read lock) may have more of them.
			continue
		}
		return err
	}
}

// unlockHold is unlock for owner, whose record h is (nil: none), counted
// as used by the caller; it ends that use. nothing reports that the owner
// held nothing.
func (m *Mutex) unlockHold(ctx context.Context, owner string, h *hold) (nothing bool, err error) {
	if h == nil {
		return true, m.notHeld(owner)
	}
	left := false // the use of h ended on the way
	defer func() {
		if !left {
			m.core.leave(h)
		}
	}()
	rctx := ctx
	if h.acquire(ctx) != nil {
		var cancel context.CancelFunc
		rctx, cancel = detached(ctx)
		defer cancel()
		if err := h.acquire(rctx); err != nil {
			return false, redisError("unlock", m.name, fmt.Errorf("another call of the owner on the lock did not end in time: %w", err))
		}
	}
	defer h.release()
	h.core.mu.Lock()
	want, gen, lease, leaseArg := h.want, h.gen, h.lease, h.leaseArg
	var stop *renewal
	if want == 1 {
		// The last level: stop renewing first, synchronously (below), so
		// that no renewal reaches Redis after the release.
		stop, h.renewal = h.renewal, nil
	}
	h.core.mu.Unlock()
	if want == 0 {
		if lost := h.takeLoss(); lost != nil {
			// The hold was lost and this Client knows it: the release
			// says so, whoever noticed first.
			return false, Join(relock.ErrNotHeld, lost)
		}
		return true, m.notHeld(owner)
	}
	if stop != nil {
		stop.lease.Stop()
	}
	r := Request{Core: m.core, Name: m.name, Field: h.field, LeaseMs: Millis(lease), LeaseArg: leaseArg,
		Chan: m.channel, Wakers: m.wakers, Target: want - 1}
	var offer *grantOffer
	if want == 1 {
		m.awaitEndedWaits(owner)
		// The last level: a waiter of this Client may take the lock in
		// the release itself (see grant.go).
		offer = m.core.claimGrant(m, h)
	}
	sent := time.Now()
	var remaining int64
	if offer != nil {
		remaining, err = m.releaseGranting(rctx, h, r, offer)
	} else {
		remaining, err = m.release(rctx, h, r, false)
	}
	if err != nil && rctx == ctx && ctx.Err() != nil {
		// ctx ended while the release was in flight: finish it.
		dctx, cancel := detached(ctx)
		defer cancel()
		remaining, err = m.release(dctx, h, r, outcomeUnknown(err))
	}
	switch {
	case err != nil:
		// Redis did not confirm the release. The level is released as far
		// as the Client knows all the same: the scripts bring the count to
		// the Client's own, so the owner's next call on the lock brings
		// Redis in line, and at the last level the hold is no longer
		// renewed and the Client goes on releasing it in the background
		// (settleReserved). (Keeping the level would leave it held, and
		// renewed, after the caller's outer Unlock.)
		h.keepSpare(stop)
		if want == 1 {
			m.core.mu.Lock()
			settle, reserved := m.core.reserveSettleLocked(h, m)
			until := h.settleUntilLocked(stop != nil)
			m.core.mu.Unlock()
			ended := h.released(gen, 0)
			if reserved {
				m.core.settleReserved(h, settle, ended, until)
			}
		} else {
			h.leaseMayBeSet(gen, lease) // the release may have run, and reset the lease
			h.released(gen, want-1)
		}
		return false, m.core.closedOr(redisError("unlock", m.name, err))
	case remaining < 0:
		h.keepSpare(stop)
		lost := h.loss(h.goneWhy("release"), nil)
		h.lose(gen, lost)
		h.forgetLoss()
		return false, Join(relock.ErrNotHeld, lost)
	}
	if remaining > 0 {
		m.settleKept(h, gen, lease)
	}
	// The common way out, in one critical section: the level released,
	// the registration kept for the next hold, the use of h ended. The
	// call slot goes last, so that the owner's next call sees the count
	// this release left (the record may already be another's then: the
	// slot is all it could wait for, and only for a moment).
	left = true
	h.releasedLeave(gen, int(remaining), stop, sent)
	return false, nil
}

// endedWaitsAwaited counts the Unlocks of the process that waited for
// record deletes (see awaitEndedWaits). For the tests.
var endedWaitsAwaited atomic.Int64

// lateDeleteDelay is the detection delay under which the last Unlock of
// a lock waits for the delete of its owner's ended wait record for it
// (see Mutex.awaitEndedWaits).
const lateDeleteDelay = time.Second

// awaitEndedWaits waits, for up to deleteTimeout, until the records of
// owner's calls that waited for the lock and ended (with it: their
// delete is not waited for, see unrecord) are deleted, before the last
// level's release lets the lock go. While the owner holds the lock such
// a record has no edge (an owner that holds what it waits for is no
// cycle); once another holds it, a record still in Redis would read as
// the owner waiting for that other, and close a false cycle through
// someone who waits for what the owner holds now, if it looks before the
// delete lands.
//
// It waits only with a detection delay under lateDeleteDelay (the
// Clients that share locks are taken to use like delays): a look comes
// a delay after its wait began, and a delete a whole second late is the
// case of a delete that failed (the watchdog's tick cleans up). With
// the default delay the release goes on at once: a waiter that releases
// at once after its wait would otherwise add the delete's round trip to
// every hand-off (a third fewer hand-offs a second with 100 Clients'
// waiters on one lock).
func (m *Mutex) awaitEndedWaits(owner string) {
	if after := m.core.waits.after; after <= 0 || after >= lateDeleteDelay || m.core.waits.ended.Load() == 0 {
		return // the common cases: the default delay, or no call waited long
	}
	gone := m.core.waits.endedWaits(layout.Field(m.core.ID, owner), m.name)
	if len(gone) == 0 {
		return
	}
	endedWaitsAwaited.Add(1)
	t := time.NewTimer(deleteTimeout)
	defer t.Stop()
	for _, ch := range gone {
		select {
		case <-ch:
		case <-t.C:
			return
		}
	}
}

func (m *Mutex) notHeld(owner string) error {
	return fmt.Errorf("%w: lock %q by owner %q", relock.ErrNotHeld, m.name, owner)
}

// release runs the kind's release script for r until it answers or ctx
// ends; resent says that an earlier send of it may have run. The script
// moves the count only from where the Client expects it (see package
// lua), so sending it again is safe; relock resends it itself (not rueidis) because only it
// knows that a request is a resend: when a resent release to 0 finds the
// field gone, the first request released it.
//
// It resends after a lost reply, and after an error reply that means the
// script did not run (LOADING, OOM, READONLY...), but not after BUSY: a
// server stays busy for as long as another script runs, so that release
// fails at once, and at the last level Unlock goes on with it in the
// background (settleReserved), resending every RetryBackoff until the
// server answers.
func (m *Mutex) release(ctx context.Context, h *hold, r Request, resent bool) (int64, error) {
	for {
		n, err := m.kind.Release(ctx, r)
		switch {
		case err == nil && n < 0 && resent && r.Target == 0:
			return 0, nil
		case err == nil:
			return n, nil
		case ctx.Err() != nil || m.core.CheckOpen() != nil:
			return 0, err
		}
		if _, isReply := replyOf(err); isReply {
			if !notRun(err) || isBusy(err) {
				return 0, err
			}
		} else {
			resent = true
		}
		if !backoff.Sleep(ctx.Done(), releaseRetry.Delay(1)) {
			return 0, Join(err, ctx.Err())
		}
	}
}

// ForceUnlock deletes the lock whoever holds it, on a detached context.
// Holds of this Client on the lock end as lost.
func (m *Mutex) ForceUnlock(ctx context.Context) (bool, error) {
	if err := m.check(); err != nil {
		return false, err
	}
	dctx, cancel := detached(ctx)
	defer cancel()
	ok, err := m.kind.ForceRelease(dctx, m.core, m.name)
	if err != nil {
		return false, m.core.closedOr(redisError("force unlock", m.name, err))
	}
	if ok {
		m.core.loseAll(dctx, m.name)
	}
	return ok, nil
}

// loseAll ends every hold of this Client on name that a force-unlock
// removed, as lost, each after the calls in flight on it (so that none of
// them records a level after the loss). A hold taken again after the
// force-unlock ran (its field is in Redis) is kept; when Redis cannot say,
// the hold is taken for lost.
func (c *Core) loseAll(ctx context.Context, name string) {
	for _, h := range c.holdsOn(name) {
		locked := h.acquire(ctx) == nil
		_, gen := h.state()
		n, err := c.RDB.Do(ctx, c.RDB.B().Hexists().Key(name).Field(h.field).Build()).AsInt64()
		if err != nil || n == 0 {
			h.lose(gen, h.loss(whyForced, nil))
		}
		if locked {
			h.release()
		}
		c.leave(h)
	}
}

// settleKept takes back the levels that a partial release of hold gen
// kept in Redis, when that hold ended while the release was on its way
// (a watched hold's fixed lease ran out): the release reset their lease,
// and nobody would release them. The caller holds h's call slot, so no
// newer hold of the owner can have begun.
func (m *Mutex) settleKept(h *hold, gen uint64, lease time.Duration) {
	c := m.core
	c.mu.Lock()
	if h.gen != gen || h.want > 0 {
		c.mu.Unlock()
		return
	}
	settle, reserved := c.reserveSettleLocked(h, m)
	c.mu.Unlock()
	if reserved {
		c.settleReserved(h, settle, true, time.Now().Add(lease))
	}
}
