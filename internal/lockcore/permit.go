package lockcore

import (
	"context"
	"github.com/relock-go/relock"
	"strconv"
	"time"

	"github.com/relock-go/relock/observe"
)

// Permits are holds. A semaphore's permit that this Client holds on the
// watchdog lease has a hold record like a lock's, keyed by the
// semaphore's name and the permit's ID (its field is the permit's member
// in Redis): the watchdog renews it with the semaphore's renewal, and its
// loss (a renewal that finds it gone, a Release that finds it gone) is
// reported like a lock's, to the lost handler (name: the semaphore's,
// owner: the permit ID), to the observer, and through the context that
// watches it. Close ends it with relock.ErrClosed.

// permitSuffix keeps the records of permits apart from those of lock holds
// on the same name.
const permitSuffix = "\x00permit"

// GrantPermit records that this Client holds permit id (its member in
// Redis: field) of the semaphore name on the watchdog lease lease, renewed
// by r, and returns the hold's life: a context that ends when the hold
// does (see PermitContext). It fails with relock.ErrClosed after Close; the
// caller then gives the permit back.
func (c *Core) GrantPermit(r KindRenewer, name, id, field string, lease time.Duration) (context.Context, error) {
	h := c.enterField(holdKey{name, permitSuffix, id, false}, field, r, false, nil)
	defer c.leave(h)
	if c.obs != nil {
		c.mu.Lock()
		if h.obs == nil {
			h.obs = &holdObs{kind: observe.KindSemaphore}
		}
		c.mu.Unlock()
	}
	_, gen := h.state()
	if err := h.grant(0, gen, lease, strconv.FormatInt(Millis(lease), 10), true, "", time.Now()); err != nil {
		return nil, err
	}
	if life := c.watch(holdKey{name, permitSuffix, id, false}, ""); life != nil {
		return life, nil
	}
	// Lost already, and reported.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(h.loss("it was lost before it could be watched", nil))
	return ctx, nil
}

// Life is a context that lives as long as the Client: Close ends it with
// cause relock.ErrClosed.
func (c *Core) Life() context.Context { return c.root }

// ReleasePermit gives permit id of the semaphore name back with release,
// the script that reports whether the permit was held, with the observer
// told of its start and end. When this Client holds the permit on the
// watchdog, its renewal is stopped first, and its hold ends: as lost when
// release says the permit was not held (the error then matches
// relock.ErrLockLost too), as released otherwise (also when Redis did not
// answer: it is no longer renewed, and ends by its lease at the latest).
// It returns nil, notHeld() (which matches relock.ErrNotHeld) when the permit
// was not held, or release's error.
func (c *Core) ReleasePermit(ctx context.Context, name, id string, release func(context.Context) (bool, error),
	notHeld func() error) error {
	fn := func(ctx context.Context) error { return c.releasePermit(ctx, name, id, release, notHeld) }
	if c.obs == nil || c.obs.o == nil {
		return fn(ctx)
	}
	return c.obs.release(ctx, observe.Lock{Kind: observe.KindSemaphore, Name: name}, id,
		c.heldFor(holdKey{name, permitSuffix, id, false}), fn)
}

func (c *Core) releasePermit(ctx context.Context, name, id string, release func(context.Context) (bool, error),
	notHeld func() error) error {
	h := c.find(holdKey{name, permitSuffix, id, false})
	if h != nil {
		defer c.leave(h)
		if h.acquire(ctx) != nil {
			h = nil
		} else {
			defer h.release()
		}
	}
	var gen uint64
	if h != nil {
		var want int
		if want, gen = h.state(); want == 0 {
			if lost := h.takeLoss(); lost != nil {
				// Lost while held, and reported: the release says so.
				return Join(relock.ErrNotHeld, lost)
			}
			h = nil
		} else {
			h.stopRenewal()
		}
	}
	ok, err := release(ctx)
	switch {
	case h == nil && err == nil && !ok:
		return notHeld()
	case h == nil:
		return err
	case err == nil && !ok:
		lost := h.loss(whyPermit, nil)
		h.lose(gen, lost)
		h.forgetLoss()
		return Join(relock.ErrNotHeld, lost)
	}
	h.released(gen, 0)
	return err
}

// PermitContext returns a context that ends when this Client's hold of
// permit id of the semaphore name ends: by its release (cause
// context.Canceled), its loss (a cause matching relock.ErrLockLost) or Close
// (relock.ErrClosed); nil when the Client holds no such permit on the watchdog.
func (c *Core) PermitContext(name, id string) context.Context {
	return c.watch(holdKey{name, permitSuffix, id, false}, "")
}

// UpdatePermit gives permit id of the semaphore name a fixed lease of
// lease, with update, the script that reports whether the permit was
// held (and so took the lease). When this Client holds the permit on the
// watchdog, its renewal is stopped first (a renewal would put the old
// lease back), and once update says the permit took the new lease, the
// hold is on that fixed lease: it ends at its end, counted from before
// update was sent, as a hold on a fixed lease does (see armExpiryLocked);
// a later call moves the end again. When update says the permit was not
// held, the hold ends as lost and the error matches relock.ErrLockLost
// too. When update fails (Redis did not answer or refused), the renewal
// goes on as before: the lease the permit has is unknown, and the
// watchdog keeps it held. It returns nil, notHeld() (which matches
// relock.ErrNotHeld) when the permit was not held, or update's error.
func (c *Core) UpdatePermit(ctx context.Context, name, id string, lease time.Duration,
	update func(context.Context) (bool, error), notHeld func() error) error {
	h := c.find(holdKey{name, permitSuffix, id, false})
	if h != nil {
		defer c.leave(h)
		if err := h.acquire(ctx); err != nil {
			return err
		}
		defer h.release()
	}
	var gen uint64
	renewed := false
	if h != nil {
		var want int
		if want, gen = h.state(); want == 0 {
			if lost := h.takeLoss(); lost != nil {
				// Lost while held, and reported: the update says so.
				return Join(relock.ErrNotHeld, lost)
			}
			h = nil
		} else {
			renewed = h.stopRenewal()
		}
	}
	sent := time.Now()
	ok, err := update(ctx)
	switch {
	case h == nil && err == nil && !ok:
		return notHeld()
	case h == nil:
		return err
	case err == nil && !ok:
		lost := h.loss(whyPermitUpdate, nil)
		h.lose(gen, lost)
		h.forgetLoss()
		return Join(relock.ErrNotHeld, lost)
	case err != nil:
		h.leaseMayBeSet(gen, lease)
		if renewed {
			h.rearm(gen)
		}
		return err
	}
	h.fixLease(gen, lease, sent)
	return nil
}

// whyPermitUpdate is why a permit whose lease update found it gone was
// lost.
const whyPermitUpdate = "its lease update found it gone (released by its ID, deleted, or expired while no renewal got through)"

// fixLease records that a script sent at sent gave hold gen, if it is
// still h's, the fixed lease lease: the hold leaves the watchdog (the
// caller stopped its renewal) and, watched, ends at sent + lease.
func (h *hold) fixLease(gen uint64, lease time.Duration, sent time.Time) {
	if !h.lockCurrent(gen) {
		return
	}
	h.lease, h.leaseArg, h.fixed = lease, strconv.FormatInt(Millis(lease), 10), true
	h.leaseSetLocked(sent)
	h.armExpiryLocked()
	h.core.mu.Unlock()
}
