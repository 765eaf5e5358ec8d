package rlock_test

import (
	"context"
	"errors"
	"github.com/relock-go/relock/internal/layout"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

func numsub(t *testing.T, raw rueidis.Client, channel string) int64 {
	t.Helper()
	m, err := raw.Do(t.Context(), raw.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
	if err != nil {
		t.Fatal(err)
	}
	return m[channel]
}

// lockAsync starts l.Lock(ctx) and reports when it returns.
func lockAsync(l *rlock.Lock, ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Lock(ctx) }()
	return done
}

func TestWaiterTakesOverAtUnlock(t *testing.T) {
	c := relocktest.Client(t) // 30s watchdog lease: a poller would wait it out
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	got := lockAsync(l, b)
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return numsub(t, raw, layout.Channel(l.Name())) == 1
	})
	start := time.Now()
	if err := l.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("waiter took %v to take over after Unlock, want well under the 30s lease", d)
	}
	_ = l.Unlock(b)
}

func TestOneSubscriptionForManyWaiters(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	channel := layout.Channel(l.Name())
	holder := rlock.WithOwner(t.Context(), "holder")
	if err := l.Lock(holder); err != nil {
		t.Fatal(err)
	}
	const n = 50
	var wg sync.WaitGroup
	ready := make(chan struct{}, n)
	for range n {
		wg.Go(func() {
			ctx := t.Context() // anonymous: each waiter is its own owner
			h := c.GetLock(l.Name())
			ready <- struct{}{}
			if err := h.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			if err := h.Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	for range n {
		<-ready
	}
	relocktest.Eventually(t, 5*time.Second, "waiters to subscribe", func() bool { return numsub(t, raw, channel) == 1 })
	if got := numsub(t, raw, channel); got != 1 {
		t.Errorf("PUBSUB NUMSUB = %d with %d waiters, want 1", got, n)
	}
	if err := l.Unlock(holder); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	relocktest.Eventually(t, 5*time.Second, "the subscription to end", func() bool { return numsub(t, raw, channel) == 0 })
}

func TestPubSubConnectionKilled(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	got := lockAsync(l, rlock.WithOwner(t.Context(), "b"))
	channel := layout.Channel(l.Name())
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool { return numsub(t, raw, channel) == 1 })
	if err := raw.Do(t.Context(), raw.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// Release at once: the message may go out while nobody listens. The
	// waiter must still get the lock, promptly.
	start := time.Now()
	if err := l.Unlock(a); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter stranded after CLIENT KILL TYPE pubsub")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("waiter took %v after the kill", d)
	}
	// The subscription is made again: the next waiter is subscribed and
	// woken by the next release.
	third := lockAsync(l, rlock.WithOwner(t.Context(), "c"))
	relocktest.Eventually(t, 5*time.Second, "the channel to be subscribed again", func() bool { return numsub(t, raw, channel) == 1 })
	if err := l.Unlock(rlock.WithOwner(t.Context(), "b")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-third:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next waiter was not woken after the resubscription")
	}
	_ = l.Unlock(rlock.WithOwner(t.Context(), "c"))
}

func TestVanishedHolderTakenOverAtLeaseEnd(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	lease := 300 * time.Millisecond
	// The holder takes a fixed lease and never unlocks (it "crashed").
	if err := l.LockLease(rlock.WithOwner(t.Context(), "crashed"), lease); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b := rlock.WithOwner(t.Context(), "b")
	if err := l.Lock(b); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	if d < lease-50*time.Millisecond {
		t.Errorf("took over after %v, before the %v lease ended", d, lease)
	}
	if d > lease+300*time.Millisecond {
		t.Errorf("took over %v after the %v lease began, want promptly at its end", d, lease)
	}
	_ = l.Unlock(b)
}

func TestCancelledWaiterLeavesNoSubscription(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	channel := layout.Channel(l.Name())
	a := rlock.WithOwner(t.Context(), "a")
	if err := l.Lock(a); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "b"))
	got := lockAsync(l, ctx)
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool { return numsub(t, raw, channel) == 1 })
	cancel()
	if err := <-got; !errors.Is(err, rlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("Lock = %v, want ErrNotAcquired and Canceled", err)
	}
	relocktest.Eventually(t, 5*time.Second, "the subscription to end", func() bool { return numsub(t, raw, channel) == 0 })
	_ = l.Unlock(a)
}

func TestCloseEndsWaits(t *testing.T) {
	holderClient := relocktest.Client(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	if err := holderClient.GetLock(name).Lock(a); err != nil {
		t.Fatal(err)
	}
	defer holderClient.GetLock(name).Unlock(a)
	got := lockAsync(c.GetLock(name), t.Context())
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return numsub(t, relocktest.Raw(t), layout.Channel(name)) == 1
	})
	_ = c.Close()
	err := <-got
	if !errors.Is(err, rlock.ErrNotAcquired) || !errors.Is(err, rlock.ErrClosed) {
		t.Errorf("Lock ended by Close = %v, want ErrNotAcquired and ErrClosed", err)
	}
}

// TestCloseDuringAttempt: a Close that lands while a waiter's attempt is
// in flight, whose reply is then the closing connection's error, ends the
// wait as a Close does: ErrNotAcquired and ErrClosed (the closing error
// used to come back alone); a single attempt returns ErrClosed.
func TestCloseDuringAttempt(t *testing.T) {
	for _, wait := range []time.Duration{time.Minute, 0} {
		f := relocktest.NewFaulty(relocktest.Raw(t))
		c, err := rlock.New(f)
		if err != nil {
			t.Fatal(err)
		}
		l := c.GetLock(relocktest.Name(t))
		var closing sync.WaitGroup
		f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockAcquire.SHA1}, N: 1, Reply: rueidis.NewErrorResult(rueidis.ErrClosing),
			Before: func([]string) {
				closing.Go(func() { _ = c.Close() })
				relocktest.Eventually(t, 5*time.Second, "Close to begin", func() bool {
					_, err := l.IsLocked(t.Context())
					return errors.Is(err, rlock.ErrClosed)
				})
			}})
		ok, err := l.TryLock(t.Context(), wait, 0)
		closing.Wait()
		if ok || !errors.Is(err, rlock.ErrClosed) || (wait != 0) != errors.Is(err, rlock.ErrNotAcquired) {
			t.Errorf("TryLock(wait %v) closed during its attempt = %v, %v; want ErrClosed (and ErrNotAcquired when waiting)", wait, ok, err)
		}
	}
}

// TestRedissonUnlockWakesWaiter publishes what a Redisson client publishes
// when it releases a lock: our waiter must wake at once.
func TestRedissonUnlockWakesWaiter(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	// A Java holder: field "<uuid>:<thread id>", 30s lease.
	javaField := "5c2c1d9e-7a4b-4e0f-9d43-0123456789ab:1"
	raw.Do(t.Context(), raw.B().Hset().Key(name).FieldValue().FieldValue(javaField, "1").Build())
	raw.Do(t.Context(), raw.B().Pexpire().Key(name).Milliseconds(30000).Build())
	l := c.GetLock(name)
	got := lockAsync(l, t.Context())
	channel := layout.Channel(name)
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool { return numsub(t, raw, channel) == 1 })
	// Redisson's unlock: delete the hash, publish 0 on the channel.
	raw.Do(t.Context(), raw.B().Del().Key(name).Build())
	raw.Do(t.Context(), raw.B().Publish().Channel(channel).Message("0").Build())
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Redisson-style unlock did not wake the waiter")
	}
	_ = l.Unlock(t.Context())
}
