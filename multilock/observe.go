package multilock

import (
	"context"
	"errors"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/observe"
)

// This file holds what a MultiLock or a RedLock tells its observer: the
// acquisitions and releases (through observeAcquire and observeRelease,
// called at the start of each), and the holds (group.grant, group.ended and
// group.endRelease report their start and end).

// Observed is implemented by locks that report to an observer:
// *rlock.Lock, *rlock.FencedLock, *fairlock.Lock, *rwlock.Lock, *MultiLock and
// *RedLock. A MultiLock or a RedLock reports to the observer of the first
// of its locks that has one (a RedLock's WithObserver overrides it).
type Observed interface {
	Observer() observe.Observer
}

// WithObserver sets the observer a RedLock reports to, instead of its
// locks' observer; nil turns its reports off (its locks still report to
// theirs).
func WithObserver(o observe.Observer) Option {
	return func(c *config) { c.observer, c.observerSet = o, true }
}

// Observer returns the observer the MultiLock reports to: its locks'
// (nil when none has one).
func (m *MultiLock) Observer() observe.Observer { return m.g.obs }

// Observer returns the observer the RedLock reports to.
func (r *RedLock) Observer() observe.Observer { return r.g.obs }

// observerOf returns the observer of the first of locks that has one.
func observerOf(locks []Locker) observe.Observer {
	for _, l := range locks {
		if o, ok := l.(Observed); ok {
			if obs := o.Observer(); obs != nil {
				return obs
			}
		}
	}
	return nil
}

// holdObs is what a hold record keeps for the observer.
type holdObs struct {
	owner string
	since time.Time
}

func (g *group) lock() observe.Lock {
	kind := observe.KindMulti
	if g.kind == "redlock" {
		kind = observe.KindRedLock
	}
	return observe.Lock{Kind: kind, Name: g.name}
}

// holdStartLocked reports the start of h, a new hold of owner. g.mu is
// held.
func (g *group) holdStartLocked(h *hold, owner string) {
	if g.obs == nil {
		return
	}
	h.obs = holdObs{owner: owner, since: time.Now()}
	g.obs.HoldStart(observe.Hold{Lock: g.lock(), Owner: owner})
}

// holdEndLocked reports the end of h. g.mu is held.
func (g *group) holdEndLocked(h *hold, outcome observe.Outcome, cause error) {
	if g.obs == nil || h.obs.owner == "" {
		return
	}
	g.obs.HoldEnd(observe.Hold{Lock: g.lock(), Owner: h.obs.owner, Outcome: outcome,
		Held: time.Since(h.obs.since), Err: cause})
}

// acquireObs is one observed acquisition; nil when there is no observer.
type acquireObs struct {
	g         *group
	ctx       context.Context
	ev        observe.Acquire
	start     time.Time
	waitSince time.Time
}

// observeAcquire tells the observer that an acquisition starts. It returns
// the contexts the acquisition goes on with: ctx and octx (ctx with the
// owner the locks are called with) derived from the observer's context.
func (g *group) observeAcquire(ctx, octx context.Context, owner string, anon bool, wait, lease time.Duration) (context.Context, context.Context, *acquireObs) {
	if g.obs == nil {
		return ctx, octx, nil
	}
	a := &acquireObs{g: g, ev: observe.Acquire{Lock: g.lock(), Owner: owner, Wait: wait, Lease: lease},
		start: time.Now()}
	if c := g.obs.AcquireStart(ctx, a.ev); c != nil {
		ctx = c
	}
	octx = ctx
	if anon {
		octx = lockcore.WithReservedOwner(ctx, owner)
	}
	a.ctx = ctx
	return ctx, octx, a
}

// waiting is called before a RedLock waits for its next round.
func (a *acquireObs) waiting() {
	if a != nil && a.waitSince.IsZero() {
		a.waitSince = time.Now()
		a.g.obs.WaitStart(a.ctx, observe.Wait{Lock: a.ev.Lock, Owner: a.ev.Owner})
	}
}

// end tells the observer how the acquisition ended; deferred with the
// acquisition's results.
func (a *acquireObs) end(ok *bool, err *error) {
	if a == nil {
		return
	}
	if !a.waitSince.IsZero() {
		a.g.obs.WaitEnd(a.ctx, observe.Wait{Lock: a.ev.Lock, Owner: a.ev.Owner, Waited: time.Since(a.waitSince)})
	}
	a.ev.Duration, a.ev.Err = time.Since(a.start), *err
	switch {
	case *ok:
		a.ev.Outcome = observe.OutcomeAcquired
	case *err == nil, a.ctx.Err() != nil && errors.Is(*err, a.ctx.Err()):
		a.ev.Outcome = observe.OutcomeNotAcquired
	default:
		a.ev.Outcome = observe.OutcomeError
	}
	a.g.obs.AcquireEnd(a.ctx, a.ev)
}

// releaseObs is one observed release; nil when there is no observer.
type releaseObs struct {
	g     *group
	ctx   context.Context
	ev    observe.Release
	start time.Time
}

// observeRelease tells the observer that a release by owner ("" when
// there is none) starts, and returns the contexts it goes on with, as
// observeAcquire does.
func (g *group) observeRelease(ctx, octx context.Context, owner string) (context.Context, context.Context, *releaseObs) {
	if g.obs == nil {
		return ctx, octx, nil
	}
	r := &releaseObs{g: g, ev: observe.Release{Lock: g.lock(), Owner: owner}, start: time.Now()}
	g.mu.Lock()
	if h := g.holds[owner]; h != nil && owner != "" && !h.obs.since.IsZero() {
		r.ev.Held = r.start.Sub(h.obs.since)
	}
	g.mu.Unlock()
	_, named := lockcore.OwnerFrom(ctx)
	if c := g.obs.ReleaseStart(ctx, r.ev); c != nil {
		ctx = c
	}
	octx = ctx
	if !named && owner != "" {
		octx = lockcore.WithReservedOwner(ctx, owner)
	}
	r.ctx = ctx
	return ctx, octx, r
}

// end tells the observer how the release ended; deferred with its result.
func (r *releaseObs) end(err *error) {
	if r == nil {
		return
	}
	r.ev.Duration, r.ev.Err = time.Since(r.start), *err
	switch {
	case *err == nil:
		r.ev.Outcome = observe.OutcomeReleased
	case errors.Is(*err, ErrNotHeld), errors.Is(*err, ErrLockLost):
		r.ev.Outcome = observe.OutcomeNotHeld
	default:
		r.ev.Outcome = observe.OutcomeError
	}
	r.g.obs.ReleaseEnd(r.ctx, r.ev)
}
