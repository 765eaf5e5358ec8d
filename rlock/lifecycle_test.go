package rlock_test

import (
	"context"
	"errors"
	"github.com/relock-go/relock/internal/layout"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// The tests of this file each pin one way a hold used to end silently or
// leave something behind. Each fails on the code before the hold
// lifecycle was rebuilt.

// lostCounter counts the losses a Client reports.
type lostCounter struct{ n atomic.Int32 }

func (c *lostCounter) option() rlock.Option {
	return rlock.WithLostHandler(func(string, string, error) { c.n.Add(1) })
}

// held checks that the owner in ctx holds l in Redis and that its hold is
// tracked: Done is open.
func held(t *testing.T, l *rlock.Lock, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-l.Done(ctx):
		t.Errorf("%s: Done is closed while the owner holds the lock (cause %v)", what, context.Cause(l.HoldContext(ctx)))
	default:
	}
	if ok, err := l.IsHeldByOwner(ctx); !ok || err != nil {
		t.Errorf("%s: IsHeldByOwner = %v, %v, want true", what, ok, err)
	}
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
	if err := l.Lock(b); err != nil {
		t.Fatal(err)
	}
	got := lockAsync(l, a)
	relocktest.Eventually(t, 5*time.Second, "a to wait", func() bool {
		n, _ := numsubOf(t, relocktest.Raw(t), l)
		return n == 1
	})
	if err := l.Unlock(a); !errors.Is(err, rlock.ErrNotHeld) {
		t.Fatalf("Unlock by the waiting owner = %v, want ErrNotHeld", err)
	}
	if err := l.Unlock(b); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	held(t, l, a, "after the wait")
	outlive(t, l, a, 3)
	held(t, l, a, "three watchdog timeouts later")
	if err := l.Unlock(a); err != nil {
		t.Errorf("Unlock = %v, want nil", err)
	}
	if n := lost.n.Load(); n != 0 {
		t.Errorf("%d losses reported, want 0", n)
	}
}

// numsubOf is the number of subscribers of l's channel.
func numsubOf(t *testing.T, raw rueidis.Client, l *rlock.Lock) (int64, error) {
	return numsub(t, raw, layout.Channel(l.Name())), nil
}

// TestOneOwnerManyGoroutines: goroutines of one owner lock and unlock
// concurrently; every Lock that returns nil is a tracked hold, and when
// they are done the lock is free and nothing was lost.
func TestOneOwnerManyGoroutines(t *testing.T) {
	var lost lostCounter
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(time.Second), lost.option())
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	var wg sync.WaitGroup
	var failures atomic.Int32
	for range 2 {
		wg.Go(func() {
			for range 150 {
				if err := l.Lock(a); err != nil {
					t.Error(err)
					return
				}
				select {
				case <-l.Done(a):
					failures.Add(1)
				default:
				}
				if err := l.Unlock(a); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Errorf("%d Locks returned nil with the hold already ended", n)
	}
	if locked, err := l.IsLocked(t.Context()); locked || err != nil {
		t.Errorf("IsLocked after every Unlock = %v, %v, want false", locked, err)
	}
	if n := lost.n.Load(); n != 0 {
		t.Errorf("%d losses reported, want 0", n)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetLock(relocktest.Name(t))
	h := rlock.WithOwner(t.Context(), "holder")
	if err := l.Lock(h); err != nil {
		t.Fatal(err)
	}
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
	if err := l.Unlock(h); err != nil {
		t.Fatal(err)
	}
	errs := map[string]error{}
	for _, o := range owners {
		errs[o] = <-results[o]
	}
	switch {
	case errs["w1"] == nil && errs["w2"] == nil:
		t.Fatal("both waiters hold the lock")
	case errs["w1"] != nil && errs["w2"] != nil:
		t.Fatalf("neither waiter got the lock: w1: %v; w2: %v", errs["w1"], errs["w2"])
	}
	for _, o := range owners {
		if errs[o] == nil {
			if err := l.Unlock(ctxs[o]); err != nil {
				t.Fatal(err)
			}
		} else if !errors.Is(errs[o], context.Canceled) {
			t.Errorf("the failed waiter's Lock = %v, want its context's end", errs[o])
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
		func() {
			defer func() {
				if v := recover(); v != "boom" {
					t.Errorf("recovered %v, want the function's own panic value", v)
				}
			}()
			_ = l.Do(ctx, func(context.Context) error { panic("boom") })
		}()
		if locked, err := l.IsLocked(t.Context()); locked || err != nil {
			t.Errorf("IsLocked after Do's function panicked = %v, %v, want false", locked, err)
		}
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
	if err := c.GetLock(name).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.GetLock(name).Unlock(ctx); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("another Client's ownerless Unlock = %v, want ErrNotHeld", err)
	}
	if n, err := c.GetLock(name).HoldCount(ctx); n != 1 || err != nil {
		t.Errorf("HoldCount on a new handle = %d, %v, want 1", n, err)
	}
	if err := c.GetLock(name).Unlock(ctx); err != nil {
		t.Fatalf("ownerless Unlock on another handle = %v, want nil", err)
	}
	if locked, _ := c.GetLock(name).IsLocked(ctx); locked {
		t.Error("still locked after the ownerless Unlock")
	}
	if err := c.GetLock(name).Unlock(ctx); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("a second ownerless Unlock = %v, want ErrNotHeld", err)
	}
}

// TestCancelledFirstAcquisitionLeavesNothing: the caller's context ends
// while its first acquisition's script is in flight and no reply comes;
// the call gives back whatever the script won before it returns (it used
// to leave the hold for the whole lease).
func TestCancelledFirstAcquisitionLeavesNothing(t *testing.T) {
	f := relocktest.NewFaulty(relocktest.Raw(t))
	c, err := rlock.New(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockAcquire.SHA1}, N: 1, Run: true, Hang: true})
	// Reading the token (a way to look whether the attempt won) gets no
	// answer either.
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.FencedToken.SHA1}, N: -1, Reply: relocktest.LostReply()})
	ctx, cancel := context.WithTimeout(a, 200*time.Millisecond)
	defer cancel()
	if err := l.Lock(ctx); !errors.Is(err, rlock.ErrNotAcquired) {
		t.Fatalf("Lock whose reply never came = %v, want ErrNotAcquired", err)
	}
	if locked, err := l.IsLocked(t.Context()); locked || err != nil {
		t.Errorf("IsLocked right after the failed Lock = %v, %v, want false", locked, err)
	}
	if err := l.Unlock(a); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Unlock after the failed Lock = %v, want ErrNotHeld", err)
	}
}

// TestUnlockWritesNothingElse: lock and unlock leave no key behind (they
// used to write a latch key per unlock), and an Unlock that returns
// ErrNotHeld sends nothing at all.
func TestUnlockWritesNothingElse(t *testing.T) {
	raw := redistest.Start(t).Client(t)
	f := relocktest.NewFaulty(raw)
	c, err := rlock.New(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	before := relocktest.DBSize(t, raw)
	a := rlock.WithOwner(t.Context(), "a")
	for _, l := range []interface {
		Lock(context.Context) error
		Unlock(context.Context) error
	}{c.GetLock(relocktest.Name(t)), c.GetFairLock(relocktest.Name(t))} {
		for range 20 {
			if err := l.Lock(a); err != nil {
				t.Fatal(err)
			}
			if err := l.Lock(a); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := l.Unlock(a); err != nil {
					t.Fatal(err)
				}
			}
		}
		sent := f.Commands()
		if err := l.Unlock(a); !errors.Is(err, rlock.ErrNotHeld) {
			t.Fatalf("Unlock of nothing = %v, want ErrNotHeld", err)
		}
		if n := f.Commands() - sent; n != 0 {
			t.Errorf("Unlock of nothing sent %d commands, want 0", n)
		}
	}
	if after := relocktest.DBSize(t, raw); after != before {
		t.Errorf("DBSIZE went from %d to %d over lock/unlock cycles, want no key left", before, after)
	}
}

// TestReservedOwnersRefused: owners of the form relock makes up for
// anonymous holds are refused from WithOwner, so no user's owner can be
// one of them.
func TestReservedOwnersRefused(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	for _, owner := range []string{"anon-1", "anon-42"} {
		if err := l.Lock(rlock.WithOwner(t.Context(), owner)); !errors.Is(err, rlock.ErrInvalidArgument) {
			t.Errorf("Lock as %q = %v, want ErrInvalidArgument", owner, err)
		}
	}
	for _, owner := range []string{"anon-", "anon-x", "anon-1a", "anonymous"} {
		ctx := rlock.WithOwner(t.Context(), owner)
		if err := l.Lock(ctx); err != nil {
			t.Errorf("Lock as %q = %v, want nil", owner, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
	// Do's own owner, made up for a context without one, is accepted
	// through fn's context.
	err := l.Do(t.Context(), func(ctx context.Context) error {
		n, err := l.HoldCount(ctx)
		if n != 1 || err != nil {
			t.Errorf("HoldCount with Do's context = %d, %v, want 1", n, err)
		}
		return l.Lock(ctx) // re-enters
	})
	if err != nil {
		t.Errorf("Do = %v", err)
	}
}

// TestTwoWaitersOfOneOwner: two goroutines of one owner wait for a lock;
// one unlock message grants it to the owner, and both return at once (the
// second re-enters) instead of the second waiting for a second wake-up.
func TestTwoWaitersOfOneOwner(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	b := rlock.WithOwner(t.Context(), "b")
	a := rlock.WithOwner(t.Context(), "a")
	if err := l.Lock(b); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(a, 10*time.Second) // far less than the 30s lease
	defer cancel()
	first, second := lockAsync(l, ctx), lockAsync(l, ctx)
	relocktest.Eventually(t, 5*time.Second, "both to wait", func() bool {
		n, _ := numsubOf(t, relocktest.Raw(t), l)
		return n == 1
	})
	if err := l.Unlock(b); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatalf("a waiting Lock of the owner = %v, want nil", err)
		}
	}
	if n, _ := l.HoldCount(a); n != 2 {
		t.Errorf("HoldCount = %d, want 2", n)
	}
	for range 2 {
		if err := l.Unlock(a); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExpiredAnonymousHoldReported: an ownerless hold on a fixed lease
// runs out; when the Client's next ownerless Lock takes the lock, the old
// hold is reported lost (it used to stay recorded, out of reach, for the
// life of the Client), and the new one is the Client's anonymous hold.
func TestExpiredAnonymousHoldReported(t *testing.T) {
	var lost lostCounter
	c := relocktest.Client(t, lost.option())
	l := c.GetLock(relocktest.Name(t))
	ctx := t.Context()
	if err := l.LockLease(ctx, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	first := l.Done(ctx)
	// The lease runs out in Redis; nothing tells the Client.
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first:
	default:
		t.Error("the expired hold's Done is still open after a new ownerless hold replaced it")
	}
	if n := lost.n.Load(); n != 1 {
		t.Errorf("%d losses reported, want 1 (the expired hold)", n)
	}
	held(t, l, ctx, "the new ownerless hold")
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock of the new hold = %v", err)
	}
}
