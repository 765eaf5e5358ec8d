package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/pubsub"
)

// acquisition is one call of Acquire or TryAcquire: its arguments and the
// state of its wait.
type acquisition struct {
	s       *Semaphore
	ctx     context.Context
	raw, id string // the permit ID every attempt asks for
	wait    time.Duration
	lease   time.Duration
	renew   bool
	start   time.Time

	sub     *pubsub.Waiter
	woken   bool  // a wake-up was taken and no attempt has used it yet
	joined  bool  // an attempt asked to join the queue
	unknown bool  // an attempt may have taken the permit unseen
	failing bool  // the last attempt failed transiently
	lastErr error // the last transient failure

	obs *acquireObs // nil without an observer
}

// acquire is the wait loop of Acquire (wait < 0: until ctx ends) and
// TryAcquire, arguments checked but the name. After a failed attempt it
// subscribes to the semaphore's channel, attempts again (so a release in
// between is not missed), then sleeps until a notification, the end of
// the earliest lease, its time to join the queue or refresh its place
// there, the wait limit, ctx's end or Close, and attempts again. Every
// attempt asks for the same permit ID, so a resent attempt takes at most
// one permit.
func (s *Semaphore) acquire(ctx context.Context, wait, lease time.Duration) (string, bool, error) {
	if err := s.check(); err != nil {
		return "", false, err
	}
	if err := ctx.Err(); err != nil {
		return "", false, notAcquired(err)
	}
	a := &acquisition{s: s, ctx: ctx, wait: wait, lease: lease, start: time.Now()}
	a.raw, a.id = newID()
	if lease == 0 {
		a.renew, a.lease = true, s.core.WatchdogTimeout
	}
	a.observeAcquire()
	id, ok, err := a.run()
	a.observed(ok, err)
	return id, ok, err
}

func (a *acquisition) run() (string, bool, error) {
	var limit <-chan time.Time
	if a.wait > 0 {
		t := time.NewTimer(a.wait)
		defer t.Stop()
		limit = t.C
	}
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	for {
		won, left, next, err := a.attempt()
		switch {
		case err == nil:
			a.woken, a.failing = false, false
			if won {
				return a.won(left)
			}
			if a.wait == 0 {
				return a.finish(nil)
			}
		case a.wait != 0 && a.ctx.Err() == nil && a.s.core.CheckOpen() == nil && lockcore.RetryableFailure(err):
			a.failing, a.lastErr = true, err
			next = retryBackoff
		case a.s.core.CheckOpen() != nil:
			return a.finish(notAcquired(lockcore.Join(ErrClosed, err)))
		default:
			return a.finish(a.failure(err))
		}
		a.waiting()
		if a.sub == nil {
			// Subscribe after the first failed attempt, then attempt
			// again at once: a release in between is not missed.
			sub, err := a.s.core.Hub.Subscribe(a.ctx, KeysOf(a.s.name).Channel)
			if err == nil {
				a.sub = sub
				continue
			}
			if a.s.core.CheckOpen() != nil || errors.Is(err, pubsub.ErrClosed) {
				return a.finish(notAcquired(ErrClosed))
			}
			if a.ctx.Err() != nil {
				return a.finish(a.failure(a.s.fail("subscribe", err)))
			}
			a.failing, a.lastErr = true, a.s.fail("subscribe", err)
			next = retryBackoff
		}
		next = a.sleep(next)
		var retryC <-chan time.Time
		if next > 0 {
			if retry == nil {
				retry = time.NewTimer(next)
			} else {
				retry.Reset(next)
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
		case <-retryC:
		case <-limit:
			if a.failing {
				return a.finish(notAcquired(a.lastErr))
			}
			return a.finish(nil)
		case <-a.ctx.Done():
			return a.finish(notAcquired(lockcore.Join(a.ctx.Err(), a.lastErr)))
		case <-a.s.core.Closed():
			return a.finish(notAcquired(ErrClosed))
		}
		if retry != nil {
			retry.Stop()
		}
	}
}

// sleep bounds the sleep after a failed attempt whose reply said next (0:
// until a notification): a queued waiter refreshes its place every
// RefreshInterval, and one that is not queued yet wakes when it is time
// to join.
func (a *acquisition) sleep(next time.Duration) time.Duration {
	bound := timing.refresh
	if !a.joined {
		bound = max(timing.queueAfter-time.Since(a.start), time.Millisecond)
	}
	if next <= 0 || next > bound {
		return bound
	}
	return next
}

// attempt runs the acquire script once. It reports whether the permit is
// held, and then the permits left; else how long until a lease or a
// queued waiter's deadline ends (0: none will). The script runs on a
// detached, bounded context: if ctx ends meanwhile and the permit was
// taken, it is given back and ctx's error returned.
func (a *acquisition) attempt() (won bool, left int64, next time.Duration, err error) {
	if err := a.ctx.Err(); err != nil {
		return false, 0, 0, notAcquired(err)
	}
	join := a.wait != 0 && (a.joined || time.Since(a.start) >= timing.queueAfter)
	flag := "0"
	if join {
		flag = "1"
		a.joined = true
	}
	k := KeysOf(a.s.name)
	sctx, cancel := a.scriptContext()
	res, unsynced := a.s.core.RunAcquire(sctx, lua.SemAcquire,
		[]string{k.Available, k.Leases, k.Channel, k.Queue, k.QueueDeadlines},
		[]string{a.s.core.PublishCommand(), a.raw, strconv.FormatInt(lockcore.Millis(a.lease), 10), flag,
			strconv.FormatInt(timing.waiterTimeout.Milliseconds(), 10)})
	cancel()
	vals, err := res.AsIntSlice()
	if err != nil {
		if !lockcore.IsReply(err) {
			a.unknown = true
		}
		return false, 0, 0, a.s.fail("acquire", err)
	}
	a.unknown = false
	if len(vals) != 2 {
		return false, 0, 0, fmt.Errorf("relock: acquire %q: unexpected reply %v", a.s.name, vals)
	}
	if vals[0] != 1 {
		if vals[1] < 0 {
			return false, 0, 0, nil
		}
		return false, 0, time.Duration(vals[1])*time.Millisecond + time.Millisecond, nil
	}
	switch {
	case a.ctx.Err() != nil:
		a.giveBack()
		return false, 0, 0, notAcquired(a.ctx.Err())
	case unsynced != nil:
		a.giveBack()
		return false, 0, 0, notAcquired(fmt.Errorf("%q: %w", a.s.name, unsynced))
	}
	return true, vals[1], 0, nil
}

// scriptContext bounds one script: detached from the caller's context
// (so a permit won is learned of and given back), for attemptTimeout, or
// for the time the caller has left plus a grace of a quarter of it
// (between 2ms and 100ms).
func (a *acquisition) scriptContext() (context.Context, context.CancelFunc) {
	now := time.Now()
	deadline := now.Add(attemptTimeout)
	if d, ok := a.ctx.Deadline(); ok {
		grace := min(max(d.Sub(now)/4, 2*time.Millisecond), 100*time.Millisecond)
		if d.Add(grace).Before(deadline) {
			deadline = d.Add(grace)
		}
	}
	return context.WithDeadline(context.WithoutCancel(a.ctx), deadline)
}

// won is the end of a call that holds its permit: the watchdog renews it
// (lease 0), and a wake-up goes on to the next local waiter while permits
// are left.
func (a *acquisition) won(left int64) (string, bool, error) {
	if a.renew {
		var o observe.Observer
		if a.obs != nil {
			o = a.obs.o
		}
		if err := registryOf(a.s.core).add(a.s.core, a.s.name, a.id, a.raw, o); err != nil {
			a.giveBack()
			return a.finish(notAcquired(err))
		}
	}
	if a.sub != nil {
		a.sub.Leave(left > 0)
		a.sub = nil
	}
	return a.id, true, nil
}

// giveBack releases the permit this call took and will not keep. When
// Redis does not answer, the call's end tries again.
func (a *acquisition) giveBack() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), cleanupTimeout)
	defer cancel()
	_, err := a.s.release(ctx, a.raw)
	a.unknown = err != nil
}

// finish is the way out of a call that did not acquire: a permit an
// attempt may have taken unseen is released, the queue is left, and a
// wake-up taken and not used goes to the next local waiter.
func (a *acquisition) finish(err error) (string, bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), cleanupTimeout)
	defer cancel()
	if a.unknown {
		_, _ = a.s.release(ctx, a.raw)
	}
	if a.joined {
		k := KeysOf(a.s.name)
		_ = lua.SemAbandon.Exec(ctx, a.s.core.RDB, []string{k.Available, k.Channel, k.Queue, k.QueueDeadlines},
			[]string{a.s.core.PublishCommand(), a.raw}).Error()
	}
	if a.sub != nil {
		a.sub.Leave(a.woken)
		a.sub = nil
	}
	return "", false, err
}

// failure is the error a call returns for err, an attempt's failure: when
// the context ended, it says so.
func (a *acquisition) failure(err error) error {
	if a.ctx.Err() == nil || errors.Is(err, ErrNotAcquired) {
		return err
	}
	return notAcquired(lockcore.Join(a.ctx.Err(), err))
}

// notAcquired is the error of a wait that ended with cause.
func notAcquired(cause error) error {
	return lockcore.Join(ErrNotAcquired, cause)
}
