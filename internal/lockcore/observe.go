package lockcore

import (
	"context"
	"errors"
	"github.com/relock-go/relock"
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

// acquireObs is what a waiting call keeps for its observer and logger.
type acquireObs struct {
	start     time.Time
	waitSince time.Time // set while the call counts as a waiter
	outage    time.Time // when the current run of transient failures began
	retries   int       // attempts that failed in the current run
}

// waitStart tells the observer that w's call starts (an acquisition), and
// gives w the context the observer returns. Core.Wait calls it before it
// derives its contexts from w.Ctx.
func (ob *observer) waitStart(w *Wait) {
	w.obs = &acquireObs{start: time.Now()}
	if ob.o == nil || !w.Acquire {
		return
	}
	ev := observe.Acquire{Lock: w.Lock, Owner: w.Owner, Wait: w.Limit, Lease: w.Lease}
	if ctx := ob.o.AcquireStart(w.Ctx, ev); ctx != nil {
		w.Ctx = ctx
	}
}

// waitEnd tells the observer how w's call ended.
func (ob *observer) waitEnd(w *Wait, done bool, err error) {
	if ob.o == nil || !w.Acquire {
		return
	}
	ev := observe.Acquire{Lock: w.Lock, Owner: w.Owner, Wait: w.Limit, Lease: w.Lease,
		Duration: time.Since(w.obs.start), Err: err}
	switch {
	case done:
		ev.Outcome = observe.OutcomeAcquired
	case err == nil,
		w.lastErr == nil && w.Ctx.Err() != nil && errors.Is(err, w.Ctx.Err()):
		ev.Outcome = observe.OutcomeNotAcquired
	default:
		ev.Outcome = observe.OutcomeError
	}
	ob.o.AcquireEnd(w.Ctx, ev)
}

// waiting is called each time the wait loop is about to wait: the first
// time, the call starts counting as a waiter.
func (w *Wait) waiting() {
	if ob := w.core.obs; ob != nil && ob.o != nil && w.Acquire && w.obs.waitSince.IsZero() {
		w.obs.waitSince = time.Now()
		ob.o.WaitStart(w.Ctx, observe.Wait{Lock: w.Lock, Owner: w.Owner})
	}
}

// waited is called when the call ends: a waiter stops counting as one.
func (w *Wait) waited() {
	if w.obs != nil && !w.obs.waitSince.IsZero() {
		w.core.obs.o.WaitEnd(w.Ctx, observe.Wait{Lock: w.Lock, Owner: w.Owner,
			Waited: time.Since(w.obs.waitSince)})
		w.obs.waitSince = time.Time{}
	}
}

// retrying is called when a waiting call's attempt failed transiently and
// will be retried: the first failure of a run is logged at WARN, the
// retries are not.
func (w *Wait) retrying(err error) {
	ob := w.core.obs
	if ob == nil || ob.log == nil {
		return
	}
	w.obs.retries++
	if !w.obs.outage.IsZero() {
		return
	}
	w.obs.outage = time.Now()
	ob.log.LogAttrs(w.Ctx, slog.LevelWarn, "relock: Redis is failing; the wait keeps retrying",
		slog.String("lock", w.Lock.Name), slog.String("kind", w.Lock.Kind), slog.String("owner", w.Owner),
		slog.Duration("retry_every", RetryBackoff), slog.Any("error", err))
}

// answered is called when an attempt got an answer from Redis: after a run
// of failures, the recovery is logged at INFO.
func (w *Wait) answered() {
	if w.obs == nil || w.obs.outage.IsZero() {
		return
	}
	w.core.obs.log.LogAttrs(w.Ctx, slog.LevelInfo, "relock: Redis answers again; the wait goes on",
		slog.String("lock", w.Lock.Name), slog.String("kind", w.Lock.Kind), slog.String("owner", w.Owner),
		slog.Duration("outage", time.Since(w.obs.outage)), slog.Int("failed_attempts", w.obs.retries))
	w.obs.outage, w.obs.retries = time.Time{}, 0
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
				Outcome: observe.OutcomeClosed, Held: time.Since(h.obs.since), Err: relock.ErrClosed})
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

// seenLocked is the watchdog's loss of h as renewalLost reports it, read
// while c.mu is held (the zero value when there is no observer).
func (ob *observer) seenLocked(h *hold) observe.Renewal {
	if ob == nil || ob.o == nil || h.obs == nil {
		return observe.Renewal{}
	}
	return observe.Renewal{Lock: h.lock(), Owner: h.key.owner, Outcome: observe.OutcomeLost}
}

// renewalLost reports the watchdog's loss seen (see seenLocked), with its
// cause. The caller does not report a loss once Close has begun.
func (ob *observer) renewalLost(seen observe.Renewal, cause error) {
	if ob == nil || ob.o == nil || seen.Outcome == "" {
		return
	}
	seen.Err = cause
	ob.o.Renewal(seen)
}

// unlock runs m.unlock with the observer told of its start and end.
func (ob *observer) unlock(ctx context.Context, m *Mutex) error {
	if ob.o == nil {
		return m.unlock(ctx)
	}
	owner, _, _ := m.holder(ctx)
	return ob.release(ctx, observe.Lock{Kind: label(m.kind), Name: m.name}, owner,
		m.core.heldFor(m.holdKey(owner)), m.unlock)
}

// heldFor is how long the hold of key has been held, 0 if it is not.
func (c *Core) heldFor(key holdKey) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.holds[key]; h != nil && h.want > 0 && h.obs != nil {
		return time.Since(h.obs.since)
	}
	return 0
}

// release runs fn, a release of owner's hold of lock (held for held),
// with the observer told of its start and end. ob.o is not nil.
func (ob *observer) release(ctx context.Context, lock observe.Lock, owner string, held time.Duration,
	fn func(context.Context) error) error {
	ev := observe.Release{Lock: lock, Owner: owner, Held: held}
	start := time.Now()
	if octx := ob.o.ReleaseStart(ctx, ev); octx != nil {
		ctx = octx
	}
	err := fn(ctx)
	ev.Duration, ev.Err = time.Since(start), err
	switch {
	case err == nil:
		ev.Outcome = observe.OutcomeReleased
	case errors.Is(err, relock.ErrNotHeld):
		ev.Outcome = observe.OutcomeNotHeld
	default:
		ev.Outcome = observe.OutcomeError
	}
	ob.o.ReleaseEnd(ctx, ev)
	return err
}
