package semaphore

import (
	"context"
	"errors"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/observe"
)

// This file tells the Client's observer (rlock.WithObserver) of the
// semaphore's calls and permits. In its events the Owner is the permit ID.
// A permit on the watchdog lease is a hold from its acquisition to its
// Release, its loss or Close; a permit on a fixed lease is reported as
// acquired and released, but not as a hold: its Client does not learn
// when its lease ends.

// acquireObs is what an observed acquisition keeps.
type acquireObs struct {
	o         observe.Observer
	ev        observe.Acquire
	start     time.Time
	waitSince time.Time
}

// observeAcquire tells the observer, if any, that a's call starts, and
// gives a the context it goes on with.
func (a *acquisition) observeAcquire() {
	o := a.s.core.Observer()
	if o == nil {
		return
	}
	a.obs = &acquireObs{o: o, start: time.Now(), ev: observe.Acquire{
		Lock: observe.Lock{Kind: observe.KindSemaphore, Name: a.s.name}, Owner: a.id, Wait: a.wait}}
	if !a.renew {
		a.obs.ev.Lease = a.lease
	}
	if ctx := o.AcquireStart(a.ctx, a.obs.ev); ctx != nil {
		a.ctx = ctx
	}
}

// waiting is called when the call is about to wait, its first time.
func (a *acquisition) waiting() {
	if a.obs != nil && a.obs.waitSince.IsZero() {
		a.obs.waitSince = time.Now()
		a.obs.o.WaitStart(a.ctx, observe.Wait{Lock: a.obs.ev.Lock, Owner: a.id})
	}
}

// observed tells the observer how the call ended.
func (a *acquisition) observed(ok bool, err error) {
	if a.obs == nil {
		return
	}
	if !a.obs.waitSince.IsZero() {
		a.obs.o.WaitEnd(a.ctx, observe.Wait{Lock: a.obs.ev.Lock, Owner: a.id, Waited: time.Since(a.obs.waitSince)})
	}
	ev := a.obs.ev
	ev.Duration, ev.Err = time.Since(a.obs.start), err
	switch {
	case ok:
		ev.Outcome = observe.OutcomeAcquired
	case err == nil, !a.failing && a.ctx.Err() != nil && errors.Is(err, a.ctx.Err()):
		ev.Outcome = observe.OutcomeNotAcquired
	default:
		ev.Outcome = observe.OutcomeError
	}
	a.obs.o.AcquireEnd(a.ctx, ev)
}

// holdEvent is the observer's event for the permit p.
func (p *permit) holdEvent() observe.Hold {
	return observe.Hold{Lock: observe.Lock{Kind: observe.KindSemaphore, Name: p.key.name}, Owner: p.key.id}
}

// ObservedAs names the permit in renewal events.
func (p *permit) ObservedAs() (observe.Lock, string) {
	e := p.holdEvent()
	return e.Lock, e.Owner
}

var _ lockcore.Observed = (*permit)(nil)

// ended tells the observer that p's hold ended with outcome (and cause).
func (p *permit) ended(outcome observe.Outcome, cause error) {
	if p.o == nil {
		return
	}
	e := p.holdEvent()
	e.Outcome, e.Held, e.Err = outcome, time.Since(p.since), cause
	p.o.HoldEnd(e)
}

// observeRelease runs release (the Redis part of Release, which reports
// the permits it gave back) with the observer told of its start and end.
func (s *Semaphore) observeRelease(ctx context.Context, id string, p *permit, release func(context.Context) (int64, error)) (int64, error) {
	o := s.core.Observer()
	if o == nil {
		return release(ctx)
	}
	ev := observe.Release{Lock: observe.Lock{Kind: observe.KindSemaphore, Name: s.name}, Owner: id}
	start := time.Now()
	if p != nil {
		ev.Held = start.Sub(p.since)
	}
	if octx := o.ReleaseStart(ctx, ev); octx != nil {
		ctx = octx
	}
	n, err := release(ctx)
	ev.Duration, ev.Err = time.Since(start), err
	switch {
	case err != nil:
		ev.Outcome = observe.OutcomeError
	case n == 0:
		ev.Outcome = observe.OutcomeNotHeld
	default:
		ev.Outcome = observe.OutcomeReleased
	}
	o.ReleaseEnd(ctx, ev)
	return n, err
}
