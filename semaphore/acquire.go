package semaphore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
)

// acquire is Acquire (wait < 0: until ctx ends), TryAcquire and their
// Permit forms, arguments checked but the name: one waiting call through
// the Client's wait loop. Every attempt of a call asks for the same
// permit ID, so a resent attempt takes at most one permit. It returns the
// call, which says what was won, or nil.
func (s *Semaphore) acquire(ctx context.Context, wait, lease time.Duration) (*acquisition, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	holder, err := s.holder(ctx)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, lockcore.NotAcquired(err)
	}
	a := &acquisition{s: s, lease: lease, start: time.Now(), holder: holder}
	a.raw, a.id = newID()
	w := lockcore.Wait{Ctx: ctx, Limit: wait, Lock: observe.Lock{Kind: observe.KindSemaphore, Name: s.name},
		Owner: a.id, Lease: lease, Acquire: true}
	if lease == 0 {
		a.renew, a.lease = true, s.watchdogTimeout()
	}
	ok, err := s.core.Wait(&w, a)
	if !ok {
		return nil, err
	}
	return a, nil
}

// acquisition is one call of Acquire or TryAcquire: the semaphore's
// Waiter.
type acquisition struct {
	s       *Semaphore
	raw, id string // the permit ID every attempt asks for
	holder  string // who takes the permit, "<clientID>:<owner>"
	lease   time.Duration
	renew   bool
	start   time.Time
	joined  bool // an attempt asked to join the queue
	unknown bool // an attempt may have taken the permit unseen

	sent time.Time       // when the latest attempt was sent
	life context.Context // of the permit won on the watchdog lease
}

// WaitChannel is the semaphore's channel.
func (a *acquisition) WaitChannel() string { return KeysOf(a.s.name).Channel }

// Attempt runs the acquire script once. A permit taken on the watchdog
// lease is recorded as a hold of the Client (renewed, watched for loss)
// before the call returns. The script runs on a detached, bounded context
// (see scriptContext): if the caller's context ends meanwhile and the
// permit was taken, it is given back. The end of the wait does not undo
// an attempt that was sent: a permit it took is the call's.
//
// After a refusal the sleep is bounded by the earliest lease end and, for
// a queued waiter, a queued waiter's deadline (both returned by the
// script), by the time to refresh the waiter's place in the queue, or,
// for one not queued yet, the time to join it. A refusal while permits
// are available (held back for queued waiters ahead) passes the wake-up
// on; so does a success that leaves permits available.
func (a *acquisition) Attempt(w *lockcore.Wait) (lockcore.Outcome, error) {
	if err := w.Over(); err != nil {
		return lockcore.Outcome{}, err
	}
	join := w.Waiting() && (a.joined || time.Since(a.start) >= timing.queueAfter)
	flag := "0"
	if join {
		flag = "1"
		a.joined = true
	}
	k := KeysOf(a.s.name)
	sctx, cancel := a.scriptContext(w.Ctx)
	a.sent = time.Now()
	res, unsynced := a.s.core.RunAcquire(sctx, lua.SemAcquire,
		[]string{k.Available, k.Leases, k.Channel, k.Queue, k.QueueDeadlines, k.Holders, layout.OtherKey(a.s.name)},
		[]string{a.s.core.PublishCommand(), a.raw, strconv.FormatInt(lockcore.Millis(a.lease), 10), flag,
			strconv.FormatInt(timing.waiterTimeout.Milliseconds(), 10), a.holder})
	cancel()
	vals, err := res.AsIntSlice()
	if err != nil {
		if !lockcore.IsReply(err) {
			a.unknown = true
		}
		return lockcore.Outcome{}, a.s.fail("acquire", err)
	}
	a.unknown = false
	if len(vals) != 3 {
		return lockcore.Outcome{}, fmt.Errorf("relock: acquire %q: unexpected reply %v", a.s.name, vals)
	}
	if vals[0] != 1 {
		return lockcore.Outcome{Retry: a.bound(vals[1]), PassOn: vals[2] > 0}, nil
	}
	if err := w.Cancelled(); err != nil {
		a.giveBack(w.Ctx)
		return lockcore.Outcome{}, err
	}
	if unsynced != nil {
		a.giveBack(w.Ctx)
		return lockcore.Outcome{}, lockcore.NotAcquired(fmt.Errorf("%q: %w", a.s.name, unsynced))
	}
	if a.renew {
		life, err := a.s.core.GrantPermit(renewer{}, a.s.name, a.id, a.raw, a.lease)
		if err != nil {
			a.giveBack(w.Ctx)
			return lockcore.Outcome{}, err
		}
		a.life = life
	}
	return lockcore.Outcome{Done: true, PassOn: vals[2] > 0}, nil
}

// holder is who a permit taken with ctx is recorded as taken by:
// "<clientID>:<owner>", the owner in ctx (checked as a lock's owner is),
// or, without one, "anon-<n>@<client name>", as an anonymous lock hold
// is named.
func (s *Semaphore) holder(ctx context.Context) (string, error) {
	owner, ok, err := lockcore.ContextOwner(ctx)
	if err != nil {
		return "", err
	}
	if !ok {
		owner = lockcore.AnonymousOwner() + "@" + s.core.Name()
	}
	return layout.Field(s.core.ID, owner), nil
}

// bound is the longest sleep after a refusal whose reply said next ms
// (-1: no lease or deadline will end): a queued waiter refreshes its
// place every RefreshInterval, and one that is not queued yet wakes when
// it is time to join.
func (a *acquisition) bound(next int64) time.Duration {
	bound := timing.refresh
	if !a.joined {
		bound = max(timing.queueAfter-time.Since(a.start), time.Millisecond)
	}
	if next >= 0 {
		bound = min(bound, time.Duration(next)*time.Millisecond+time.Millisecond)
	}
	return bound
}

// scriptContext bounds one script: detached from the caller's context
// (so a permit won is learned of and given back), for attemptTimeout, or
// for the time the caller has left plus a grace of a quarter of it
// (between 2ms and 100ms).
func (a *acquisition) scriptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	now := time.Now()
	deadline := now.Add(attemptTimeout)
	if d, ok := ctx.Deadline(); ok {
		grace := min(max(d.Sub(now)/4, 2*time.Millisecond), 100*time.Millisecond)
		if d.Add(grace).Before(deadline) {
			deadline = d.Add(grace)
		}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// giveBack releases the permit this call took and will not keep. When
// Redis does not answer, the call's end tries again.
func (a *acquisition) giveBack(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, err := a.s.release(ctx, a.raw)
	a.unknown = err != nil
}

// End is the end of the call. One that did not acquire releases a permit
// an attempt may have taken unseen, and leaves the queue.
func (a *acquisition) End(w *lockcore.Wait, done bool) {
	if done || !a.unknown && !a.joined {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.Ctx), cleanupTimeout)
	defer cancel()
	if a.unknown {
		_, _ = a.s.release(ctx, a.raw)
	}
	if a.joined {
		k := KeysOf(a.s.name)
		_ = lua.SemAbandon.Exec(ctx, a.s.core.RDB, []string{k.Available, k.Channel, k.Queue, k.QueueDeadlines},
			[]string{a.s.core.PublishCommand(), a.raw}).Error()
	}
}

// renewer renews the permits this Client holds on the watchdog lease.
type renewer struct{}

// RenewCall resets the permit's lease while it is held.
func (renewer) RenewCall(r lockcore.Request) lockcore.Call {
	k := KeysOf(r.Name)
	return lockcore.Call{Script: lua.SemRenew, Keys: []string{k.Available, k.Leases, k.Channel, k.Holders, layout.OtherKey(r.Name)},
		Args: []string{r.Core.PublishCommand(), r.Field, strconv.FormatInt(r.LeaseMs, 10)}}
}
