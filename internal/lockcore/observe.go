package lockcore

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/watchdog"
)

// This file holds what a Core tells its observer (package observe) and its
// logger. The rest of the package calls it at a few points only: Acquire
// and Unlock hand over to it, the wait loop reports its waits and
// outages, a hold reports its start and end, the watchdog's renewals and
// losses are reported, and Close reports the holds it ends. A Core with
// neither an observer nor a logger has a nil *observer, and each of those
// points is then a nil check.

// observer is a Core's observer and logger; either may be nil.
type observer struct {
	o   observe.Observer
	log *slog.Logger
}

func newObserver(cfg Config) *observer {
	if cfg.Observer == nil && cfg.Logger == nil {
		return nil
	}
	return &observer{o: cfg.Observer, log: cfg.Logger}
}

// Observer returns the Client's observer, nil if it has none.
func (c *Core) Observer() observe.Observer {
	if c.obs == nil {
		return nil
	}
	return c.obs.o
}

// Labeled is implemented by a Kind that names itself to observers (one of
// the observe.Kind constants). A Kind without it is observe.KindLock.
type Labeled interface {
	Label() string
}

// Label names the fenced lock to observers.
func (Fenced) Label() string { return observe.KindFenced }

func label(k Kind) string {
	if l, ok := k.(Labeled); ok {
		return l.Label()
	}
	return observe.KindLock
}

// holdObs is what a hold record keeps for its observer. It is made by the
// first observed acquisition that uses the record, so a hold record of a
// Client without an observer stays as small as it was.
type holdObs struct {
	kind  string    // the kind of the lock that made the record
	since time.Time // when the current hold began
}

// lock names the lock of h in events. c.mu is held, or h is on the
// watchdog (then h.obs no longer changes).
func (h *hold) lock() observe.Lock {
	return observe.Lock{Kind: h.obs.kind, Name: h.key.name}
}

// acquireObs is what an acquisition keeps for its observer and logger.
type acquireObs struct {
	lock      observe.Lock
	start     time.Time
	waitSince time.Time // set while the call counts as a waiter
	outage    time.Time // when the current run of transient failures began
	retries   int       // attempts that failed in the current run
}

// acquireStart tells the observer that a's call starts, for owner, and
// makes the context it returns the call's. Acquire calls it before it
// derives its contexts from ctx.
func (ob *observer) acquireStart(a *acquisition, owner string) context.Context {
	a.obs.lock = observe.Lock{Kind: label(a.m.kind), Name: a.m.name}
	a.obs.start = time.Now()
	if ob.o == nil {
		return a.ctx
	}
	ev := observe.Acquire{Lock: a.obs.lock, Owner: owner, Wait: a.wait}
	if !a.renew {
		ev.Lease = a.lease
	}
	if ctx := ob.o.AcquireStart(a.ctx, ev); ctx != nil {
		a.ctx, a.call = ctx, ctx
	}
	return a.ctx
}

// acquire runs a.run and tells the observer how the call ended (Acquire
// hands over to it once a has its hold record).
func (ob *observer) acquire(a *acquisition) (int64, bool, error) {
	m := a.m
	m.core.mu.Lock()
	if a.h.obs == nil {
		a.h.obs = &holdObs{kind: a.obs.lock.Kind}
	}
	m.core.mu.Unlock()
	at, err := a.run()
	if ob.o != nil {
		ev := observe.Acquire{Lock: a.obs.lock, Owner: a.h.key.owner, Wait: a.wait,
			Duration: time.Since(a.obs.start), Err: err}
		if !a.renew {
			ev.Lease = a.lease
		}
		switch {
		case at.Acquired:
			ev.Outcome = observe.OutcomeAcquired
		case err == nil,
			a.lastErr == nil && a.ctx.Err() != nil && errors.Is(err, a.ctx.Err()):
			ev.Outcome = observe.OutcomeNotAcquired
		default:
			ev.Outcome = observe.OutcomeError
		}
		ob.o.AcquireEnd(a.ctx, ev)
	}
	return at.Token, at.Acquired, err
}

// waiting is called each time the wait loop is about to wait: the first
// time, the call starts counting as a waiter.
func (a *acquisition) waiting() {
	if ob := a.m.core.obs; ob != nil && ob.o != nil && a.obs.waitSince.IsZero() {
		a.obs.waitSince = time.Now()
		ob.o.WaitStart(a.ctx, observe.Wait{Lock: a.obs.lock, Owner: a.h.key.owner})
	}
}

// waited is called when the call ends: a waiter stops counting as one.
func (a *acquisition) waited() {
	if !a.obs.waitSince.IsZero() {
		a.m.core.obs.o.WaitEnd(a.ctx, observe.Wait{Lock: a.obs.lock, Owner: a.h.key.owner,
			Waited: time.Since(a.obs.waitSince)})
		a.obs.waitSince = time.Time{}
	}
}

// retrying is called when a waiting call's attempt failed transiently and
// will be retried: the first failure of a run is logged at WARN, the
// retries are not.
func (a *acquisition) retrying(err error) {
	ob := a.m.core.obs
	if ob == nil || ob.log == nil {
		return
	}
	a.obs.retries++
	if !a.obs.outage.IsZero() {
		return
	}
	a.obs.outage = time.Now()
	ob.log.LogAttrs(a.ctx, slog.LevelWarn, "relock: Redis is failing; the wait for the lock keeps retrying",
		slog.String("lock", a.m.name), slog.String("kind", label(a.m.kind)), slog.String("owner", a.h.key.owner),
		slog.Duration("retry_every", retryBackoff), slog.Any("error", err))
}

// answered is called when an attempt got an answer from Redis: after a run
// of failures, the recovery is logged at INFO.
func (a *acquisition) answered() {
	if a.obs.outage.IsZero() {
		return
	}
	a.m.core.obs.log.LogAttrs(a.ctx, slog.LevelInfo, "relock: Redis answers again; the wait for the lock goes on",
		slog.String("lock", a.m.name), slog.String("kind", label(a.m.kind)), slog.String("owner", a.h.key.owner),
		slog.Duration("outage", time.Since(a.obs.outage)), slog.Int("failed_attempts", a.obs.retries))
	a.obs.outage, a.obs.retries = time.Time{}, 0
}

// holdStartLocked notes the start of h's hold and returns the event to
// report once c.mu is released. c.mu is held.
func (ob *observer) holdStartLocked(h *hold) observe.Hold {
	if ob == nil {
		return observe.Hold{}
	}
	h.obs.since = time.Now()
	if ob.o == nil {
		return observe.Hold{}
	}
	return observe.Hold{Lock: h.lock(), Owner: h.key.owner}
}

// holdStarted reports e, from holdStartLocked.
func (ob *observer) holdStarted(e observe.Hold) {
	if e.Owner != "" {
		ob.o.HoldStart(e)
	}
}

// holdEndLocked returns the end of h's hold, to report with holdEnded once
// c.mu is released. A hold that ends after Close began is not reported:
// Close reported it as closed. c.mu is held.
func (ob *observer) holdEndLocked(h *hold, outcome observe.Outcome, cause error) observe.Hold {
	if ob == nil || h.core.CheckOpen() != nil {
		return observe.Hold{}
	}
	return observe.Hold{Lock: h.lock(), Owner: h.key.owner,
		Outcome: outcome, Held: time.Since(h.obs.since), Err: cause}
}

// holdEnded reports e, from holdEndLocked; a loss is logged at ERROR.
func (ob *observer) holdEnded(e observe.Hold) {
	if e.Owner == "" {
		return
	}
	if ob.log != nil && e.Outcome == observe.OutcomeLost {
		ob.log.LogAttrs(context.Background(), slog.LevelError, "relock: lock lost",
			slog.String("lock", e.Lock.Name), slog.String("kind", e.Lock.Kind), slog.String("owner", e.Owner),
			slog.Duration("held", e.Held), slog.Any("error", e.Err))
	}
	if ob.o != nil {
		ob.o.HoldEnd(e)
	}
}

// closingLocked returns the ends of every hold that Close is ending.
// c.mu is held, and Close has begun.
func (ob *observer) closingLocked(c *Core) []observe.Hold {
	if ob == nil || ob.o == nil {
		return nil
	}
	var ends []observe.Hold
	for _, h := range c.holds {
		if h.want > 0 {
			ends = append(ends, observe.Hold{Lock: h.lock(), Owner: h.key.owner,
				Outcome: observe.OutcomeClosed, Held: time.Since(h.obs.since), Err: ErrClosed})
		}
	}
	return ends
}

// closed reports the ends from closingLocked.
func (ob *observer) closed(ends []observe.Hold) {
	for _, e := range ends {
		ob.o.HoldEnd(e)
	}
}

// renewFunc returns the watchdog's RenewFunc: renew, with each result
// reported. A renewal that found the hold gone is reported by
// renewalLost, when the watchdog reports the loss.
func (ob *observer) renewFunc(renew watchdog.RenewFunc) watchdog.RenewFunc {
	if ob == nil || ob.o == nil {
		return renew
	}
	return func(ctx context.Context, leases []*watchdog.Lease) []error {
		errs := renew(ctx, leases)
		for i, l := range leases {
			d, ok := l.Value().(Observed)
			if !ok {
				continue
			}
			lock, owner := d.ObservedAs()
			e := observe.Renewal{Lock: lock, Owner: owner, Outcome: observe.OutcomeOK}
			if i < len(errs) && errs[i] != nil {
				if errors.Is(errs[i], watchdog.ErrNotHeld) {
					continue
				}
				e.Outcome, e.Err = observe.OutcomeFailed, errs[i]
			}
			ob.o.Renewal(e)
		}
		return errs
	}
}

// Observed is implemented by the values given to Core.Watchdog.Add that
// the observer's renewal events name: the lock and the owner.
type Observed interface {
	ObservedAs() (observe.Lock, string)
}

// ObservedAs names the hold in renewal events.
func (r *renewal) ObservedAs() (observe.Lock, string) { return r.h.lock(), r.h.key.owner }

// renewalLost reports the watchdog's loss of h, unless Close has begun.
func (ob *observer) renewalLost(h *hold, cause error) {
	if ob == nil || ob.o == nil || h.core.CheckOpen() != nil {
		return
	}
	ob.o.Renewal(observe.Renewal{Lock: h.lock(), Owner: h.key.owner,
		Outcome: observe.OutcomeLost, Err: cause})
}

// unlock runs m.unlock with the observer told of its start and end.
func (ob *observer) unlock(ctx context.Context, m *Mutex) error {
	if ob.o == nil {
		return m.unlock(ctx)
	}
	owner, _, _ := m.holder(ctx)
	ev := observe.Release{Lock: observe.Lock{Kind: label(m.kind), Name: m.name}, Owner: owner}
	start := time.Now()
	if owner != "" {
		m.core.mu.Lock()
		if h := m.core.holds[holdKey{m.name, m.suffix, owner}]; h != nil && h.want > 0 {
			ev.Held = start.Sub(h.obs.since)
		}
		m.core.mu.Unlock()
	}
	if octx := ob.o.ReleaseStart(ctx, ev); octx != nil {
		ctx = octx
	}
	err := m.unlock(ctx)
	ev.Duration, ev.Err = time.Since(start), err
	switch {
	case err == nil:
		ev.Outcome = observe.OutcomeReleased
	case errors.Is(err, ErrNotHeld):
		ev.Outcome = observe.OutcomeNotHeld
	default:
		ev.Outcome = observe.OutcomeError
	}
	ob.o.ReleaseEnd(ctx, ev)
	return err
}
