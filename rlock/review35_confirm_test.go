package rlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// grantTo makes l's owner "a" hold, starts owner "b" waiting on l with
// lock (Lock or LockLease), and releases a until a release grants the
// lock to b (a few rounds at most: b must be asleep and offered when a's
// Unlock claims it). It returns b's context.
func grantTo(t *testing.T, l *rlock.Lock, lock func(ctx context.Context) error) context.Context {
	t.Helper()
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	for round := range 50 {
		require.NoError(t, l.Lock(a))
		res := make(chan error, 1)
		go func() { res <- lock(b) }()
		// b's call sleeps (subscribed) after its first attempts; give it
		// a few ms per round, more each round, to get there.
		time.Sleep(time.Duration(round+1) * 2 * time.Millisecond)
		g0 := lockcore.GrantsMade()
		require.NoError(t, l.Unlock(a))
		require.NoError(t, relocktest.Receive(t, res, 10*time.Second, "b's call"))
		if lockcore.GrantsMade() > g0 {
			return b
		}
		require.NoError(t, l.Unlock(b))
	}
	t.Fatal("no release granted the lock to b in 50 rounds")
	return nil
}

// lostRecorder records the Client's loss reports.
type lostRecorder struct {
	mu     sync.Mutex
	causes []error
}

func (r *lostRecorder) handler(name, owner string, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.causes = append(r.causes, cause)
}

func (r *lostRecorder) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.causes)
}

// TestReview35FixedLeaseConfirmFails: a LockLease(10s) waiter is granted
// the lock; the one confirmation of its lease (lock_renew.lua, a second
// after the grant) gets no reply (a transient fault). Nothing tries
// again: the hold's lease in Redis stays the 3s window, and another
// Client takes the lock about 3s after the grant while b's watched hold
// (its HoldContext) still stands and no loss was reported. Without the
// grant, the same lost reply costs nothing (the acquisition wrote the 10s
// lease itself).
func TestReview35FixedLeaseConfirmFails(t *testing.T) {
	f := relocktest.NewFaulty(relocktest.Raw(t))
	var lost lostRecorder
	c, err := rlock.New(f, rlock.WithLostHandler(lost.handler))
	require.NoError(t, err)
	defer c.Close()
	other := relocktest.Client(t)
	name := relocktest.Name(t)
	l := c.GetLock(name)
	b := grantTo(t, l, func(ctx context.Context) error { return l.LockLease(ctx, 10*time.Second) })
	granted := time.Now()
	hold := l.HoldContext(b)
	// The confirmation, due a second after the grant, gets no reply.
	rule := f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockRenew.SHA1}, N: 1, Reply: relocktest.LostReply()})
	relocktest.Eventually(t, 3*time.Second, "the confirmation to be sent", func() bool { return rule.Hits() > 0 })
	// (The context outlives the wait: with the confirmation retried, x
	// does not get the lock, and its call must end by its wait limit.)
	wctx, cancel := context.WithTimeout(t.Context(), 12*time.Second)
	defer cancel()
	ok, err := other.GetLock(name).TryLock(rlock.WithOwner(wctx, "x"), 6*time.Second, 0)
	require.NoError(t, err)
	took := time.Since(granted)
	if ok {
		defer func() { _ = other.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "x")) }()
	}
	require.False(t, ok && hold.Err() == nil && lost.n() == 0,
		"another Client took the lock %v after the grant, within b's 10s lease, while b's hold stands and no loss was reported", took)
	// The confirmation that got no answer is tried again within the
	// window: the second try sets the lease, and b keeps the lock.
	require.False(t, ok, "another Client took the lock %v after the grant: the failed confirmation was not tried again", took)
	require.NoError(t, hold.Err())
	require.Zero(t, lost.n())
}

// TestReview35WatchdogConfirmFails: a Lock waiter (watchdog lease, 30s)
// is granted the lock; the renewals of the hold fail for a while after
// the grant (a blip of Redis or the network of 3s, which a hold acquired
// by its own attempt rides out: its lease in Redis is 30s). The granted
// hold's lease in Redis is the 3s window; the watchdog counts its 30s
// from the grant and retries a renewal that failed a second later, so
// the window runs out in Redis unseen: another Client takes the lock
// while b's hold stands and no loss is reported.
func TestReview35WatchdogConfirmFails(t *testing.T) {
	f := relocktest.NewFaulty(relocktest.Raw(t))
	var lost lostRecorder
	c, err := rlock.New(f, rlock.WithLostHandler(lost.handler))
	require.NoError(t, err)
	defer c.Close()
	other := relocktest.Client(t)
	name := relocktest.Name(t)
	l := c.GetLock(name)
	b := grantTo(t, l, func(ctx context.Context) error { return l.Lock(ctx) })
	granted := time.Now()
	hold := l.HoldContext(b)
	rule := f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockRenew.SHA1}, N: -1, Reply: relocktest.LostReply()})
	wctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ok, err := other.GetLock(name).TryLock(rlock.WithOwner(wctx, "x"), 5*time.Second, 0)
	require.NoError(t, err)
	took := time.Since(granted)
	f.Clear()
	if ok {
		defer func() { _ = other.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "x")) }()
	}
	t.Logf("renewals failed: %d", rule.Hits())
	require.False(t, ok && hold.Err() == nil && lost.n() == 0,
		"another Client took the lock %v after the grant, while b's hold stands and no loss was reported", took)
}
