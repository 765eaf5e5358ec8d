package rlock_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// The tests of this file each pin one way a hold used to end silently or
// leave something behind. Each fails on the code before the hold
// lifecycle was rebuilt.

// lostCounter counts the losses a Client reports, and logs each to t
// when t is set.
type lostCounter struct {
	n atomic.Int32
	t *testing.T
}

func (c *lostCounter) option() rlock.Option {
	return rlock.WithLostHandler(func(name, owner string, cause error) {
		c.n.Add(1)
		if c.t != nil {
			c.t.Logf("lost %s by %s: %v", name, owner, cause)
		}
	})
}

// exclusion counts goroutines that found another inside the lock with
// them.
type exclusion struct{ inside, overlaps atomic.Int32 }

// enter is a visit inside the lock, by a goroutine that holds it.
func (x *exclusion) enter() {
	if x.inside.Add(1) != 1 {
		x.overlaps.Add(1)
	}
	x.inside.Add(-1)
}

// held checks that the owner in ctx holds l in Redis and that its hold is
// tracked: Done is open.
func held(t *testing.T, l *rlock.Lock, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-l.Done(ctx):
		assert.Failf(t, "Done is closed", "%s: Done is closed while the owner holds the lock (cause %v)", what, context.Cause(l.HoldContext(ctx)))
	default:
	}
	ok, err := l.IsHeldByOwner(ctx)
	assert.NoError(t, err, "%s: IsHeldByOwner", what)
	assert.True(t, ok, "%s: IsHeldByOwner", what)
}

// TestWaiterGrantedAfterItsOwnersFailedUnlock: an Unlock by an owner that
// holds nothing while it waits in Lock changes nothing; its Lock, granted
// later, is a tracked, renewed hold (it used to be recorded as ended, and
// expire silently one watchdog timeout later).
func TestWaiterGrantedAfterItsOwnersFailedUnlock(t *testing.T) {
	var lost lostCounter
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout), lost.option())
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	require.NoError(t, l.Lock(b))
	got := lockAsync(l, a)
	raw := relocktest.Raw(t)
	relocktest.Eventually(t, 5*time.Second, "a to wait", func() bool { return numsub(raw, layout.Channel(l.Name())) == 1 })
	require.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld, "Unlock by the waiting owner")
	require.NoError(t, l.Unlock(b))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "a's Lock to return after b's Unlock"))
	held(t, l, a, "after the wait")
	outlive(t, l, a, 3)
	held(t, l, a, "three watchdog timeouts later")
	assert.NoError(t, l.Unlock(a), "Unlock")
	assert.Zero(t, lost.n.Load(), "losses reported")
}

// TestOneOwnerManyGoroutines: goroutines of one owner lock and unlock
// concurrently; every Lock that returns nil is a tracked hold, and when
// they are done the lock is free and nothing was lost.
func TestOneOwnerManyGoroutines(t *testing.T) {
	var lost lostCounter
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(time.Second), lost.option())
	l := c.GetLock(relocktest.Name(t))
	// One owner never waits for itself (it re-enters); the deadline only
	// bounds a run gone wrong.
	a, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), "a"), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var failures atomic.Int32
	for range 2 {
		wg.Go(func() {
			for range 150 {
				if !assert.NoError(t, l.Lock(a), "Lock") {
					return
				}
				select {
				case <-l.Done(a):
					failures.Add(1)
				default:
				}
				if !assert.NoError(t, l.Unlock(a), "Unlock") {
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, failures.Load(), "Locks that returned nil with the hold already ended")
	assertLocked(t, l, false, "after every Unlock")
	assert.Zero(t, lost.n.Load(), "losses reported")
}

// TestWakeUpPassedOnAfterTransientFailure: the waiter woken by an unlock
// fails its attempt (OOM), then its context ends while it sleeps (100ms)
// before retrying. It has used no wake-up, so it hands it on: the other local
// waiter takes the lock at once (it used to sleep until the old holder's
// lease ran out).
func TestWakeUpPassedOnAfterTransientFailure(t *testing.T) {
	raw := relocktest.Raw(t)
	f := relocktest.NewFaulty(raw)
	c, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetLock(relocktest.Name(t))
	h := rlock.WithOwner(t.Context(), "holder")
	require.NoError(t, l.Lock(h))
	owners := []string{"w1", "w2"}
	ctxs := map[string]context.Context{}
	cancels := map[string]context.CancelFunc{}
	attempts := map[string]*atomic.Int32{}
	var mu sync.Mutex
	for _, o := range owners {
		ctxs[o], cancels[o] = context.WithTimeout(rlock.WithOwner(t.Context(), o), 10*time.Second)
		t.Cleanup(cancels[o])
		attempts[o] = new(atomic.Int32)
	}
	ownerOf := func(args []string) string {
		for _, o := range owners {
			if slices.Contains(args, layout.Field(c.ID(), o)) {
				return o
			}
		}
		return ""
	}
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockAcquire.SHA1}, N: -1, Run: true, Keep: true,
		Match: func(args []string) bool { return ownerOf(args) != "" },
		After: func(args []string) { attempts[ownerOf(args)].Add(1) }})
	results := map[string]<-chan error{}
	for i, o := range owners {
		results[o] = lockAsync(l, ctxs[o])
		// The first waiter makes two attempts (before and after
		// subscribing) and sleeps; the second finds the channel
		// subscribed, joins it before its one attempt, and sleeps. w1 is
		// then the older waiter.
		want := int32(2 - i)
		relocktest.Eventually(t, 5*time.Second, o+" to wait", func() bool { return attempts[o].Load() == want })
	}
	// The next attempt (the woken waiter's) fails with OOM, and that
	// waiter's context ends.
	oom := relocktest.ErrorReply(t, raw, "OOM command not allowed when used memory > 'maxmemory'.")
	f.Clear()
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockAcquire.SHA1}, N: 1, Reply: oom,
		Match: func(args []string) bool { return ownerOf(args) != "" },
		After: func(args []string) {
			mu.Lock()
			defer mu.Unlock()
			// The context ends while the waiter sleeps before retrying.
			time.AfterFunc(20*time.Millisecond, cancels[ownerOf(args)])
		}})
	require.NoError(t, l.Unlock(h))
	errs := map[string]error{}
	for _, o := range owners {
		errs[o] = relocktest.Receive(t, results[o], 15*time.Second, o+"'s Lock to return")
	}
	require.False(t, errs["w1"] == nil && errs["w2"] == nil, "both waiters hold the lock")
	require.False(t, errs["w1"] != nil && errs["w2"] != nil, "neither waiter got the lock: w1: %v; w2: %v", errs["w1"], errs["w2"])
	for _, o := range owners {
		if errs[o] == nil {
			require.NoError(t, l.Unlock(ctxs[o]))
		} else {
			assert.ErrorIs(t, errs[o], context.Canceled, "the failed waiter's Lock: its context's end")
		}
	}
}

// TestDoPanicReleases: a panic in Do's function releases the lock and goes
// on with its own value (the lock used to stay held and renewed until the
// process exited).
func TestDoPanicReleases(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	l := c.GetLock(relocktest.Name(t))
	for _, named := range []bool{true, false} {
		ctx := t.Context()
		if named {
			ctx = rlock.WithOwner(ctx, "a")
		}
		assert.PanicsWithValue(t, "boom", func() {
			_ = l.Do(ctx, func(context.Context) error { panic("boom") })
		}, "Do must go on with its function's own panic value")
		assertLocked(t, l, false, "after Do's function panicked")
	}
}

// TestAnonymousHoldBelongsToTheClient: an ownerless Lock on one handle is
// released by an ownerless Unlock on another handle of the same name and
// Client (it used to give ErrNotHeld and leave the lock renewed forever);
// another Client's ownerless Unlock gives ErrNotHeld.
func TestAnonymousHoldBelongsToTheClient(t *testing.T) {
	c := relocktest.Client(t)
	other := relocktest.Client(t)
	name := relocktest.Name(t)
	ctx := t.Context()
	require.NoError(t, c.GetLock(name).Lock(ctx))
	assert.ErrorIs(t, other.GetLock(name).Unlock(ctx), rlock.ErrNotHeld, "another Client's ownerless Unlock")
	n, err := c.GetLock(name).HoldCount(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "HoldCount on a new handle")
	require.NoError(t, c.GetLock(name).Unlock(ctx), "ownerless Unlock on another handle")
	assertLocked(t, c.GetLock(name), false, "after the ownerless Unlock")
	assert.ErrorIs(t, c.GetLock(name).Unlock(ctx), rlock.ErrNotHeld, "a second ownerless Unlock")
}

// TestCancelledFirstAcquisitionLeavesNothing: the caller's context ends
// while its first acquisition's script is in flight and no reply comes;
// the call gives back whatever the script won before it returns (it used
// to leave the hold for the whole lease).
func TestCancelledFirstAcquisitionLeavesNothing(t *testing.T) {
	f := relocktest.NewFaulty(relocktest.Raw(t))
	c, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockAcquire.SHA1}, N: 1, Run: true, Hang: true})
	// Reading the token (a way to look whether the attempt won) gets no
	// answer either.
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.FencedToken.SHA1}, N: -1, Reply: relocktest.LostReply()})
	ctx, cancel := context.WithTimeout(a, 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, l.Lock(ctx), rlock.ErrNotAcquired, "Lock whose reply never came")
	assertLocked(t, l, false, "right after the failed Lock")
	assert.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld, "Unlock after the failed Lock")
}

// TestUnlockWritesNothingElse: lock and unlock leave no key behind (they
// used to write a latch key per unlock), and an Unlock that returns
// ErrNotHeld sends nothing at all.
func TestUnlockWritesNothingElse(t *testing.T) {
	raw := redistest.Start(t).Client(t)
	f := relocktest.NewFaulty(raw)
	c, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	before := relocktest.DBSize(t, raw)
	a := rlock.WithOwner(t.Context(), "a")
	for _, l := range []interface {
		Lock(context.Context) error
		Unlock(context.Context) error
	}{c.GetLock(relocktest.Name(t)), c.GetFairLock(relocktest.Name(t))} {
		for range 20 {
			require.NoError(t, l.Lock(a))
			require.NoError(t, l.Lock(a))
			for range 2 {
				require.NoError(t, l.Unlock(a))
			}
		}
		sent := f.Commands()
		require.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld, "Unlock of nothing")
		assert.Zero(t, f.Commands()-sent, "commands Unlock of nothing sent")
	}
	assert.Equal(t, before, relocktest.DBSize(t, raw), "DBSIZE after lock/unlock cycles: no key left")
}

// TestReservedOwnersRefused: owners of the form relock makes up for
// anonymous holds are refused from WithOwner, so no user's owner can be
// one of them.
func TestReservedOwnersRefused(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	for _, owner := range []string{"anon-1", "anon-42"} {
		assert.ErrorIs(t, l.Lock(rlock.WithOwner(t.Context(), owner)), rlock.ErrInvalidArgument, "Lock as %q", owner)
	}
	for _, owner := range []string{"anon-", "anon-x", "anon-1a", "anonymous"} {
		ctx := rlock.WithOwner(t.Context(), owner)
		assert.NoError(t, l.Lock(ctx), "Lock as %q", owner)
		assert.NoError(t, l.Unlock(ctx))
	}
	// Do's own owner, made up for a context without one, is accepted
	// through fn's context.
	err := l.Do(t.Context(), func(ctx context.Context) error {
		n, err := l.HoldCount(ctx)
		assert.NoError(t, err)
		assert.Equal(t, 1, n, "HoldCount with Do's context")
		return l.Lock(ctx) // re-enters
	})
	assert.NoError(t, err, "Do")
}

// TestTwoWaitersOfOneOwner: two goroutines of one owner wait for a lock;
// one unlock message grants it to the owner, and both return at once (the
// second re-enters) instead of the second waiting for a second wake-up.
func TestTwoWaitersOfOneOwner(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	b := rlock.WithOwner(t.Context(), "b")
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(b))
	ctx, cancel := context.WithTimeout(a, 10*time.Second) // far less than the 30s lease
	defer cancel()
	first, second := lockAsync(l, ctx), lockAsync(l, ctx)
	raw := relocktest.Raw(t)
	relocktest.Eventually(t, 5*time.Second, "both to wait", func() bool { return numsub(raw, layout.Channel(l.Name())) == 1 })
	require.NoError(t, l.Unlock(b))
	for _, ch := range []<-chan error{first, second} {
		require.NoError(t, relocktest.Receive(t, ch, 5*time.Second, "a waiting Lock of the owner to return"), "a waiting Lock of the owner")
	}
	n, err := l.HoldCount(a)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "HoldCount")
	for range 2 {
		require.NoError(t, l.Unlock(a))
	}
}

// TestExpiredAnonymousHoldReported: an ownerless hold on a fixed lease
// runs out; when the Client's next ownerless Lock takes the lock, the old
// hold is reported lost (it used to stay recorded, out of reach, for the
// life of the Client), before that Lock returns, and the new one is the
// Client's anonymous hold. The old hold is not watched (no Done, no
// HoldContext): a watched one ends at its lease on a timer instead, whose
// report comes from the timer's goroutine (see
// TestExpiredWatchedAnonymousHoldReportedOnce).
func TestExpiredAnonymousHoldReported(t *testing.T) {
	var lost lostCounter
	c := relocktest.Client(t, lost.option())
	l := c.GetLock(relocktest.Name(t))
	ctx := t.Context()
	require.NoError(t, l.LockLease(ctx, 50*time.Millisecond))
	// The lease runs out in Redis; nothing tells the Client.
	require.NoError(t, l.Lock(ctx))
	assert.EqualValues(t, 1, lost.n.Load(), "losses reported when Lock returned: the expired hold")
	held(t, l, ctx, "the new ownerless hold")
	assert.NoError(t, l.Unlock(ctx), "Unlock of the new hold")
	assert.EqualValues(t, 1, lost.n.Load(), "losses reported")
}

// TestExpiredWatchedAnonymousHoldReportedOnce: an ownerless hold on a
// fixed lease whose Done was taken ends at its lease (a timer), or when
// the Client's next ownerless Lock replaces it, whichever comes first: its
// Done closes and its loss is reported once. The timer's report runs on
// its own goroutine, and may end after that Lock returned (the record
// ended before Done closed): the test waits for it.
func TestExpiredWatchedAnonymousHoldReportedOnce(t *testing.T) {
	var lost lostCounter
	c := relocktest.Client(t, lost.option())
	l := c.GetLock(relocktest.Name(t))
	ctx := t.Context()
	require.NoError(t, l.LockLease(ctx, 50*time.Millisecond))
	first := l.Done(ctx)
	require.NoError(t, l.Lock(ctx))
	relocktest.Receive(t, first, 5*time.Second, "the expired hold's Done to close")
	relocktest.Eventually(t, 5*time.Second, "the expired hold's loss to be reported", func() bool { return lost.n.Load() >= 1 })
	held(t, l, ctx, "the new ownerless hold")
	assert.NoError(t, l.Unlock(ctx), "Unlock of the new hold")
	assert.EqualValues(t, 1, lost.n.Load(), "losses reported: the expired hold, once")
}
