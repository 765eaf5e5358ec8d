package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// aliveKey is the key of the heartbeats of relock's waiters on name.
func aliveKey(name string) string { return layout.Alive(name) }

// heldBy takes l for owner, failing t if it cannot, and returns the
// owner's context.
func heldBy(t *testing.T, l *fairlock.Lock, owner string) context.Context {
	t.Helper()
	ctx := rlock.WithOwner(t.Context(), owner)
	if err := l.Lock(ctx); err != nil {
		t.Fatalf("%s: %v", owner, err)
	}
	return ctx
}

func queue(t *testing.T, raw rueidis.Client, name string) []string {
	t.Helper()
	q, err := raw.Do(t.Context(), raw.B().Lrange().Key(layout.Queue(name)).Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestArrivalOrder queues waiters from two Clients one after another and
// checks that they acquire in that order, and that the queue list shows
// them in that order while they wait.
func TestArrivalOrder(t *testing.T) {
	c1 := relocktest.Client(t)
	c2 := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := heldBy(t, c1.GetFairLock(name), "holder")

	const n = 6
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
		want  []string
	)
	for i := range n {
		c := []*rlock.Client{c1, c2}[i%2]
		owner := "w" + strconv.Itoa(i)
		want = append(want, c.ID()+":"+owner)
		wg.Go(func() {
			ctx := rlock.WithOwner(t.Context(), owner)
			l := c.GetFairLock(name)
			if err := l.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := l.Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
		// The next waiter arrives only after this one is queued.
		relocktest.Eventually(t, 5*time.Second, "waiter "+owner+" queued", func() bool {
			return len(queue(t, raw, name)) == i+1
		})
	}
	if got := queue(t, raw, name); !slices.Equal(got, want) {
		t.Errorf("queue = %v, want %v", got, want)
	}
	if err := c1.GetFairLock(name).Unlock(holder); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if wantOrder := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(order, wantOrder) {
		t.Errorf("acquisition order = %v, want %v", order, wantOrder)
	}
	if q := queue(t, raw, name); len(q) != 0 {
		t.Errorf("queue after all = %v, want empty", q)
	}
}

func TestCancelledWaiterLeavesQueue(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetFairLock(name)
	holder := heldBy(t, l, "holder")
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "quitter"))
	errc := make(chan error, 1)
	go func() { errc <- l.Lock(ctx) }()
	relocktest.Eventually(t, 5*time.Second, "waiter queued", func() bool { return len(queue(t, raw, name)) == 1 })
	cancel()
	err := <-errc
	if !errors.Is(err, fairlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("Lock = %v, want ErrNotAcquired and Canceled", err)
	}
	if q := queue(t, raw, name); len(q) != 0 {
		t.Errorf("queue after cancel = %v, want empty", q)
	}
	zcard, _ := raw.Do(t.Context(), raw.B().Zcard().Key(layout.Timeouts(name)).Build()).AsInt64()
	if zcard != 0 {
		t.Errorf("timeout set has %d entries after cancel, want 0", zcard)
	}
	// A TryLock whose wait ends leaves the queue too.
	ok, err := l.TryLock(rlock.WithOwner(t.Context(), "patient"), 50*time.Millisecond, 0)
	if ok || err != nil {
		t.Errorf("TryLock = %v, %v, want false, nil", ok, err)
	}
	if q := queue(t, raw, name); len(q) != 0 {
		t.Errorf("queue after TryLock = %v, want empty", q)
	}
	_ = l.Unlock(holder)
}

// TestDeadWaiterDoesNotStall leaves a relock waiter in the queue the way a
// process that died would (queued with Redisson's deadline minutes away,
// its heartbeat no longer refreshed), and checks that the next waiter gets
// the lock within the documented bound once it is free: the heartbeat,
// not the deadline, decides.
func TestDeadWaiterDoesNotStall(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetFairLock(name)
	holder := heldBy(t, l, "holder")
	// A vanished Client's waiter: queued, with a heartbeat that runs out
	// WaiterTimeout from now, then gone.
	ghost := "0b5e55ed-0000-4000-8000-000000000000:ghost"
	now := time.Now()
	require.NoError(t, raw.Do(t.Context(), raw.B().Rpush().Key(layout.Queue(name)).Element(ghost).Build()).Error())
	require.NoError(t, raw.Do(t.Context(), raw.B().Zadd().Key(layout.Timeouts(name)).ScoreMember().
		ScoreMember(float64(now.Add(lockcore.DefaultFairLockWaitTimeout).UnixMilli()), ghost).Build()).Error())
	require.NoError(t, raw.Do(t.Context(), raw.B().Zadd().Key(aliveKey(name)).ScoreMember().
		ScoreMember(float64(now.Add(fairlock.WaiterTimeout).UnixMilli()), ghost).Build()).Error())

	got := redissontest.Async(func() error {
		ctx := rlock.WithOwner(t.Context(), "next")
		if err := l.Lock(ctx); err != nil {
			return err
		}
		return l.Unlock(ctx)
	})
	relocktest.Eventually(t, 5*time.Second, "second waiter queued", func() bool { return len(queue(t, raw, name)) == 2 })
	released := time.Now()
	require.NoError(t, l.Unlock(holder))
	bound := fairlock.WaiterTimeout + fairlock.RefreshInterval + 250*time.Millisecond
	select {
	case r := <-got:
		require.NoError(t, r.Err)
		d := r.At.Sub(released)
		assert.LessOrEqual(t, d, bound, "the next waiter acquired %v after the release", d)
		t.Logf("a dead waiter at the head delayed the queue by %v (bound %v + %v)", d, fairlock.WaiterTimeout, fairlock.RefreshInterval)
	case <-time.After(5 * time.Second):
		t.Fatalf("the next waiter still waits 5s after the release (queue %v)", queue(t, raw, name))
	}
	assert.Empty(t, queue(t, raw, name), "queue at the end")
}

func TestFixedLeasePassesToHead(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	l := c.GetFairLock(name)
	if err := l.LockLease(rlock.WithOwner(t.Context(), "crashed"), 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx := rlock.WithOwner(t.Context(), "head")
	if err := l.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 200*time.Millisecond+fairlock.RefreshInterval+200*time.Millisecond {
		t.Errorf("head acquired %v after a 200ms lease began", d)
	}
	_ = l.Unlock(ctx)
}

func TestReentryAndNotHeld(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetFairLock(relocktest.Name(t))
	ctx := rlock.WithOwner(t.Context(), "a")
	for range 3 {
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := l.HoldCount(ctx); n != 3 {
		t.Errorf("HoldCount = %d, want 3", n)
	}
	if err := l.Unlock(rlock.WithOwner(t.Context(), "b")); !errors.Is(err, rlock.ErrNotHeld) {
		t.Errorf("Unlock by non-holder = %v, want rlock.ErrNotHeld", err)
	}
	for range 3 {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Unlock(ctx); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Errorf("Unlock of a free fair lock = %v, want ErrNotHeld", err)
	}
}

func TestTryOnceRespectsQueue(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetFairLock(name)
	holder := heldBy(t, l, "holder")
	waiter := rlock.WithOwner(t.Context(), "waiter")
	done := make(chan error, 1)
	go func() {
		err := l.Lock(waiter)
		if err == nil {
			err = l.Unlock(waiter)
		}
		done <- err
	}()
	relocktest.Eventually(t, 5*time.Second, "waiter queued", func() bool { return len(queue(t, raw, name)) == 1 })
	// A newcomer's single attempt does not jump the queue, and leaves no trace.
	if ok, err := l.TryLock(rlock.WithOwner(t.Context(), "newcomer"), 0, 0); ok || err != nil {
		t.Errorf("TryLock = %v, %v, want false, nil", ok, err)
	}
	if q := queue(t, raw, name); len(q) != 1 {
		t.Errorf("queue = %v, want only the waiter", q)
	}
	_ = l.Unlock(holder)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDoOnFairLock(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetFairLock(relocktest.Name(t))
	ran := false
	err := l.Do(t.Context(), func(ctx context.Context) error {
		held, err := l.IsHeldByOwner(ctx)
		if err != nil || !held {
			return fmt.Errorf("IsHeldByOwner in Do = %v, %v", held, err)
		}
		ran = true
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("Do = %v, ran %v", err, ran)
	}
	if locked, _ := l.IsLocked(t.Context()); locked {
		t.Error("locked after Do")
	}
}
