package semaphore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
)

// acquire is Acquire (wait < 0: until ctx ends), TryAcquire and their
// Permit and Permits forms, arguments checked but the name: one waiting
// call for n permits through the Client's wait loop. Every attempt of a
// call asks for the same permit IDs, so a resent attempt takes its
// permits at most once. It returns the call, which says what was won, or
// nil. many: the call is for several permits (even n == 1): every attempt
// runs the script for several, which refuses more than the semaphore has.
func (s *Semaphore) acquire(ctx context.Context, n int, many bool, wait, lease time.Duration) (*acquisition, error) {
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
	a := &acquisition{s: s, lease: lease, start: time.Now(), many: many, holder: holder, raws: make([]string, n), ids: make([]string, n)}
	for i := range n {
		a.raws[i], a.ids[i] = newID()
	}
	// The events of a call for several permits name them all; its wait
	// record names it as its permits' holder entries will.
	w := lockcore.Wait{Ctx: ctx, Limit: wait, Lock: observe.Lock{Kind: observe.KindSemaphore, Name: s.name},
		Owner: strings.Join(a.ids, ","), Lease: lease, Acquire: true, Field: holder}
	if lease == 0 {
		a.renew, a.lease = true, s.watchdogTimeout()
	}
	ok, err := s.core.Wait(&w, a)
	if !ok {
		return nil, err
	}
	return a, nil
}

// acquisition is one call of Acquire, TryAcquire or their forms: the
// semaphore's Waiter.
type acquisition struct {
	s         *Semaphore
	raws, ids []string // the permit IDs every attempt asks for (raw, hex)
	many      bool     // the call asks for several: SemAcquireMany
	holder    string   // who takes the permits, "<clientID>:<owner>"
	lease     time.Duration
	renew     bool
	start     time.Time
	joined    bool // an attempt asked to join the queue
	unknown   bool // an attempt may have taken the permits unseen

	sent  time.Time         // when the latest attempt was sent
	lives []context.Context // of the permits won on the watchdog lease
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
	keys := []string{k.Available, k.Leases, k.Channel, k.Queue, k.QueueDeadlines, k.Holders, layout.OtherKey(a.s.name)}
	lease := strconv.FormatInt(lockcore.Millis(a.lease), 10)
	waiterTimeout := strconv.FormatInt(timing.waiterTimeout.Milliseconds(), 10)
	script, args := lua.SemAcquire, []string{a.s.core.PublishCommand(), a.raws[0], lease, flag, waiterTimeout, a.holder}
	if a.many {
		script = lua.SemAcquireMany
		args = append([]string{a.s.core.PublishCommand(), lease, flag, waiterTimeout, a.holder}, a.raws...)
	}
	sctx, cancel := a.scriptContext(w.Ctx)
	a.sent = time.Now()
	res, unsynced := a.s.core.RunAcquire(sctx, script, keys, args)
	cancel()
	vals, err := res.AsIntSlice()
	if err != nil {
		if !lockcore.IsReply(err) {
			a.unknown = true
		}
		if refused := a.tooMany(err); refused != nil {
			return lockcore.Outcome{}, refused
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
		a.lives = make([]context.Context, len(a.ids))
		for i, id := range a.ids {
			life, err := a.s.core.GrantPermit(renewer{}, a.s.name, id, a.raws[i], a.lease)
			if err != nil {
				// Close: it ends the holds granted already.
				a.giveBack(w.Ctx)
				return lockcore.Outcome{}, err
			}
			a.lives[i] = life
		}
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

// giveBack releases the permits this call took and will not keep. When
// Redis does not answer, the call's end tries again.
func (a *acquisition) giveBack(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	a.unknown = a.releaseAll(lockcore.WithoutReplicaWait(ctx)) != nil
}

// releaseAll releases every permit of the call (those not held are
// skipped by the script), and returns the first failure.
func (a *acquisition) releaseAll(ctx context.Context) error {
	var first error
	for _, raw := range a.raws {
		if _, err := a.s.release(ctx, raw); err != nil && first == nil {
			first = err
		}
	}
	return first
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
		_ = a.releaseAll(ctx)
	}
	if a.joined {
		k := KeysOf(a.s.name)
		_ = lua.SemAbandon.Exec(ctx, a.s.core.RDB, []string{k.Available, k.Channel, k.Queue, k.QueueDeadlines, k.Leases, k.Holders},
			append([]string{a.s.core.PublishCommand()}, a.raws...)).Error()
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
