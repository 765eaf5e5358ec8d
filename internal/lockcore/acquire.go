package lockcore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/backoff"
)

// NoLimit is the wait of Lock and LockLease: until the context ends.
const NoLimit time.Duration = -1

// RetryBackoff is how long a waiting call sleeps after a transient
// failure (see RetryableFailure), for every kind.
const RetryBackoff = 100 * time.Millisecond

// retryBackoff is RetryBackoff.
const retryBackoff = RetryBackoff

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
	owner, named, err := ContextOwner(ctx)
	if err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, notAcquired(err)
	}
	a := acquisition{m: m, ctx: ctx, call: ctx, wait: wait, renew: lease == 0, lease: lease}
	if !named {
		owner = AnonymousOwner()
		a.anonKey = m.anonKey
	}
	leaseArg := m.core.watchdogArg
	if a.renew {
		a.lease = m.core.WatchdogTimeout
	} else {
		leaseArg = strconv.FormatInt(Millis(lease), 10)
	}
	if m.core.obs != nil {
		ctx = m.core.obs.acquireStart(&a, owner)
	}
	if wait > 0 {
		// The wait bounds the calls to Redis too.
		var cancel context.CancelFunc
		a.call, cancel = context.WithTimeoutCause(ctx, wait, errWaitOver)
		defer cancel()
	}
	a.h = m.core.enter(m.name, m.suffix, owner, m.kind, m.shared)
	defer m.core.leave(a.h)
	a.r = Request{Core: m.core, Name: m.name, Field: a.h.field, LeaseMs: Millis(a.lease), LeaseArg: leaseArg,
		Chan: m.channel, Wakers: m.wakers, Waiting: wait != 0}
	if m.core.obs != nil {
		return m.core.obs.acquire(&a)
	}
	at, err := a.run()
	return at.Token, at.Acquired, err
}

// errWaitOver is the cause of the end of a TryLock's wait.
var errWaitOver = errors.New("relock: the wait is over")

// acquisition is one call of Acquire: its arguments and the state of its
// wait.
type acquisition struct {
	m   *Mutex
	h   *hold
	ctx context.Context // the caller's
	// call is the context of the calls to Redis: the caller's, or, when
	// the wait is limited, one that ends with it (cause errWaitOver).
	call    context.Context
	r       Request
	wait    time.Duration
	lease   time.Duration
	renew   bool
	anonKey string // set for an anonymous acquisition

	sub     waiter
	joined  bool  // counted in the Client's registration for wake-ups
	woken   bool  // a wake-up was taken and no attempt has used it yet
	unknown bool  // an attempt may have won unseen: settled at the end
	lastErr error // the last transient failure
	failing bool  // the last attempt failed transiently

	obs acquireObs // for the Client's observer and logger (observe.go)
}

// run is the acquire-wait loop every lock kind uses. After a failed
// attempt it subscribes to the kind's wait channel, attempts again (so an
// unlock between the two is never missed), then sleeps until a
// notification, the holder's remaining lease, the wait limit, ctx's end,
// Close, or a grant to the same owner on another goroutine, and attempts
// again.
//
// A waiting call rides out transient failures (a dropped connection, a
// failover, LOADING, READONLY, BUSY, OOM): it retries every retryBackoff
// until the wait ends, and the error it then returns includes the last
// failure. A single attempt (wait 0) returns the failure at once.
//
// Every way out goes through finish.
func (a *acquisition) run() (Attempt, error) {
	var retry *time.Timer // made on the first sleep: most calls never sleep
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	if a.wait != 0 && a.m.core.Hub.Has(a.m.kind.WaitChannel(a.r)) {
		// Others wait for the lock here already: subscribing costs no
		// round trip, and saves the attempt made after subscribing.
		_ = a.subscribe(0)
	}
	for {
		at, err := a.attempt()
		switch {
		case err == nil:
			a.answered()
			a.woken, a.failing = false, false // the wake-up has been used
			if at.Acquired || a.wait == 0 {
				return a.finish(at, nil)
			}
		case errors.Is(err, errWaitOver):
			return a.limit()
		case a.r.Waiting && a.transient(err):
			// The wake-up, if any, was not used: it stays taken.
			a.failing, a.lastErr = true, err
			a.retrying(err)
			at = Attempt{Retry: retryBackoff}
		default:
			return a.finish(Attempt{}, a.failure(err))
		}
		a.waiting()
		granted := a.h.grantedChan()
		if a.sub == nil {
			// Subscribe after the first failed attempt, then attempt
			// again at once: an unlock in between is not missed.
			if err := a.subscribe(at.Retry); err == nil {
				continue
			} else if errors.Is(err, errWaitOver) {
				return a.limit()
			} else if !a.transient(err) {
				return a.finish(Attempt{}, a.failure(err))
			} else {
				a.failing, a.lastErr = true, err
				a.retrying(err)
				if at.Retry <= 0 || at.Retry > retryBackoff {
					at.Retry = retryBackoff
				}
			}
		}
		if a.joined {
			at.Retry = wakeRetry(at.Retry)
		}
		var retryC <-chan time.Time
		if at.Retry > 0 {
			if retry == nil {
				retry = time.NewTimer(at.Retry)
			} else {
				retry.Reset(at.Retry)
			}
			retryC = retry.C
		}
		var wake <-chan struct{}
		if a.sub != nil {
			wake = a.sub.C()
		}
		select {
		case <-wake:
			a.woken = true
		case <-granted:
		case <-retryC:
		case <-a.call.Done():
			if a.ctx.Err() == nil {
				return a.limit()
			}
			return a.finish(Attempt{}, notAcquired(Join(a.ctx.Err(), a.lastErr)))
		case <-a.m.core.closed:
			return a.finish(Attempt{}, notAcquired(ErrClosed))
		}
		if retry != nil {
			retry.Stop()
		}
	}
}

// limit ends a call whose wait ran out: without the lock and without an
// error, unless the wait ended in an outage (that is an error, not a
// lock held by someone else).
func (a *acquisition) limit() (Attempt, error) {
	if a.failing {
		return a.finish(Attempt{}, notAcquired(a.lastErr))
	}
	return a.finish(Attempt{}, nil)
}

// over returns nil while the call may go on, errWaitOver when its wait ran
// out, and the error of a call whose context ended.
func (a *acquisition) over() error {
	if a.call.Err() == nil {
		return nil
	}
	if err := a.ctx.Err(); err != nil {
		return notAcquired(err)
	}
	return errWaitOver
}

// failure is the error a call returns for err, an attempt's failure:
// when the context ended, it says so, and what failed before.
func (a *acquisition) failure(err error) error {
	if a.m.core.CheckOpen() != nil {
		// The Client closed under the call: what failed then (a closing
		// connection, a closed hub) is a consequence.
		if a.wait == 0 {
			return ErrClosed
		}
		return notAcquired(ErrClosed)
	}
	if a.ctx.Err() == nil {
		return err
	}
	if !errors.Is(err, ErrNotAcquired) {
		err = notAcquired(Join(a.ctx.Err(), err))
	}
	if a.lastErr != nil && a.lastErr != err {
		err = Join(err, a.lastErr)
	}
	return err
}

// finish is the one way out of run. A call that did not acquire settles an
// attempt that may have won unseen (the owner's count goes back to what
// it was granted), leaves the kind's queue, and hands on a wake-up it took
// and did not use, so that another local waiter gets it.
func (a *acquisition) finish(at Attempt, err error) (Attempt, error) {
	if !at.Acquired {
		if a.unknown {
			a.settle()
		}
		if a.r.Waiting {
			a.abandon()
		}
	}
	if a.joined {
		a.m.leaveWake()
	}
	if a.sub != nil {
		a.sub.Leave(a.woken)
		a.sub = nil
	}
	a.waited()
	return at, err
}

// subscribe makes the call's subscription to the kind's wait channel,
// waiting no longer than the wait limit and, when the kind must refresh
// (retry > 0) before then, its next refresh.
func (a *acquisition) subscribe(retry time.Duration) error {
	ctx := a.call
	if retry > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, retry)
		defer cancel()
	}
	if _, ok := a.m.kind.(wakeOner); ok && a.m.core.wakeOne && !a.joined && a.m.core.subscribeHook == nil {
		// With wake-one, the Client's wake channel first, so that it is
		// subscribed before an attempt registers the Client, then the
		// lock's channel, so that the Client is counted among that
		// channel's subscribers only a moment before it is registered.
		// From now on the call's attempts register the Client.
		if a.m.joinWake(ctx) {
			a.joined, a.r.Join = true, true
		}
	}
	sub, err := a.m.core.subscribe(ctx, a.m.kind.WaitChannel(a.r))
	if err != nil {
		if over := a.over(); over != nil {
			return over
		}
		if ctx.Err() != nil {
			// Our own bound ended it: try again after the next attempt.
			return fmt.Errorf("%w: %w", errSubscribeSlow, err)
		}
		return a.m.core.closedOr(redisError("subscribe", a.m.name, err))
	}
	a.sub = sub
	return nil
}

// errSubscribeSlow: a subscription did not complete before the wait limit
// or the kind's next refresh.
var errSubscribeSlow = errors.New("relock: subscription not confirmed in time")

// transient reports whether a failure may be retried by a waiting call:
// the Client is open, ctx is live, and the failure is a connection error,
// an error reply that means the script did not run, or a slow
// subscription.
func (a *acquisition) transient(err error) bool {
	if a.ctx.Err() != nil || a.m.core.CheckOpen() != nil || errors.Is(err, ErrInvalidArgument) ||
		errors.Is(err, ErrReplicaSync) {
		return false
	}
	return errors.Is(err, errSubscribeSlow) || outcomeUnknown(err) || notRun(err)
}

// attempt makes one attempt, its Redis calls serialized with the owner's
// other calls on the lock: a re-entry when the owner holds levels, else a
// first acquisition (also after a re-entry finds the hold gone). The script
// runs on the call's context; if that ends while the script is in flight,
// its outcome is unknown and the call's end settles it, and if the lock was
// won but the context ended meanwhile, the level is given back at once, as
// if the attempt had not been made.
func (a *acquisition) attempt() (Attempt, error) {
	if err := a.h.acquire(a.call); err != nil {
		return Attempt{}, a.over()
	}
	defer a.h.release()
	for {
		if err := a.over(); err != nil {
			return Attempt{}, err
		}
		from, gen := a.h.state()
		r := a.r
		// A re-entry on a fixed lease takes the hold off the watchdog:
		// stop renewing first, or a renewal in flight could land after the
		// script and cut the fixed lease down to the watchdog's.
		paused := from > 0 && !a.renew && a.h.stopRenewal()
		var at Attempt
		var err error
		if from > 0 {
			r.Target = from + 1
			at, err = a.m.kind.Reenter(a.call, r)
		} else {
			at, err = a.m.kind.Acquire(a.call, r)
		}
		if paused && (err != nil || !at.Acquired || a.call.Err() != nil || at.Unsynced != nil) {
			// The hold stays as it was, on the watchdog.
			a.h.rearm(gen)
		}
		if err != nil {
			if outcomeUnknown(err) {
				a.unknown = true
			}
			if over := a.over(); over != nil {
				return Attempt{}, over
			}
			return Attempt{}, a.m.core.closedOr(redisError("acquire", a.m.name, err))
		}
		a.unknown = false // the script answered: Redis is as it says
		if !at.Acquired {
			if from > 0 {
				// A re-entry found the hold gone: it was lost. Report it,
				// and acquire anew.
				a.h.lose(gen, fmt.Errorf("%w: %q: the hold was gone when its owner re-entered it", ErrLockLost, a.m.name))
				continue
			}
			return at, nil
		}
		if over := a.over(); over != nil {
			a.giveBack(from)
			return Attempt{}, over
		}
		if at.Unsynced != nil {
			a.giveBack(from)
			return Attempt{}, notAcquired(fmt.Errorf("%q: %w", a.m.name, at.Unsynced))
		}
		anon := a.anonKey
		if from > 0 {
			anon = ""
		}
		switch err := a.h.grant(from, gen, a.lease, r.LeaseArg, a.renew, anon); {
		case errors.Is(err, errHoldChanged):
			continue // lost while re-entered: the next round acquires anew
		case err != nil:
			a.giveBack(from)
			return Attempt{}, notAcquired(err)
		}
		return at, nil
	}
}

// giveBack takes back a level this call won and will not keep: the
// owner's count goes back to from. The caller holds the call slot. When
// Redis does not answer in time, the call's end settles it.
func (a *acquisition) giveBack(from int) {
	ctx, cancel := cleanupContext(a.ctx)
	defer cancel()
	r := a.r
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
func (a *acquisition) settle() {
	ctx, cancel := cleanupContext(a.ctx)
	done := a.m.settleOnce(ctx, a.h, a.r)
	cancel()
	if !done {
		a.m.core.settleLater(a.m, a.h, a.r, time.Now().Add(time.Duration(a.r.LeaseMs)*time.Millisecond))
	}
}

// settleOnce brings field's count in Redis back to what the owner was
// granted; it reports whether Redis answered.
func (m *Mutex) settleOnce(ctx context.Context, h *hold, r Request) bool {
	if h.acquire(ctx) != nil {
		return false
	}
	defer h.release()
	h.core.mu.Lock()
	r.Target = h.want
	if h.want > 0 {
		r.LeaseMs, r.LeaseArg = Millis(h.lease), h.leaseArg
	}
	h.core.mu.Unlock()
	_, err := m.release(ctx, h, r, true)
	return err == nil
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
	go func() {
		defer c.background.Done()
		defer c.leave(h)
		ctx, cancel := context.WithDeadline(c.root, until)
		defer cancel()
		for {
			// Each try is short, so that the owner's next call on the lock
			// (which waits for the call slot) is not held up for long.
			try, cancelTry := context.WithTimeout(ctx, time.Second)
			done := m.settleOnce(try, h, r)
			cancelTry()
			if done {
				return
			}
			if !backoff.Sleep(ctx.Done(), retryBackoff) {
				return
			}
		}
	}()
}

// abandon tells the kind that a waiting acquisition gave up. It is not
// retried: a fair lock drops a waiter that stopped refreshing its place.
func (a *acquisition) abandon() {
	ctx, cancel := cleanupContext(a.ctx)
	defer cancel()
	_ = a.m.kind.Abandon(ctx, a.r)
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

// notAcquired is the error of a wait that ended with cause.
func notAcquired(cause error) error {
	return Join(ErrNotAcquired, cause)
}

// replyOf returns the error reply in err, if err is one.
func replyOf(err error) (*rueidis.RedisError, bool) {
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		return re, true
	}
	return nil, false
}

// IsReply reports whether err is an error reply of the server (a script's
// outcome is then known), not a lost connection or a timeout.
func IsReply(err error) bool {
	_, ok := replyOf(err)
	return ok
}

// RetryableFailure reports whether a waiting call may retry after err: a
// lost connection or a timeout (the outcome is unknown), or an error
// reply that means the script did not run (the server was loading, busy,
// read-only, out of memory, cut off from its master, or not serving the
// slot yet).
func RetryableFailure(err error) bool { return outcomeUnknown(err) || notRun(err) }

// outcomeUnknown reports whether a failed script may have run: a
// connection error or a timeout, not an error reply.
func outcomeUnknown(err error) bool {
	_, isReply := replyOf(err)
	return !isReply
}

// notRun reports whether err is an error reply that means the script did
// not run (or stopped before writing): the server was busy, loading,
// read-only or out of memory, or not serving the slot yet.
func notRun(err error) bool {
	re, ok := replyOf(err)
	if !ok {
		return false
	}
	if re.IsLoading() || re.IsTryAgain() || re.IsClusterDown() || re.IsNoScript() {
		return true
	}
	switch errorCode(re) { // rueidis has no predicates for these
	case "READONLY", "BUSY", "OOM", "MASTERDOWN":
		return true
	}
	return false
}

// isBusy reports whether err is a BUSY reply: a script is running.
func isBusy(err error) bool {
	re, ok := replyOf(err)
	return ok && errorCode(re) == "BUSY"
}

// errorCode is the first word of an error reply: LOADING, READONLY, ...
func errorCode(re *rueidis.RedisError) string {
	code, _, _ := strings.Cut(re.Error(), " ")
	return code
}
