package lockcore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/relock-go/relock/internal/backoff"
	"github.com/relock-go/relock/observe"
)

// NoLimit is the wait of Lock and LockLease: until the context ends.
const NoLimit time.Duration = -1

// RetryBackoff is how long a waiting call sleeps after a transient
// failure (see RetryableFailure), for every kind.
const RetryBackoff = 100 * time.Millisecond

// Acquire takes the lock for the owner in ctx (or a fresh anonymous owner),
// waiting up to wait (NoLimit: until ctx ends; 0: one attempt). lease 0
// means the watchdog lease. Arguments other than the owner are assumed
// checked. It returns (token, true, nil) on success, (0, false, nil) when
// the wait ended with ctx live, and an error otherwise; after an error or
// a false result the owner holds no more than it held before, and nothing
// of the call is left in Redis (no level won unseen, no place in a queue)
// unless Redis could not be reached to take it back.
func (m *Mutex) Acquire(ctx context.Context, wait, lease time.Duration) (int64, bool, error) {
	if err := m.check(); err != nil {
		return 0, false, err
	}
	owner, named, err := m.contextOwner(ctx)
	if err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, notAcquired(err)
	}
	// The call's state and its wait loop's, in one value from a pool:
	// nothing keeps it once the call returned.
	a := acquisitions.Get().(*acquisition)
	defer a.free()
	a.m, a.renew, a.lease = m, lease == 0, lease
	a.stamp = -1 // no grantees entry yet (0 is a stamp)
	if named {
		a.h = m.core.enter(m, owner)
	} else {
		a.h = m.core.enterAnon(m)
		a.anon = true
	}
	defer m.core.leave(a.h)
	a.w = Wait{Ctx: ctx, Limit: wait, Lock: observe.Lock{Kind: label(m.kind), Name: m.name}, Owner: a.h.key.owner,
		Lease: lease, Acquire: true}
	if m.suffix == "" {
		// The waiter in its wait record is the hold's field: the record
		// shares its string.
		a.w.Field = a.h.field
	}
	leaseArg := m.core.watchdogArg
	if a.renew {
		a.lease = m.core.WatchdogTimeout
	} else {
		leaseArg = strconv.FormatInt(Millis(lease), 10)
	}
	if m.core.obs != nil {
		m.core.mu.Lock()
		if a.h.obs == nil {
			a.h.obs = &holdObs{}
		}
		a.h.obs.kind = a.w.Lock.Kind
		m.core.mu.Unlock()
	}
	a.leaseArg = leaseArg
	ok, err := m.core.Wait(&a.w, a)
	return a.token, ok, err
}

// acquisitions are the states of calls of Mutex.Acquire that returned.
var acquisitions = sync.Pool{New: func() any { return new(acquisition) }}

// free puts a back in the pool, cleared.
func (a *acquisition) free() {
	if a.abandoned {
		return // a release still refers to its offer: not reused
	}
	*a = acquisition{}
	acquisitions.Put(a)
}

// acquisition is one call of Mutex.Acquire: the Waiter of a lock. A
// waiting call keeps it while it sleeps: it is kept small (its Request
// is made when needed, see req).
type acquisition struct {
	w        Wait
	m        *Mutex
	h        *hold
	lease    time.Duration
	leaseArg string // the lease as the scripts take it

	token   int64 // of the hold, once acquired
	spins   int   // failed attempts of a Spinner kind so far
	renew   bool  // the lease is the watchdog's
	joined  bool  // counted in the Client's registration for wake-ups
	unknown bool  // an attempt may have won unseen: settled at the end
	anon    bool  // the acquisition is anonymous (see anonKey)
	// stamp and slots: the call's latest grantees entry (see grantee),
	// -1 for none.
	stamp int64
	slots uint64
	// abandoned: the call ended while a release carried its offer (see
	// landGrant): the value is left to the collector, not reused.
	abandoned bool
	// queued orders the Client's waiting calls by their first attempt
	// (Core.queued), 0 before it: a QueueKind's waiters join its queue
	// in about that order (see addOffer).
	queued uint64
	offer  *grantOffer // the call's open or claimed grant offer (see grant.go)
	offerV grantOffer  // the value offer points to
}

// anonKey is the lock's key of the Client's anonymous holds (Mutex.anonKey)
// for an anonymous acquisition, else "".
func (a *acquisition) anonKey() string {
	if a.anon {
		return a.m.anonKey
	}
	return ""
}

// req is the call's Request: the lock, the owner's field and the lease;
// Join once the call joined the Client's registration for wake-ups, and
// Waiting when the call waits (its limit is not 0).
func (a *acquisition) req() Request {
	m := a.m
	return Request{Core: m.core, Name: m.name, Field: a.h.field, LeaseMs: Millis(a.lease), LeaseArg: a.leaseArg,
		Chan: m.channel, Wakers: m.wakers, Waiting: a.w.Limit != 0, Join: a.joined}
}

// WaitChannel is the kind's wait channel.
func (a *acquisition) WaitChannel() string { return a.m.kind.WaitChannel(a.req()) }

// Attempt makes one attempt (see attempt) and bounds the sleep after a
// failed one.
func (a *acquisition) Attempt(w *Wait) (Outcome, error) {
	at, err := a.attempt(w)
	if err != nil {
		return Outcome{}, err
	}
	a.token = at.Token
	o := Outcome{Done: at.Acquired, Retry: at.Retry}
	if s, ok := a.m.kind.(Spinner); ok && !o.Done {
		// A spin waiter hears no release: the Client's releases of the
		// lock do not grant it to other waiters meanwhile.
		a.m.core.noteRefused(a.m)
		// The kind's backoff, or the holder's lease if it ends sooner.
		a.spins++
		if d := s.SpinDelay(a.spins); o.Retry <= 0 || d < o.Retry {
			o.Retry = d
		}
	}
	if a.joined || a.mutable() {
		o.Retry = wakeRetry(o.Retry)
	}
	return o, nil
}

// granted ends a sleep when another goroutine of the owner is granted a
// level: the call then re-enters at once.
// An anonymous owner is the call's alone: no other goroutine can be
// granted a level of it, and the call waits on no channel for that.
func (a *acquisition) granted() <-chan struct{} {
	if a.anon {
		return nil
	}
	return a.h.grantedChan()
}

// mutable reports whether the call's Client may let an unlock message on
// the lock's channel pass (wake-one, see wake.go): a waiter that did not
// join (its Client's wake channel could not be subscribed) then tries
// again as often as a registered one.
func (a *acquisition) mutable() bool {
	_, ok := a.m.kind.(wakeOner)
	return ok && a.m.core.wakeOne
}

// join registers the Client for the lock's wake-ups, with wake-one on,
// before the call subscribes to the lock's channel: the Client's wake
// channel is subscribed before an attempt registers the Client, so that
// no wake-up sent to it is lost. From then on the call's attempts
// register the Client, and the Client lets the unlock messages of
// wake-one releases that woke another registered Client pass (see
// wake.go).
func (a *acquisition) join(ctx context.Context) {
	if a.mutable() && !a.joined && a.m.core.subscribeHook == nil && !a.m.core.sharingRDB() {
		if a.m.joinWake(ctx) {
			a.joined = true
		}
	}
}

// End is the end of the call. One that did not acquire settles an attempt
// that may have won unseen (the owner's count goes back to what it was
// granted) and leaves the kind's queue.
func (a *acquisition) End(w *Wait, done bool) {
	if !done && w.Limit == 0 && w.tried {
		a.m.core.noteRefused(a.m)
	}
	if !done {
		if a.unknown {
			a.settle(w.Ctx)
		}
		if a.w.Limit != 0 {
			a.abandon(w.Ctx)
		}
	}
	// A grant parked for an attempt of the call is given back (see
	// earlyGrant): one that came with the call's success is spent.
	a.dropEarly()
	if a.joined {
		a.m.leaveWake(w.Ctx, !done)
	}
}

// attempt makes one attempt, its Redis calls serialized with the owner's
// other calls on the lock: a re-entry when the owner holds levels, else a
// first acquisition (also after a re-entry finds the hold gone). The script
// runs on the call's script context (Wait.ScriptContext), which the wait
// limit does not end: a level won after the wait ran out is kept, and the
// call succeeds. If the caller's context ends while the script is in
// flight, its reply is still awaited for a moment, and a level it won is
// given back at once, after it, as if the attempt had not been made; when
// no reply comes, the outcome is unknown and the call's end settles it.
func (a *acquisition) attempt(w *Wait) (Attempt, error) {
	if err := a.h.acquire(w.Turn()); err != nil {
		return Attempt{}, w.Over()
	}
	defer a.h.release()
	for {
		if err := w.Over(); err != nil {
			return Attempt{}, err
		}
		from, gen := a.h.state()
		r := a.req()
		// A re-entry on a fixed lease takes the hold off the watchdog:
		// stop renewing first, or a renewal in flight could land after the
		// script and cut the fixed lease down to the watchdog's.
		paused := from > 0 && !a.renew && a.h.stopRenewal()
		var at Attempt
		var err error
		sent := time.Now()
		if from > 0 {
			r.Target = from + 1
			at, err = a.m.kind.Reenter(w.ScriptContext(), r)
		} else {
			// The owner's latest attempt (see earlyGrant): none until
			// grantee records its entry.
			a.stamp = -1
			a.h.attempting.Store(0)
			if a.queued == 0 && r.Waiting {
				a.queued = a.m.core.queued.Add(1)
			}
			r.Grantee = a.grantee(w.ScriptContext(), sent)
			at, err = a.m.kind.Acquire(w.ScriptContext(), r)
		}
		if hook := a.m.core.refusedHook; hook != nil && err == nil && !at.Acquired && r.Grantee != "" {
			err = hook()
		}
		if paused && (err != nil || !at.Acquired || w.Call().Err() != nil || at.Unsynced != nil) {
			// The hold stays as it was, on the watchdog.
			a.h.rearm(gen)
		}
		if err != nil {
			if outcomeUnknown(err) {
				a.unknown = true
				if from > 0 {
					a.h.leaseMayBeSet(gen, a.lease) // the re-entry may have run
				}
			}
			if over := w.Cancelled(); over != nil {
				return Attempt{}, over
			}
			return Attempt{}, a.m.core.closedOr(ScriptError(a.m.layoutKind(), "acquire", a.m.name, err))
		}
		a.unknown = false // the script answered: Redis is as it says
		if !at.Acquired {
			if from > 0 {
				// A re-entry found the hold gone: it was lost. Report it,
				// and acquire anew.
				a.h.lose(gen, a.h.loss(a.h.goneWhy("re-entry"), nil))
				continue
			}
			return at, nil
		}
		if over := w.Cancelled(); over != nil {
			a.giveBackWon(w.Ctx, from)
			return Attempt{}, over
		}
		if at.Unsynced != nil {
			a.giveBackWon(w.Ctx, from)
			return Attempt{}, notAcquired(fmt.Errorf("%q: %w", a.m.name, at.Unsynced))
		}
		anon := a.anonKey()
		if from > 0 {
			anon = ""
		}
		switch err := a.h.grant(from, gen, a.lease, r.LeaseArg, a.renew, anon, sent); {
		case errors.Is(err, errHoldChanged):
			continue // lost while re-entered: the next round acquires anew
		case err != nil:
			a.giveBackWon(w.Ctx, from)
			return Attempt{}, notAcquired(err)
		}
		return at, nil
	}
}

// giveBackWon is giveBack for a level an attempt of this call won and
// will not keep. A first acquisition (from 0) that won while a release's
// grant to the owner is on its way (see hold.granting) may have taken
// over the granted field: taking it back would take the lock from the
// call the grant is for, which would then return holding nothing in
// Redis. Its outcome is then left to the call's end, which settles the
// count at what the owner holds once the grant has landed.
func (a *acquisition) giveBackWon(ctx context.Context, from int) {
	if from == 0 {
		c := a.m.core
		c.mu.Lock()
		landing := a.h.granting > 0
		c.mu.Unlock()
		if landing {
			a.unknown = true
			return
		}
	}
	a.giveBack(ctx, from)
}

// giveBack takes back a level this call won and will not keep: the
// owner's count goes back to from. The caller holds the call slot. When
// Redis does not answer in time, the call's end settles it.
func (a *acquisition) giveBack(ctx context.Context, from int) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	ctx = WithoutReplicaWait(ctx)
	r := a.req()
	r.Target = from
	if _, err := a.m.release(ctx, a.h, r, false); err != nil {
		a.unknown = true
	} else {
		a.unknown = false
	}
}

// settle takes back a level an attempt may have won unseen (its reply was
// lost): the owner's count goes back to what it was granted, whatever
// Redis did with the attempt. It tries for a short while; if Redis does
// not answer, the Client goes on trying in the background, until it
// answers, the level's lease would have ended, or Close.
func (a *acquisition) settle(ctx context.Context) {
	ctx, cancel := cleanupContext(ctx)
	r := a.req()
	err := a.m.settleOnce(ctx, a.h, r, settleAny)
	cancel()
	if err != nil {
		a.m.core.settleLater(a.m, a.h, r, time.Now().Add(time.Duration(r.LeaseMs)*time.Millisecond))
	}
}

// settleAny, as settleOnce's ended, brings the count to the owner's
// whatever hold the owner has.
const settleAny = ^uint64(0)

// settleOnce brings field's count in Redis back to what the owner was
// granted. With ended other than settleAny it settles only hold ended
// (its gen), which ended without Redis confirming it: once a newer hold
// of the owner began, it sends nothing (that hold's acquisition took over
// what was left, and a release would reset its lease). It returns the
// error that kept Redis from answering (nil: settled).
func (m *Mutex) settleOnce(ctx context.Context, h *hold, r Request, ended uint64) error {
	if err := h.acquire(ctx); err != nil {
		return err
	}
	defer h.release()
	c := h.core
	c.mu.Lock()
	if ended != settleAny && (h.gen != ended || h.want > 0) {
		c.mu.Unlock()
		return nil
	}
	if h.granting > 0 {
		// A release granted, or may grant, the owner a level want does
		// not show yet: setting the count to want would take it away
		// from the call that gets it.
		c.mu.Unlock()
		return errGrantLanding
	}
	h.settling++
	r.Target = h.want
	gen, lease := h.gen, h.lease
	if h.want > 0 {
		r.LeaseMs, r.LeaseArg = Millis(h.lease), h.leaseArg
	}
	c.mu.Unlock()
	_, err := m.release(ctx, h, r, true)
	c.mu.Lock()
	h.settling--
	c.mu.Unlock()
	if r.Target > 0 {
		h.leaseMayBeSet(gen, lease) // a release that leaves levels resets the lease
	}
	return err
}

// settleLater runs settleOnce in the background until it succeeds, until
// (after which the level it would take back has expired anyway), or Close.
func (c *Core) settleLater(m *Mutex, h *hold, r Request, until time.Time) {
	c.mu.Lock()
	if c.CheckOpen() != nil {
		c.mu.Unlock()
		return
	}
	h.users++ // the record stays while the settling goes on
	c.background.Add(1)
	c.mu.Unlock()
	go c.settling(m, h, r, until, settleAny)
}

// settling is the background part of settleLater and settleEnded; the
// caller counted it in h.users and c.background. It gives up early on an
// error reply that a resend cannot cure (a script error, WRONGTYPE).
func (c *Core) settling(m *Mutex, h *hold, r Request, until time.Time, ended uint64) {
	defer c.background.Done()
	defer c.leave(h)
	ctx, cancel := context.WithDeadline(c.root, until)
	defer cancel()
	for {
		// Each try is short, so that the owner's next call on the lock
		// (which waits for the call slot) is not held up for long.
		try, cancelTry := context.WithTimeout(ctx, time.Second)
		err := m.settleOnce(try, h, r, ended)
		cancelTry()
		if err == nil {
			return
		}
		if _, isReply := replyOf(err); isReply && !notRun(err) {
			return
		}
		if !backoff.Sleep(ctx.Done(), RetryBackoff) {
			return
		}
	}
}

// reserveSettleLocked counts a settling of h's current hold (see
// settleReserved) in h.users and c.background before the hold ends, so
// that the record is not reused for another lock meanwhile, and returns
// that hold's gen; ok is false when the Client is closed or there is no
// lock to release (a permit). m is the lock (nil: h.mutex). c.mu is held.
func (c *Core) reserveSettleLocked(h *hold, m *Mutex) (s settleReservation, ok bool) {
	if m == nil {
		m = h.mutex
	}
	if m == nil || c.CheckOpen() != nil {
		return settleReservation{}, false
	}
	h.users++
	c.background.Add(1)
	return settleReservation{m: m, gen: h.gen}, true
}

// settleReservation is a settling reserved by reserveSettleLocked.
type settleReservation struct {
	m   *Mutex
	gen uint64
}

// settleReserved settles the hold of h that the caller has just ended
// (ended false: it did not end it, and the reservation is dropped)
// without Redis confirming it: its last Unlock had no reply, or no
// renewal answered before its lease ran out. Its field may still be in
// Redis, and would stay for its lease, or for as long as another hold on
// the same hash is renewed (the owner's other side of a read-write lock:
// a lost write lock would keep every other reader and writer out while
// its owner reads). The owner's count is 0 as far as the Client knows,
// so the settling removes the field, waking the waiters if that frees the
// lock, as soon as Redis answers, and stops once a newer hold of the
// owner began (see settleOnce). It goes on until until, the latest the
// hold may last in Redis (see settleUntilLocked: its lease, as the Client
// last set it, or a lease from its last renewal), or until Close,
// whichever comes first, and gives up at once on an error reply that a
// resend cannot cure.
func (c *Core) settleReserved(h *hold, s settleReservation, ended bool, until time.Time) {
	if !ended {
		c.background.Done()
		c.leave(h)
		return
	}
	r := Request{Core: c, Name: s.m.name, Field: h.field, LeaseMs: Millis(c.WatchdogTimeout),
		LeaseArg: c.watchdogArg, Chan: s.m.channel, Wakers: s.m.wakers}
	go c.settling(s.m, h, r, until, s.gen)
}

// abandon tells the kind that a waiting acquisition gave up. It is not
// retried: a fair lock drops a waiter that stopped refreshing its place.
func (a *acquisition) abandon(ctx context.Context) {
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	_ = a.m.kind.Abandon(ctx, a.req())
}

// cleanupTimeout is how long the clean-up at the end of a failed
// acquisition may hold its caller up: a round trip to a healthy server
// takes far less; a server that does not answer in time is left to the
// background settlement (settleLater).
const cleanupTimeout = 100 * time.Millisecond

// cleanupContext returns the context of the clean-up at the end of an
// acquisition: detached from ctx, for cleanupTimeout.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}
