package rlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// timeout is a short watchdog lease for these tests; renewals run every
// timeout/3.
const timeout = 300 * time.Millisecond

// outlive lets n watchdog timeouts pass, checking all along that the lock
// stays held by ctx's owner. Its sleeps are the scenario (the hold must
// last that long), not a wait for an event: what it checks is that
// nothing happens.
func outlive(t *testing.T, l *rlock.Lock, ctx context.Context, n int) {
	t.Helper()
	end := time.Now().Add(time.Duration(n) * timeout)
	for time.Now().Before(end) {
		held, err := l.IsHeldByOwner(ctx)
		require.NoError(t, err, "IsHeldByOwner")
		require.True(t, held, "IsHeldByOwner while the watchdog should keep the hold")
		time.Sleep(timeout / 5) // the scenario: checks five times a lease
	}
}

func TestWatchdogKeepsLockHeld(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	outlive(t, l, a, 4)
	require.NoError(t, l.Unlock(a))
}

func TestNoRenewalAfterUnlock(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	for range 20 {
		require.NoError(t, l.Lock(a))
		require.NoError(t, l.Unlock(a))
	}
	// Nothing may bring the key back or keep it: watch it for several
	// renewal intervals (absence cannot be waited for, only observed).
	for range 10 {
		n, err := raw.Do(t.Context(), raw.B().Exists().Key(l.Name()).Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, n, "the lock key exists after the final Unlock")
		time.Sleep(timeout / 5) // the scenario: the watch lasts two leases
	}
}

func TestRenewalNotTiedToCallersContext(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	l := c.GetLock(relocktest.Name(t))
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "a"))
	require.NoError(t, l.Lock(ctx))
	cancel()
	outlive(t, l, rlock.WithOwner(t.Context(), "a"), 3)
	require.NoError(t, l.Unlock(ctx))
}

// TestEveryOwnerRenewed: the watchdog renews each owner's hold, not only
// the first owner's that ever took the lock through this Client.
func TestEveryOwnerRenewed(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	require.NoError(t, l.Lock(a))
	waiting := make(chan error, 1)
	go func() { waiting <- l.Lock(b) }()
	raw := relocktest.Raw(t)
	relocktest.Eventually(t, 5*time.Second, "b to wait", func() bool { return numsub(raw, layout.Channel(l.Name())) == 1 })
	// The scenario, not a wait: b waits across one of a's renewals.
	time.Sleep(timeout / 3)
	require.NoError(t, l.Unlock(a))
	require.NoError(t, relocktest.Receive(t, waiting, 5*time.Second, "b to get the lock after a's Unlock"))
	outlive(t, l, b, 3)
	_ = l.Unlock(b)
}

func TestLockExpiresAfterClose(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	require.NoError(t, l.Lock(t.Context()))
	closed := time.Now()
	require.NoError(t, c.Close())
	relocktest.Eventually(t, 5*timeout, "the lock to expire after Close", func() bool {
		n, err := raw.Do(t.Context(), raw.B().Exists().Key(l.Name()).Build()).AsInt64()
		return err == nil && n == 0
	})
	assert.LessOrEqual(t, time.Since(closed), timeout+200*time.Millisecond, "the lock's expiry after Close: about the %v lease", timeout)
}

func TestDoCancelledWhenKeyDeleted(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	var lostAfter time.Duration
	err := l.Do(t.Context(), func(ctx context.Context) error {
		deleted := time.Now()
		if err := raw.Do(ctx, raw.B().Del().Key(l.Name()).Build()).Error(); err != nil {
			return err
		}
		relocktest.Receive(t, ctx.Done(), 5*timeout, "fn's context to be cancelled after the DEL")
		lostAfter = time.Since(deleted)
		assert.ErrorIs(t, context.Cause(ctx), rlock.ErrLockLost, "context.Cause")
		return ctx.Err()
	})
	assert.ErrorIs(t, err, rlock.ErrLockLost, "Do: ErrLockLost joined with fn's error")
	assert.ErrorIs(t, err, context.Canceled, "Do: ErrLockLost joined with fn's error")
	assert.LessOrEqual(t, lostAfter, timeout/3+150*time.Millisecond, "the loss, after the DEL: about timeout/3 = %v", timeout/3)
}

func TestDoneAndLostHandler(t *testing.T) {
	lost := make(chan string, 1)
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout),
		rlock.WithLostHandler(func(name, owner string, cause error) {
			if errors.Is(cause, rlock.ErrLockLost) {
				lost <- owner
			}
		}))
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	done := l.Done(a)
	select {
	case <-done:
		require.FailNow(t, "Done closed while held")
	default:
	}
	require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(l.Name()).Build()).Error())
	relocktest.Receive(t, done, 5*timeout, "Done to close after the hold was deleted")
	owner := relocktest.Receive(t, lost, 5*timeout, "the lost handler to be called")
	assert.Equal(t, "a", owner, "the owner the lost handler got")
	assert.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld, "Unlock after loss")
	// Done of an owner holding nothing is already closed.
	select {
	case <-l.Done(rlock.WithOwner(t.Context(), "nobody")):
	default:
		assert.Fail(t, "Done of a non-holder is not closed")
	}
}

func TestCloseCancelsDo(t *testing.T) {
	c, err := rlock.NewClient(redistest.Shared(t).ClientOption())
	require.NoError(t, err)
	l := c.GetLock(relocktest.Name(t))
	err = l.Do(t.Context(), func(ctx context.Context) error {
		go c.Close()
		relocktest.Receive(t, ctx.Done(), 5*time.Second, "Close to cancel Do's context")
		assert.ErrorIs(t, context.Cause(ctx), rlock.ErrClosed, "the cause of Do's context")
		return nil
	})
	assert.ErrorIs(t, err, rlock.ErrClosed, "Do")
}

// TestInterruptedAcquireLeavesNothing cancels acquisitions at every point
// of their flight: whatever the outcome, a failed call leaves no hold and
// no renewal behind. The deadlines sweep from before the acquire script
// is issued to after its reply came, again and again, until enough calls
// were cut after issuing it (counted by a wrapper of the Client's
// connection); a run that never cut one fails, since it tested nothing.
// It runs on a rueidis client with one pipeline, as NewClient makes its
// own, and on one with rueidis' default several, where a give-back sent
// at once could reach the server before the acquisition it undoes.
func TestInterruptedAcquireLeavesNothing(t *testing.T) {
	for _, pipelines := range []int{-1, 0} {
		t.Run(map[int]string{-1: "one pipeline", 0: "several pipelines"}[pipelines], func(t *testing.T) {
			interruptedAcquireLeavesNothing(t, pipelines)
		})
	}
}

func interruptedAcquireLeavesNothing(t *testing.T, pipelines int) {
	const wantCut = 10
	opt := redistest.Shared(t).ClientOption()
	opt.PipelineMultiplex = pipelines
	rdb, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(rdb.Close)
	f := relocktest.NewFaulty(rdb)
	sent := f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockAcquire.SHA1}, N: -1, Run: true, Keep: true})
	c, err := rlock.New(f, rlock.WithWatchdogTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	var tries, acquired, cutBefore, cutInFlight int
	for end := time.Now().Add(10 * time.Second); cutInFlight < wantCut && time.Now().Before(end); tries++ {
		before := sent.Hits()
		ctx, cancel := context.WithTimeout(a, time.Duration(tries%100*10)*time.Microsecond)
		err := l.Lock(ctx)
		cancel()
		if err == nil {
			acquired++
			require.NoError(t, l.Unlock(a))
			continue
		}
		if sent.Hits() == before {
			cutBefore++
		} else {
			cutInFlight++
		}
		require.ErrorIs(t, err, rlock.ErrNotAcquired, "Lock cut by its deadline")
		n, err := l.HoldCount(a)
		require.NoError(t, err)
		require.Zero(t, n, "HoldCount after a failed Lock")
	}
	t.Logf("%d calls: %d acquired, %d cut before they issued their script, %d after", tries, acquired, cutBefore, cutInFlight)
	require.GreaterOrEqual(t, cutInFlight, wantCut, "calls cut after issuing their acquire script, in %d tries: the test could not interrupt an acquisition in flight", tries)
	// The scenario, not a wait: a renewal interval passes on purpose. A
	// hold that a stray renewal kept alive would still be there; one
	// merely left behind is caught by HoldCount above.
	time.Sleep(timeout)
	assertLocked(t, l, false, "after only failed or released acquisitions")
}

// flakyRenewals fails the watchdog's pipelined renewals while failing is
// set, and as many more as failNext says, the way a dropped connection
// would.
type flakyRenewals struct {
	rueidis.Client
	failing  atomic.Bool
	failNext atomic.Int32
	failed   atomic.Int32
}

// takeFailure takes one of the failures failNext counts, if any is left.
func (f *flakyRenewals) takeFailure() bool {
	for {
		n := f.failNext.Load()
		if n <= 0 {
			return false
		}
		if f.failNext.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (f *flakyRenewals) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if f.failing.Load() || f.takeFailure() {
		f.failed.Add(1)
		out := make([]rueidis.RedisResult, len(cmds))
		for i := range out {
			out[i] = rueidis.NewErrorResult(errors.New("injected: connection reset"))
		}
		return out
	}
	return f.Client.DoMulti(ctx, cmds...)
}

func TestRenewalRetriedAfterTransientErrors(t *testing.T) {
	flaky := &flakyRenewals{Client: relocktest.Raw(t)}
	c, err := rlock.New(flaky, rlock.WithWatchdogTimeout(timeout))
	require.NoError(t, err)
	defer c.Close()
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	err = l.Do(a, func(ctx context.Context) error {
		// One renewal fails, however late this goroutine sees it (a
		// window of failures ended by this goroutine lasted, on a loaded
		// machine, until the lease ran out).
		flaky.failNext.Store(1)
		relocktest.Eventually(t, 2*timeout, "a failed renewal", func() bool { return flaky.failed.Load() >= 1 })
		outlive(t, l, a, 3)
		return ctx.Err()
	})
	assert.NoError(t, err, "Do: the hold must be kept across a failed renewal")
}

func TestLostWhenRenewalsFailUntilLeaseEnds(t *testing.T) {
	flaky := &flakyRenewals{Client: relocktest.Raw(t)}
	c, err := rlock.New(flaky, rlock.WithWatchdogTimeout(timeout))
	require.NoError(t, err)
	defer c.Close()
	l := c.GetLock(relocktest.Name(t))
	err = l.Do(t.Context(), func(ctx context.Context) error {
		flaky.failing.Store(true)
		// The hold is lost when the lease (300ms) ends with every renewal
		// failed: were the loss never reported, this fails in seconds
		// rather than block.
		relocktest.Receive(t, ctx.Done(), 10*timeout, "Do's context to end once renewals failed until the lease ended")
		return nil
	})
	assert.ErrorIs(t, err, rlock.ErrLockLost, "Do")
	assert.ErrorContains(t, err, "injected", "Do must carry the renewal error")
}

// TestLongWaiterIsRenewedOnceItHolds: a waiter that waits across several
// renewal intervals holds nothing to renew meanwhile; once it gets the
// lock, the watchdog keeps it, and no loss is reported for the wait.
func TestLongWaiterIsRenewedOnceItHolds(t *testing.T) {
	var lost atomic.Int32
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout),
		rlock.WithLostHandler(func(string, string, error) { lost.Add(1) }))
	l := c.GetLock(relocktest.Name(t))
	holder := rlock.WithOwner(t.Context(), "holder")
	waiter := rlock.WithOwner(t.Context(), "waiter")
	require.NoError(t, l.Lock(holder))
	got := make(chan error, 1)
	go func() { got <- l.Lock(waiter) }()
	outlive(t, l, holder, 3) // the waiter waits across several renewals
	require.NoError(t, l.Unlock(holder))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock after the Unlock"))
	outlive(t, l, waiter, 3)
	assert.NoError(t, l.Unlock(waiter), "Unlock by the former waiter")
	assert.Zero(t, lost.Load(), "losses reported")
}

// TestRenewalAfterScriptFlush: renewals are sent as EVALSHA; a server that
// lost its scripts gets them again and the hold is kept.
func TestRenewalAfterScriptFlush(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	require.NoError(t, raw.Do(t.Context(), raw.B().ScriptFlush().Build()).Error())
	outlive(t, l, a, 3)
	require.NoError(t, l.Unlock(a))
}

// TestForceUnlockNoticedAtOnce: a holder that watches its hold (Do, Done,
// HoldContext) hears of a force-unlock by another Client within a round
// trip or two, not at its next renewal (10s away with the default lease).
func TestForceUnlockNoticedAtOnce(t *testing.T) {
	for _, kind := range []string{"Lock", "FairLock"} {
		t.Run(kind, func(t *testing.T) {
			c := relocktest.Client(t)
			other := relocktest.Client(t)
			name := relocktest.Name(t)
			get := func(c *rlock.Client) interface {
				Do(context.Context, func(context.Context) error) error
				ForceUnlock(context.Context) (bool, error)
			} {
				if kind == "FairLock" {
					return c.GetFairLock(name)
				}
				return c.GetLock(name)
			}
			var forced time.Time
			var took time.Duration
			err := get(c).Do(t.Context(), func(ctx context.Context) error {
				forced = time.Now()
				ok, err := get(other).ForceUnlock(t.Context())
				require.NoError(t, err, "ForceUnlock")
				require.True(t, ok, "ForceUnlock")
				relocktest.Receive(t, ctx.Done(), 5*time.Second, "Do's context to be cancelled after a force-unlock")
				took = time.Since(forced)
				return nil
			})
			assert.ErrorIs(t, err, rlock.ErrLockLost, "Do")
			assert.LessOrEqual(t, took, 100*time.Millisecond, "Do's context's cancellation after the force-unlock")
			t.Logf("force-unlock noticed %v after it was sent", took.Round(time.Microsecond))
		})
	}
}
