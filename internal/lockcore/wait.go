package lockcore

import (
	"context"
	"errors"
	"fmt"
	"github.com/relock-go/relock"
	"time"

	"github.com/relock-go/relock/observe"
)

// The wait loop, written once for every kind: a lock's acquisition (every
// lock kind), a semaphore's Acquire and a latch's Await are each a Waiter,
// and Core.Wait runs them.
//
// After a failed attempt the loop subscribes to the kind's wait channel
// (one subscription per channel per Client, shared by its local waiters),
// attempts again at once, so that a release in between is not missed, and
// then sleeps until a wake-up, the bound the attempt returned, the wait
// limit, the context's end, Close, or (for a lock) a grant to the same
// owner on another goroutine, and attempts again.
//
// A kind whose WaitChannel is "" (the spin lock) is not subscribed: it
// sleeps only the bound its attempt returned (its backoff), or until the
// wait limit, the context's end or Close.
//
// The bound is whatever could end the wait without a message: a holder's
// lease that runs out (a crashed holder publishes nothing), a queued
// waiter's deadline, the time to refresh a place in a queue. Every script
// that shortens a lease a waiter may be sleeping on publishes, so that the
// waiter looks again (see package lua).
//
// A wake-up is one local waiter's to use: a waiter that took one and ends
// without using it (its context ended, its attempt failed) hands it on to
// the next local waiter of the channel; so does a waiter whose attempt was
// refused although what it waits for is free for another (a semaphore's
// permit held back for a queued waiter ahead of it), and one that took
// what it waited for and saw more of it left.
//
// A wait limit ends only the sleeps between attempts (and a subscription
// in progress), never an attempt: a call with a limit makes, however short
// the limit, at least the attempt a call with limit 0 makes, and an
// attempt sent before the limit ran out is answered, its reply deciding. A
// grant that arrives after the limit ran out is the call's success: the
// caller asked for what it got. The caller's context still ends an
// attempt, and a grant that arrives after it ended, or after Close began,
// is given back.
//
// A waiting call rides out transient failures (a dropped connection, a
// failover, LOADING, READONLY, BUSY, OOM): it retries every RetryBackoff
// until the wait ends, and the error it then returns includes the last
// failure. A single attempt (limit 0) returns the failure at once.

// Outcome is what one attempt of a Waiter found.
type Outcome struct {
	// Done: the call got what it waited for (the lock, a permit, the
	// latch's opening).
	Done bool
	// Retry is how long to sleep at most before the next attempt when no
	// wake-up comes; 0 means only a wake-up, the wait limit, the context
	// or Close ends the sleep.
	Retry time.Duration
	// PassOn: what the call waits for is free for another local waiter
	// (after a refusal), or more of it is left (after Done); a wake-up
	// the call took goes on to the next local waiter.
	PassOn bool
}

// Waiter is one waiting call of a kind, as the wait loop sees it.
type Waiter interface {
	// Attempt makes one attempt. It returns w.Over() when that is not nil
	// before it sends anything, and w.Cancelled() when that is not nil
	// once it has been answered (after giving back what it won). Its
	// Redis calls run on w.Call(), which the wait limit does not end.
	Attempt(w *Wait) (Outcome, error)
	// WaitChannel is the pub/sub channel on which the kind's wake-ups
	// arrive; "" for a kind that is never woken and is not subscribed
	// (its attempts then return a Retry > 0).
	WaitChannel() string
	// End is called once, when the call ends, before its subscription is
	// left: done reports whether it got what it waited for. A kind takes
	// back here what an unanswered attempt may have won and leaves its
	// queue.
	End(w *Wait, done bool)
}

// Wait is one waiting call: what the caller sets before Core.Wait, and the
// state of the loop.
type Wait struct {
	// Ctx is the caller's context (an observer may give it values).
	Ctx context.Context
	// Limit is how long the call waits: NoLimit until Ctx ends, 0 for one
	// attempt.
	Limit time.Duration
	// Lock names the lock, semaphore or latch in errors, logs and events.
	Lock observe.Lock
	// Owner is the owner (a semaphore's permit ID) in logs and events.
	Owner string
	// Lease is a fixed lease, 0 for the watchdog's, in events.
	Lease time.Duration
	// Acquire: the call is an acquisition, told to the observer
	// (AcquireStart and AcquireEnd, WaitStart and WaitEnd).
	Acquire bool
	// OnMessage: a wake-up brought by a message on the channel ends the
	// wait (a latch's opening: the count may have been set again since).
	OnMessage bool
	// Field is the waiter in its wait record, as a lock's hash names a
	// holder ("<clientID>:<owner>", see waitrecord.go); "" makes it from
	// the owner in Ctx, else Owner, else a made-up owner.
	Field string

	core     *Core
	k        Waiter
	until    context.Context // Ctx, or, when the wait is limited, one that ends with it (cause errWaitOver)
	tried    bool            // an attempt was made
	script   context.Context // see ScriptContext; nil until asked for in an attempt
	unscript func() bool     // stops script's end after Call's (context.AfterFunc's stop)
	cancel   func()          // ends script
	sub      waiter
	// confirm, while set, is sub's subscription, not yet confirmed: a
	// subscription slower than the call's next attempt goes on while the
	// call sleeps, and its confirmation brings an attempt.
	confirm pending
	woken   bool        // a wake-up was taken and no attempt has used it yet
	failing bool        // the last attempt failed transiently
	lastErr error       // the last transient failure
	obs     *acquireObs // with an observer or a logger only
	rec     *waitRecord // the call's wait record, once written
	// waitFrom is when the call's first attempt was refused (zero until
	// then); recordAt, when its record is due (zero once it was asked
	// for, or none is); recordAsked, that it was (see recordDue).
	waitFrom    time.Time
	recordAt    time.Time
	recordAsked bool
	// timer ends the sleeps: at the bound an attempt returned, at
	// recordAt, or at detectAt, the next look for a deadlock (zero:
	// none), whichever comes first. One timer serves all three: a waiting
	// call keeps one.
	timer    *time.Timer
	detectAt time.Time
	// written, while set, is the record's write's channel: a look for a
	// deadlock came due before the write was answered, and is made at
	// its reply (see look).
	written <-chan struct{}
}

// Call is the context of an attempt's calls to Redis: Ctx. The wait limit
// does not end it: an attempt that was sent is answered.
func (w *Wait) Call() context.Context { return w.Ctx }

// Waiting reports whether the call waits (its limit is not 0): a queue
// keeps its place then.
func (w *Wait) Waiting() bool { return w.Limit != 0 }

// granter is implemented by a Waiter that can also be ended by a grant to
// the same owner on another goroutine (a lock's re-entry).
type granter interface{ granted() <-chan struct{} }

// grantee is implemented by a Waiter that a release of its own Client can
// hand what it waits for while it sleeps (a lock's acquisition, see
// grant.go): offerGrant offers the sleeping call (nil: it cannot be
// granted to), and returns a channel closed when a release that claimed
// the offer answered; offerEmpty then reports that it granted nothing
// (the call offers itself again and sleeps on); landGrant ends the offer,
// waiting for a release that claimed it, and takes the grant (keep) or
// gives it back.
type grantee interface {
	offerGrant(offer bool) <-chan struct{}
	offerEmpty() bool
	landGrant(w *Wait, keep bool) (got bool, err error)
}

// joiner is implemented by a Waiter that registers its Client for
// wake-ups just before it subscribes (wake-one).
type joiner interface{ join(ctx context.Context) }

// Wait runs the wait loop of k for w. It returns (true, nil) when k got
// what it waited for, (false, nil) when the wait limit ended the call
// while w.Ctx is live, and an error otherwise: one that matches
// relock.ErrNotAcquired and the context's error when w.Ctx ended, relock.ErrNotAcquired
// and relock.ErrClosed when Close did. The limit ends only the sleeps
// between attempts: the first attempt is made however short the limit,
// and the reply of an attempt that was sent decides.
func (c *Core) Wait(w *Wait, k Waiter) (bool, error) {
	c.waitBegins()
	defer c.waitEnds()
	w.core, w.k = c, k
	if c.obs != nil {
		c.obs.waitStart(w)
	}
	w.until = w.Ctx
	if w.Limit > 0 {
		var cancel context.CancelFunc
		w.until, cancel = context.WithTimeoutCause(w.Ctx, w.Limit, errWaitOver)
		defer cancel()
	}
	done, err := w.run()
	w.endScript()
	if c.obs != nil {
		c.obs.waitEnd(w, done, err)
	}
	return done, err
}

func (w *Wait) run() (bool, error) {
	defer func() {
		if w.timer != nil {
			w.timer.Stop()
		}
	}()
	// A Waiter without a channel (a spin lock's) never subscribes: it
	// sleeps the bound its attempts give, which must be > 0.
	channel := w.k.WaitChannel()
	if w.Limit != 0 && channel != "" && w.core.Hub.Has(channel) {
		// Others wait here already: subscribing costs no round trip, and
		// saves the attempt made after subscribing.
		w.subscribeEarly(channel)
	}
	for {
		o, err := w.k.Attempt(w)
		w.endScript()
		w.tried = true
		switch {
		case err == nil:
			w.answered()
			w.failing = false
			woken := w.woken
			w.woken = false // the attempt used the wake-up
			if o.Done {
				return w.finish(true, o.PassOn, nil)
			}
			if w.Limit == 0 {
				// The one attempt was refused: the wait is over, as a
				// limit that ran out (the context may have ended while
				// the attempt was in flight: limit fails with it).
				return w.limit()
			}
			if woken && o.PassOn {
				w.sub.PassOn()
			}
		case errors.Is(err, errWaitOver):
			return w.limit()
		case w.Limit != 0 && w.transient(err):
			// The wake-up, if any, was not used: it stays taken.
			w.failing, w.lastErr = true, err
			w.retrying(err)
			o = Outcome{Retry: RetryBackoff}
		default:
			return w.finish(false, false, w.failure(err))
		}
		w.waiting()
		w.recordDue(time.Now())
		if w.sub == nil && channel != "" {
			// Subscribe after the first failed attempt, then attempt
			// again at once: a release in between is not missed.
			err := w.subscribe(o.Retry)
			switch {
			case err == nil:
				continue
			case errors.Is(err, errWaitOver):
				return w.limit()
			case !w.transient(err):
				return w.finish(false, false, w.failure(err))
			case errors.Is(err, errSubscribeSlow) && w.confirm != nil:
				// The subscription goes on past the kind's next look;
				// the call sleeps until its confirmation or that look.
				// Slow is not failing: no outage is reported, and a
				// wait that runs out meanwhile ends without an error.
			default:
				w.failing, w.lastErr = true, err
				w.retrying(err)
			}
			if o.Retry <= 0 || o.Retry > RetryBackoff {
				o.Retry = RetryBackoff
			}
		}
		var retryAt time.Time // zero: no bound
		if o.Retry > 0 {
			retryAt = time.Now().Add(o.Retry)
		}
		var wake, granted, confirmed <-chan struct{}
		if w.sub != nil {
			wake = w.sub.C()
		}
		if w.confirm != nil {
			confirmed = w.confirm.Done()
		}
		if g, ok := w.k.(granter); ok {
			granted = g.granted()
		}
		gr, canGrant := w.k.(grantee)
		var offered <-chan struct{}
		if canGrant {
			// Only a call subscribed to the lock's channel offers
			// itself: a release grants while the channel has one
			// subscriber, taken for its own Client's, which without
			// this subscription may be another Client's waiter.
			offered = gr.offerGrant(channel != "" && w.sub != nil && w.confirm == nil)
		}
	sleep:
		for {
			timerC := w.arm(retryAt)
			select {
			case <-wake:
				if err := w.sub.Err(); err != nil {
					// The channel, subscribed again after a lost
					// connection, was refused (an ACL changed): the
					// call would hear nothing more. It ends with the
					// refusal, as a call refused at its subscription.
					w.sub.Leave(false)
					w.sub, w.confirm = nil, nil
					return w.finish(false, false, w.failure(w.core.closedOr(redisError("subscribe", w.Lock.Name, err))))
				}
				if w.OnMessage && w.sub.Heard() {
					return w.finish(true, false, nil)
				}
				w.woken = true
			case <-granted:
			case <-confirmed:
				// The subscription is made (attempt again: a release
				// before it was not heard), or failed (attempt, then
				// subscribe again), or was refused (an error reply:
				// the call ends with it, as when refused in subscribe).
				if err := w.subscribed(); err != nil {
					if !w.transient(err) {
						return w.finish(false, false, w.failure(err))
					}
					w.failing, w.lastErr = true, err
					w.retrying(err)
				}
			case <-offered:
				if gr.offerEmpty() {
					// The release that claimed the call granted
					// nothing (another Client waits): sleep on.
					offered = gr.offerGrant(true)
					continue sleep
				}
			case <-timerC:
				now := time.Now()
				w.recordDue(now)
				if !w.detectAt.IsZero() && !now.Before(w.detectAt) {
					// The wait lasted the detection delay: look for a
					// cycle through it, and again a delay later.
					if err := w.look(); err != nil {
						return w.finish(false, false, err)
					}
				}
				if retryAt.IsZero() || now.Before(retryAt) {
					continue sleep
				}
			case <-w.written:
				if err := w.look(); err != nil {
					return w.finish(false, false, err)
				}
				continue sleep
			case <-w.until.Done():
				if w.Ctx.Err() == nil {
					if canGrant {
						// A grant on its way is the call's, as an
						// attempt's is that was sent before the limit.
						if got, err := gr.landGrant(w, true); got || err != nil {
							return w.finish(got, false, err)
						}
					}
					return w.limit()
				}
				return w.finish(false, false, notAcquired(Join(w.Ctx.Err(), w.lastErr)))
			case <-w.core.closed:
				return w.finish(false, false, notAcquired(relock.ErrClosed))
			}
			break
		}
		if w.timer != nil {
			w.timer.Stop()
		}
		if canGrant {
			if got, err := gr.landGrant(w, true); got || err != nil {
				return w.finish(got, false, err)
			}
		}
	}
}

// arm sets the call's timer to the earliest of retryAt, the record's due
// time and the next look for a deadlock (a zero time is none), and returns
// its channel; nil when there is none. The timer is made on the first
// sleep that needs it: most calls never sleep.
func (w *Wait) arm(retryAt time.Time) <-chan time.Time {
	at := retryAt
	for _, t := range [...]time.Time{w.recordAt, w.detectAt} {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	if at.IsZero() {
		if w.timer != nil {
			w.timer.Stop()
		}
		return nil
	}
	d := time.Until(at)
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	return w.timer.C
}

// look makes the look for a deadlock that is due, and sets the next one a
// delay later. When the record's write has not been answered yet, the
// look is put off until its reply (w.written): with a detection delay no
// longer than RecordAfter, the record and the first look are due at once,
// and a look without the record skips (see detect), which would find a
// cycle a whole delay late.
func (w *Wait) look() error {
	w.detectAt, w.written = time.Time{}, nil
	if !w.rec.isAnswered() {
		// Closed at once when the reply came meanwhile.
		w.written = w.rec.writtenChan()
		return nil
	}
	err := w.detect()
	w.detectAt = time.Now().Add(w.core.waits.after)
	return err
}

// finish is the one way out of run: the kind ends the call (End), and the
// subscription is left, handing on a wake-up the call took and did not
// use, or one more when passOn is set.
func (w *Wait) finish(done, passOn bool, err error) (bool, error) {
	if g, ok := w.k.(grantee); ok {
		// A grant still on its way to a call that ends is given back.
		_, _ = g.landGrant(w, false)
	}
	w.k.End(w, done)
	if w.sub != nil {
		w.sub.Leave(w.woken || passOn)
		w.sub, w.confirm = nil, nil
	}
	w.detectAt, w.recordAt, w.written = time.Time{}, time.Time{}, nil
	w.unrecord(done)
	w.waited()
	return done, err
}

// limit ends a call whose wait ran out: without an error, unless the wait
// ended in an outage (that is an error, not a lock held by someone else).
func (w *Wait) limit() (bool, error) {
	if err := w.Cancelled(); err != nil {
		// The wait's end may be the context's, ended since the call
		// looked at it (a Lock's wait ends only so): the call fails
		// with it, and never returns "not acquired" without an error.
		return w.finish(false, false, w.failure(err))
	}
	if w.failing {
		return w.finish(false, false, notAcquired(w.lastErr))
	}
	return w.finish(false, false, nil)
}

// scriptGrace is how long a script in flight when the caller's context
// ends may still take to answer.
const scriptGrace = 100 * time.Millisecond

// ScriptContext returns the context of the call's scripts. On a rueidis
// client with several connections, a script in flight when the caller's
// context ends must still be answered before anything is sent to undo
// it: a give-back sent at once, on another connection, might reach the
// server before the script it undoes, and leave the level it won behind.
// There the scripts run on a context that carries the call's values and
// ends scriptGrace after the caller's context, so that what a script won
// is given back after it, in order (when no reply comes in that time, the outcome is unknown,
// and the call's end settles it). On a client with one connection (as
// NewClient makes), and for a call whose context cannot end, the call's
// own context serves: commands reach the server in the order they were
// sent.
//
// The context is made for one attempt: the wait loop ends it when the
// attempt returns (a call that sleeps between attempts keeps none).
func (w *Wait) ScriptContext() context.Context {
	switch {
	case w.script != nil:
	case w.core.onePipeline || w.Call().Done() == nil:
		w.script = w.Call()
	default:
		ctx, cancel := context.WithCancel(context.WithoutCancel(w.Call()))
		w.unscript = context.AfterFunc(w.Call(), func() { time.AfterFunc(scriptGrace, cancel) })
		w.script, w.cancel = ctx, cancel
	}
	return w.script
}

// endScript ends the context ScriptContext made for an attempt, once the
// attempt returned.
func (w *Wait) endScript() {
	if w.cancel != nil {
		w.unscript()
		w.cancel()
		w.unscript, w.cancel = nil, nil
	}
	w.script = nil
}

// Over is asked before an attempt is sent: it returns nil while the call
// may send one, errWaitOver when its wait ran out, and the error of a
// call whose context ended. The call's first attempt may always be sent
// while the context is live, however short the wait: a wait > 0 makes at
// least the attempt wait 0 makes.
func (w *Wait) Over() error {
	if err := w.Cancelled(); err != nil {
		return err
	}
	if w.tried && w.until.Err() != nil {
		return errWaitOver
	}
	return nil
}

// Cancelled is asked once an attempt has been answered: it returns the
// error of a call whose context ended or whose Client was closed, and nil
// while the context is live and the Client open, whether or not the wait
// ran out meanwhile. An attempt sent before the wait ended is not undone
// by its end: a grant it brings back is kept, and the call succeeds. One
// that crosses the end of the context, or Close, is given back: a wait in
// progress at Close ends with relock.ErrClosed, and what it won would
// otherwise be held by a caller whose Client can no longer release it
// (a counting semaphore's permits, which have no lease, for good).
func (w *Wait) Cancelled() error {
	if err := w.Ctx.Err(); err != nil {
		return notAcquired(err)
	}
	if w.core.CheckOpen() != nil {
		return notAcquired(relock.ErrClosed)
	}
	return nil
}

// Turn is the context an attempt waits on for its turn to be sent (the
// owner's other calls on the lock go first): Ctx for the call's first
// attempt, which is made however short the wait; one that also ends with
// the wait for the next ones.
func (w *Wait) Turn() context.Context {
	if w.tried {
		return w.until
	}
	return w.Ctx
}

// failure is the error a call returns for err, an attempt's failure: when
// the context ended, it says so, and what failed before.
func (w *Wait) failure(err error) error {
	if w.core.CheckOpen() != nil {
		// The Client closed under the call: what failed then (a closing
		// connection, a closed hub) is a consequence.
		if w.Limit == 0 {
			return relock.ErrClosed
		}
		return notAcquired(relock.ErrClosed)
	}
	if w.Ctx.Err() == nil {
		return err
	}
	if !errors.Is(err, relock.ErrNotAcquired) {
		err = notAcquired(Join(w.Ctx.Err(), err))
	}
	if w.lastErr != nil && w.lastErr != err {
		err = Join(err, w.lastErr)
	}
	return err
}

// subscribe makes the call's subscription to the kind's wait channel,
// waiting no longer than the wait limit and, when the kind must look
// again (retry > 0) before then, that.
func (w *Wait) subscribe(retry time.Duration) error {
	ctx := w.until
	if retry > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, retry)
		defer cancel()
	}
	if j, ok := w.k.(joiner); ok {
		j.join(ctx)
	}
	sub, p, err := w.core.beginSubscribe(ctx, w.k.WaitChannel())
	if err == nil && p != nil {
		w.sub, w.confirm = sub, p
		select {
		case <-p.Done():
			return w.subscribed()
		case <-ctx.Done():
			// The subscription goes on while the call attempts and
			// sleeps: its confirmation brings the next attempt. Given
			// up at each bound, a subscription slower than the bound
			// (thousands of channels at once on a busy client) would
			// never be made.
			err = ctx.Err()
		}
	}
	if err != nil {
		if over := w.Over(); over != nil {
			return over
		}
		if ctx.Err() != nil {
			// Our own bound ended it: try again after the next attempt.
			return fmt.Errorf("%w: %w", errSubscribeSlow, err)
		}
		return w.core.closedOr(redisError("subscribe", w.Lock.Name, err))
	}
	w.sub = sub
	return nil
}

// subscribeEarly joins, before the call's first attempt, the
// subscription of a channel that the hub has already (others of the
// Client wait on it). It does not wait for a subscription still under
// way (the hub has the channel from the moment a waiter registers):
// the first attempt is made at once, and the confirmation brings another
// (see run). A failure is left to the loop, which subscribes after the
// first attempt as when the hub did not have the channel.
func (w *Wait) subscribeEarly(channel string) {
	if j, ok := w.k.(joiner); ok {
		j.join(w.until)
	}
	sub, p, err := w.core.beginSubscribe(w.until, channel)
	if err == nil {
		w.sub, w.confirm = sub, p
	}
}

// subscribed takes the outcome of the subscription in w.confirm, once
// done: on failure the call's waiter leaves, and the next attempt's
// failure subscribes again. A wake-up the call took (its waiter may be
// woken before the subscription is confirmed: passed on by another
// waiter, or by the hub after a lost connection) and has not used goes
// on to the next local waiter as it leaves: without a waiter, the call
// could neither pass it on nor hand it on at its end.
func (w *Wait) subscribed() error {
	err := w.confirm.Err()
	w.confirm = nil
	if err == nil {
		return nil
	}
	w.sub.Leave(w.woken)
	w.sub, w.woken = nil, false
	return w.core.closedOr(redisError("subscribe", w.Lock.Name, err))
}

// transient reports whether a failure may be retried by a waiting call:
// the Client is open, the caller's context is live, and the failure is a
// connection error, an error reply that means the script did not run, or
// a slow subscription; never a script's refusal of the name (a name
// conflict, a wrong kind), which the wait would not see end.
func (w *Wait) transient(err error) bool {
	if w.Ctx.Err() != nil || w.core.CheckOpen() != nil || errors.Is(err, relock.ErrInvalidArgument) ||
		errors.Is(err, relock.ErrReplicaSync) || errors.Is(err, relock.ErrNameConflict) ||
		errors.Is(err, relock.ErrWrongKind) {
		return false
	}
	return errors.Is(err, errSubscribeSlow) || RetryableFailure(err)
}

// errWaitOver is the cause of the end of a limited wait.
var errWaitOver = errors.New("relock: the wait is over")

// errSubscribeSlow: a subscription did not complete before the wait limit
// or the kind's next look.
var errSubscribeSlow = errors.New("relock: subscription not confirmed in time")

// NotAcquired is the error of a wait that ended with cause: it matches
// relock.ErrNotAcquired and cause.
func NotAcquired(cause error) error { return notAcquired(cause) }
