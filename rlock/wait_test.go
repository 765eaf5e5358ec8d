package rlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// numsub is the number of subscribers of channel, or -1 when the server
// does not answer: it never fails the test, so conditions of
// relocktest.Eventually use it.
func numsub(raw rueidis.Client, channel string) int64 { return relocktest.Subscribers(raw, channel) }

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
	require.NoError(t, l.Lock(a))
	got := lockAsync(l, b)
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return numsub(raw, layout.Channel(l.Name())) == 1
	})
	start := time.Now()
	require.NoError(t, l.Unlock(a))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to take over after Unlock (the lease is 30s)"))
	assert.LessOrEqual(t, time.Since(start), time.Second, "the waiter's take-over after Unlock: well under the 30s lease")
	_ = l.Unlock(b)
}

func TestOneSubscriptionForManyWaiters(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	channel := layout.Channel(l.Name())
	holder := rlock.WithOwner(t.Context(), "holder")
	require.NoError(t, l.Lock(holder))
	const n = 50
	// Each release wakes the next waiter; were it to publish nothing, each
	// waiter would sleep for the 30s lease it saw. The waiters give up at
	// this deadline and say so, instead of wg.Wait blocking for minutes.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	ready := make(chan struct{}, n)
	for range n {
		wg.Go(func() {
			h := c.GetLock(l.Name()) // anonymous: each waiter is its own owner
			ready <- struct{}{}
			if !assert.NoError(t, h.Lock(ctx), "a waiter's Lock: the releases did not hand the lock on within 10s") {
				return
			}
			assert.NoError(t, h.Unlock(ctx))
		})
	}
	for range n {
		relocktest.Receive(t, ready, 5*time.Second, "the waiters to start")
	}
	relocktest.Eventually(t, 5*time.Second, "waiters to subscribe", func() bool { return numsub(raw, channel) == 1 })
	assert.EqualValues(t, 1, numsub(raw, channel), "PUBSUB NUMSUB with %d waiters", n)
	require.NoError(t, l.Unlock(holder))
	wg.Wait()
	relocktest.Eventually(t, 5*time.Second, "the subscription to end", func() bool { return numsub(raw, channel) == 0 })
}

func TestPubSubConnectionKilled(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	got := lockAsync(l, rlock.WithOwner(t.Context(), "b"))
	channel := layout.Channel(l.Name())
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool { return numsub(raw, channel) == 1 })
	require.NoError(t, raw.Do(t.Context(), raw.B().ClientKill().TypePubsub().Build()).Error())
	// Release at once: the message may go out while nobody listens. The
	// waiter must still get the lock, promptly.
	start := time.Now()
	require.NoError(t, l.Unlock(a))
	require.NoError(t, relocktest.Receive(t, got, 10*time.Second, "the waiter to get the lock after CLIENT KILL TYPE pubsub"))
	assert.LessOrEqual(t, time.Since(start), 5*time.Second, "the waiter's take-over after the kill")
	// The subscription is made again: the next waiter is subscribed and
	// woken by the next release.
	third := lockAsync(l, rlock.WithOwner(t.Context(), "c"))
	relocktest.Eventually(t, 5*time.Second, "the channel to be subscribed again", func() bool { return numsub(raw, channel) == 1 })
	require.NoError(t, l.Unlock(rlock.WithOwner(t.Context(), "b")))
	require.NoError(t, relocktest.Receive(t, third, 10*time.Second, "the next waiter to be woken after the resubscription"))
	_ = l.Unlock(rlock.WithOwner(t.Context(), "c"))
}

func TestVanishedHolderTakenOverAtLeaseEnd(t *testing.T) {
	c := relocktest.Client(t)
	l := c.GetLock(relocktest.Name(t))
	lease := 300 * time.Millisecond
	// The holder takes a fixed lease and never unlocks (it "crashed").
	require.NoError(t, l.LockLease(rlock.WithOwner(t.Context(), "crashed"), lease))
	start := time.Now()
	b := rlock.WithOwner(t.Context(), "b")
	require.NoError(t, l.Lock(b))
	d := time.Since(start)
	assert.GreaterOrEqual(t, d, lease-50*time.Millisecond, "the take-over, after the start of the %v lease: not before its end", lease)
	assert.LessOrEqual(t, d, lease+300*time.Millisecond, "the take-over, after the start of the %v lease: promptly at its end", lease)
	_ = l.Unlock(b)
}

func TestCancelledWaiterLeavesNoSubscription(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	l := c.GetLock(relocktest.Name(t))
	channel := layout.Channel(l.Name())
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	ctx, cancel := context.WithCancel(rlock.WithOwner(t.Context(), "b"))
	got := lockAsync(l, ctx)
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool { return numsub(raw, channel) == 1 })
	cancel()
	err := relocktest.Receive(t, got, 5*time.Second, "the cancelled Lock to return")
	assert.ErrorIs(t, err, rlock.ErrNotAcquired, "Lock")
	assert.ErrorIs(t, err, context.Canceled, "Lock")
	relocktest.Eventually(t, 5*time.Second, "the subscription to end", func() bool { return numsub(raw, channel) == 0 })
	_ = l.Unlock(a)
}

func TestCloseEndsWaits(t *testing.T) {
	holderClient := relocktest.Client(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, holderClient.GetLock(name).Lock(a))
	defer holderClient.GetLock(name).Unlock(a)
	got := lockAsync(c.GetLock(name), t.Context())
	raw := relocktest.Raw(t)
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return numsub(raw, layout.Channel(name)) == 1
	})
	_ = c.Close()
	err := relocktest.Receive(t, got, 5*time.Second, "Close to end the wait")
	assert.ErrorIs(t, err, rlock.ErrNotAcquired, "Lock ended by Close")
	assert.ErrorIs(t, err, rlock.ErrClosed, "Lock ended by Close")
}

// TestCloseDuringAttempt: a Close that lands while a waiter's attempt is
// in flight, whose reply is then the closing connection's error, ends the
// wait as a Close does: ErrNotAcquired and ErrClosed (the closing error
// used to come back alone); a single attempt returns ErrClosed.
func TestCloseDuringAttempt(t *testing.T) {
	for _, wait := range []time.Duration{time.Minute, 0} {
		f := relocktest.NewFaulty(relocktest.Raw(t))
		c, err := rlock.New(f)
		require.NoError(t, err)
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
		assert.False(t, ok, "TryLock(wait %v) closed during its attempt", wait)
		assert.ErrorIs(t, err, rlock.ErrClosed, "TryLock(wait %v) closed during its attempt", wait)
		if wait != 0 {
			assert.ErrorIs(t, err, rlock.ErrNotAcquired, "TryLock(wait %v) closed during its attempt", wait)
		} else {
			assert.NotErrorIs(t, err, rlock.ErrNotAcquired, "TryLock(wait 0) closed during its attempt: a single attempt")
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
	relocktest.Eventually(t, 5*time.Second, "the waiter to subscribe", func() bool { return numsub(raw, channel) == 1 })
	// Redisson's unlock: delete the hash, publish 0 on the channel.
	raw.Do(t.Context(), raw.B().Del().Key(name).Build())
	raw.Do(t.Context(), raw.B().Publish().Channel(channel).Message("0").Build())
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "a Redisson-style unlock to wake the waiter"))
	_ = l.Unlock(t.Context())
}
