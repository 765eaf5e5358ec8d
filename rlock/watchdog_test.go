package rlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// timeout is a short watchdog lease for these tests; renewals run every
// timeout/3.
const timeout = 300 * time.Millisecond

// outlive waits for several watchdog timeouts, checking all along that the
// lock stays held by ctx's owner.
func outlive(t *testing.T, l *rlock.Lock, ctx context.Context, n int) {
	t.Helper()
	end := time.Now().Add(time.Duration(n) * timeout)
	for time.Now().Before(end) {
		held, err := l.IsHeldByOwner(ctx)
		if err != nil || !held {
			t.Fatalf("IsHeldByOwner = %v, %v while the watchdog should keep it", held, err)
		}
		time.Sleep(timeout / 5)
	}
}

func TestWatchdogKeepsLockHeld(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	outlive(t, l, a, 4)
	if err := l.Unlock(a); err != nil {
		t.Fatal(err)
	}
}

func TestNoRenewalAfterUnlock(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	for range 20 {
		if err := l.Lock(a); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(a); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing may bring the key back or keep it: watch it for several
	// renewal intervals (absence cannot be waited for, only observed).
	for range 10 {
		if n, _ := raw.Do(t.Context(), raw.B().Exists().Key(l.Name()).Build()).AsInt64(); n != 0 {
			t.Fatal("the lock key exists after the final Unlock")
		}
		time.Sleep(timeout / 5)
	}
}

func TestRenewalNotTiedToCallersContext(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	l := c.GetLock(relocktest.Name(t))
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "a"))
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	outlive(t, l, rlock.WithOwner(t.Context(), "a"), 3)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestEveryOwnerRenewed: the watchdog renews each owner's hold, not only
// the first owner's that ever took the lock through this Client.
func TestEveryOwnerRenewed(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() { waiting <- l.Lock(b) }()
	time.Sleep(timeout / 3) // let b wait across one of a's renewals
	if err := l.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
	outlive(t, l, b, 3)
	_ = l.Unlock(b)
}

func TestLockExpiresAfterClose(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	if err := l.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	relocktest.Eventually(t, 5*timeout, "the lock to expire after Close", func() bool {
		n, _ := raw.Do(t.Context(), raw.B().Exists().Key(l.Name()).Build()).AsInt64()
		return n == 0
	})
	if d := time.Since(closed); d > timeout+200*time.Millisecond {
		t.Errorf("lock expired %v after Close, want about %v", d, timeout)
	}
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
		select {
		case <-ctx.Done():
			lostAfter = time.Since(deleted)
		case <-time.After(5 * timeout):
			return errors.New("fn's context was not cancelled")
		}
		if cause := context.Cause(ctx); !errors.Is(cause, rlock.ErrLockLost) {
			t.Errorf("context.Cause = %v, want ErrLockLost", cause)
		}
		return ctx.Err()
	})
	if !errors.Is(err, rlock.ErrLockLost) || !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v, want ErrLockLost joined with fn's error", err)
	}
	if lostAfter > timeout/3+150*time.Millisecond {
		t.Errorf("loss seen %v after the DEL, want about timeout/3 = %v", lostAfter, timeout/3)
	}
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
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	done := l.Done(a)
	select {
	case <-done:
		t.Fatal("Done closed while held")
	default:
	}
	raw.Do(t.Context(), raw.B().Del().Key(l.Name()).Build())
	select {
	case <-done:
	case <-time.After(5 * timeout):
		t.Fatal("Done not closed after the hold was deleted")
	}
	if owner := <-lost; owner != "a" {
		t.Errorf("lost handler got owner %q, want a", owner)
	}
	if err := l.Unlock(a); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Unlock after loss = %v, want ErrNotHeld", err)
	}
	// Done of an owner holding nothing is already closed.
	select {
	case <-l.Done(rlock.WithOwner(t.Context(), "nobody")):
	default:
		t.Error("Done of a non-holder is not closed")
	}
}

func TestCloseCancelsDo(t *testing.T) {
	c, err := rlock.NewClient(redistest.Shared(t).ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	l := c.GetLock(relocktest.Name(t))
	err = l.Do(t.Context(), func(ctx context.Context) error {
		go c.Close()
		<-ctx.Done()
		if cause := context.Cause(ctx); !errors.Is(cause, rlock.ErrClosed) {
			t.Errorf("cause = %v, want ErrClosed", cause)
		}
		return nil
	})
	if !errors.Is(err, rlock.ErrClosed) {
		t.Errorf("Do = %v, want ErrClosed", err)
	}
}

// TestInterruptedAcquireLeavesNothing cancels acquisitions at every point
// of their flight: whatever the outcome, a failed call leaves no hold and
// no renewal behind.
func TestInterruptedAcquireLeavesNothing(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	failed := 0
	for i := range 60 {
		ctx, cancel := context.WithTimeout(a, time.Duration(i*10)*time.Microsecond)
		err := l.Lock(ctx)
		cancel()
		if err == nil {
			if err := l.Unlock(a); err != nil {
				t.Fatal(err)
			}
			continue
		}
		failed++
		if !errors.Is(err, rlock.ErrNotAcquired) {
			t.Fatalf("Lock = %v, want ErrNotAcquired", err)
		}
		if n, err := l.HoldCount(a); err != nil || n != 0 {
			t.Fatalf("after a failed Lock: HoldCount = %d, %v, want 0", n, err)
		}
	}
	if failed == 0 {
		t.Log("no acquisition was interrupted this run")
	}
	time.Sleep(timeout) // a stray renewal would show up as a lock now
	if locked, _ := l.IsLocked(t.Context()); locked {
		t.Error("locked after only failed or released acquisitions")
	}
}

// flakyRenewals fails the watchdog's pipelined renewals while failing is
// set, the way a dropped connection would.
type flakyRenewals struct {
	rueidis.Client
	failing atomic.Bool
	failed  atomic.Int32
}

func (f *flakyRenewals) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if f.failing.Load() {
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
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	err = l.Do(a, func(ctx context.Context) error {
		flaky.failing.Store(true)
		relocktest.Eventually(t, 2*timeout, "a failed renewal", func() bool { return flaky.failed.Load() >= 1 })
		flaky.failing.Store(false)
		outlive(t, l, a, 3)
		return ctx.Err()
	})
	if err != nil {
		t.Errorf("Do = %v, want the hold kept across a failed renewal", err)
	}
}

func TestLostWhenRenewalsFailUntilLeaseEnds(t *testing.T) {
	flaky := &flakyRenewals{Client: relocktest.Raw(t)}
	c, err := rlock.New(flaky, rlock.WithWatchdogTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := c.GetLock(relocktest.Name(t))
	err = l.Do(t.Context(), func(ctx context.Context) error {
		flaky.failing.Store(true)
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, rlock.ErrLockLost) {
		t.Errorf("Do = %v, want ErrLockLost", err)
	}
	if !strings.Contains(err.Error(), "injected") {
		t.Errorf("Do = %v, want the renewal error in it", err)
	}
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
	if err := l.Lock(holder); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- l.Lock(waiter) }()
	outlive(t, l, holder, 3) // the waiter waits across several renewals
	if err := l.Unlock(holder); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	outlive(t, l, waiter, 3)
	if err := l.Unlock(waiter); err != nil {
		t.Errorf("Unlock by the former waiter = %v, want nil", err)
	}
	if n := lost.Load(); n != 0 {
		t.Errorf("%d losses reported, want 0", n)
	}
}

// TestRenewalAfterScriptFlush: renewals are sent as EVALSHA; a server that
// lost its scripts gets them again and the hold is kept.
func TestRenewalAfterScriptFlush(t *testing.T) {
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	if err := raw.Do(t.Context(), raw.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	outlive(t, l, a, 3)
	if err := l.Unlock(a); err != nil {
		t.Fatal(err)
	}
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
				if ok, err := get(other).ForceUnlock(t.Context()); !ok || err != nil {
					t.Errorf("ForceUnlock = %v, %v", ok, err)
				}
				select {
				case <-ctx.Done():
					took = time.Since(forced)
				case <-time.After(5 * time.Second):
					t.Error("Do's context not cancelled 5s after a force-unlock")
				}
				return nil
			})
			if !errors.Is(err, rlock.ErrLockLost) {
				t.Errorf("Do = %v, want ErrLockLost", err)
			}
			if took > 100*time.Millisecond {
				t.Errorf("Do's context cancelled %v after the force-unlock, want within 100ms", took)
			}
			t.Logf("force-unlock noticed %v after it was sent", took.Round(time.Microsecond))
		})
	}
}
