package rlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// These tests put relock's RLock and FencedLock beside a stand-in for a
// Redisson client (internal/redissontest): Redisson's scripts, fields
// <uuid>:<threadId>, watchdog lease and waiting, on the same server.

// TestInteropLockExclusion: a Redisson hold, re-entered, keeps relock out
// until its last level goes, and a relock hold keeps Redisson out; the
// TTL each side reports is the other's lease.
func TestInteropLockExclusion(t *testing.T) {
	c := relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	ctx := t.Context()
	a := rlock.WithOwner(ctx, "a")
	l, jl := c.GetLock(name), j.Lock(name)

	require.NoError(t, jl.Lock(ctx, 1, 0))
	require.NoError(t, jl.Lock(ctx, 1, 0), "Redisson re-entry")
	n, err := jl.HoldCount(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "Redisson hold count")

	ok, err := l.TryLock(a, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "relock TryLock beside a Redisson hold")
	left, err := l.RemainingLease(a)
	require.NoError(t, err)
	assert.InDelta(t, redissontest.DefaultWatchdogTimeout.Seconds(), left.Seconds(), 2, "relock sees Redisson's watchdog lease")

	require.NoError(t, jl.Unlock(ctx, 1))
	ok, err = l.TryLock(a, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "relock TryLock beside one Redisson level")
	require.NoError(t, jl.Unlock(ctx, 1))

	require.NoError(t, l.Lock(a))
	require.NoError(t, l.Lock(a), "relock re-entry")
	took, ttl, err := jl.Attempt(ctx, 2, 0)
	require.NoError(t, err)
	assert.False(t, took, "Redisson attempt beside a relock hold")
	assert.InDelta(t, lockcore.DefaultWatchdogTimeout.Milliseconds(), ttl, 2000, "Redisson sees relock's lease as the TTL")
	ok, err = jl.TryLockOnce(ctx, 2)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson tryLock() beside a relock hold")
	assert.ErrorIs(t, jl.Unlock(ctx, 2), redissontest.ErrIllegalMonitorState, "Redisson unlock of relock's hold")

	require.NoError(t, l.Unlock(a))
	ok, err = jl.TryLockOnce(ctx, 2)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson tryLock() beside one relock level")
	require.NoError(t, l.Unlock(a))
	ok, err = jl.TryLockOnce(ctx, 2)
	require.NoError(t, err)
	assert.True(t, ok, "Redisson tryLock() once relock left")
	assert.ErrorIs(t, l.Unlock(a), rlock.ErrNotHeld, "relock unlock of Redisson's hold")
	require.NoError(t, jl.Unlock(ctx, 2))
	locked, err := l.IsLocked(ctx)
	require.NoError(t, err)
	assert.False(t, locked)
}

// TestInteropLockWakes: a release on either side wakes a waiter on the
// other within the hand-off bound (the waiter's fallback is the holder's
// 30s TTL, so only the message can bring it that soon). Both sides
// publish "0" on redisson_lock__channel:{name}.
func TestInteropLockWakes(t *testing.T) {
	t.Run("redisson release wakes relock", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		jl := j.Lock(name)
		require.NoError(t, jl.Lock(t.Context(), 1, 0))
		a := rlock.WithOwner(t.Context(), "a")
		got := redissontest.Async(func() error { return c.GetLock(name).Lock(a) })
		redissontest.WaitSubscribers(t, raw, layout.Channel(name), 1)
		redissontest.Pending(t, got, "relock's waiter beside a Redisson hold")
		start := time.Now()
		require.NoError(t, jl.Unlock(t.Context(), 1))
		redissontest.Handoff(t, got, start, "relock's waiter")
		require.NoError(t, c.GetLock(name).Unlock(a))
	})
	t.Run("relock release wakes redisson", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		a := rlock.WithOwner(t.Context(), "a")
		require.NoError(t, c.GetLock(name).Lock(a))
		jl := j.Lock(name)
		got := redissontest.Async(func() error { return jl.Lock(t.Context(), 1, 0) })
		redissontest.WaitSubscribers(t, raw, layout.Channel(name), 1)
		redissontest.WaitSleeping(t, j, layout.Channel(name), 1)
		redissontest.Pending(t, got, "Redisson's waiter beside a relock hold")
		start := time.Now()
		require.NoError(t, c.GetLock(name).Unlock(a))
		redissontest.Handoff(t, got, start, "Redisson's waiter")
		require.NoError(t, jl.Unlock(t.Context(), 1))
	})
	t.Run("force unlock wakes the other side", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		jl := j.Lock(name)
		a, b := rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")

		require.NoError(t, jl.Lock(t.Context(), 1, 0))
		got := redissontest.Async(func() error { return c.GetLock(name).Lock(a) })
		redissontest.WaitSubscribers(t, raw, layout.Channel(name), 1)
		start := time.Now()
		forced, err := jl.ForceUnlock(t.Context())
		require.NoError(t, err)
		require.True(t, forced)
		redissontest.Handoff(t, got, start, "relock's waiter after Redisson's forceUnlock")

		jgot := redissontest.Async(func() error { return jl.Lock(t.Context(), 2, 0) })
		redissontest.WaitSubscribers(t, raw, layout.Channel(name), 2)
		redissontest.WaitSleeping(t, j, layout.Channel(name), 1)
		start = time.Now()
		forced, err = c.GetLock(name).ForceUnlock(b)
		require.NoError(t, err)
		require.True(t, forced)
		redissontest.Handoff(t, jgot, start, "Redisson's waiter after relock's ForceUnlock")
		require.NoError(t, jl.Unlock(t.Context(), 2))
	})
	t.Run("redisson release wakes a wake-one client", func(t *testing.T) {
		// A registered wake-one Client listens on the lock's channel too,
		// where Redisson publishes.
		c := relocktest.Client(t, rlock.WithWakeOne())
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		jl := j.Lock(name)
		require.NoError(t, jl.Lock(t.Context(), 1, 0))
		a := rlock.WithOwner(t.Context(), "a")
		got := redissontest.Async(func() error { return c.GetLock(name).Lock(a) })
		redissontest.WaitSubscribers(t, raw, layout.Channel(name), 1)
		relocktest.Eventually(t, 5*time.Second, "the relock waiter to register for wake-ups", func() bool {
			n, err := raw.Do(t.Context(), raw.B().Zcard().Key(layout.Wakers(name)).Build()).AsInt64()
			return err == nil && n == 1
		})
		start := time.Now()
		require.NoError(t, jl.Unlock(t.Context(), 1))
		redissontest.Handoff(t, got, start, "the wake-one Client's waiter")
		require.NoError(t, c.GetLock(name).Unlock(a))
	})
	t.Run("wake-one release wakes redisson", func(t *testing.T) {
		// A relock Client with wake-one on wakes one registered Client on
		// its own channel, and publishes on the lock's channel too while
		// others (Redisson's waiters) listen there.
		holder := relocktest.Client(t, rlock.WithWakeOne())
		other := relocktest.Client(t, rlock.WithWakeOne())
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		jl := j.Lock(name)
		h, g := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "g")
		require.NoError(t, holder.GetLock(name).Lock(h))
		relockGot := redissontest.Async(func() error { return other.GetLock(name).Lock(g) })
		redissontest.WaitSubscribers(t, raw, layout.Channel(name), 1)
		redisGot := redissontest.Async(func() error { return jl.Lock(t.Context(), 1, 0) })
		redissontest.WaitSubscribers(t, raw, layout.Channel(name), 2)
		relocktest.Eventually(t, 5*time.Second, "the relock waiter to register for wake-ups", func() bool {
			n, err := raw.Do(t.Context(), raw.B().Zcard().Key(layout.Wakers(name)).Build()).AsInt64()
			return err == nil && n == 1
		})

		start := time.Now()
		require.NoError(t, holder.GetLock(name).Unlock(h))
		// Whoever comes first, the other follows on its release.
		timer := time.NewTimer(5 * time.Second)
		defer timer.Stop()
		select {
		case r := <-relockGot:
			require.NoError(t, r.Err)
			assert.LessOrEqual(t, r.At.Sub(start), redissontest.HandoffBound, "first hand-off (to relock)")
			start = time.Now()
			require.NoError(t, other.GetLock(name).Unlock(g))
			redissontest.Handoff(t, redisGot, start, "Redisson's waiter after the wake-one Client's release")
			require.NoError(t, jl.Unlock(t.Context(), 1))
		case r := <-redisGot:
			require.NoError(t, r.Err)
			assert.LessOrEqual(t, r.At.Sub(start), redissontest.HandoffBound, "first hand-off (to Redisson)")
			start = time.Now()
			require.NoError(t, jl.Unlock(t.Context(), 1))
			redissontest.Handoff(t, relockGot, start, "the wake-one Client's waiter after Redisson's release")
			require.NoError(t, other.GetLock(name).Unlock(g))
		case <-timer.C:
			require.FailNow(t, "neither waiter went on within 5s of the wake-one Client's release")
		}
	})
}

// TestInteropLockContention: relock owners on two Clients and Redisson
// threads on two Redisson clients take one lock in turn; every party
// finishes, and no two hold it at once.
func TestInteropLockContention(t *testing.T) {
	name := relocktest.Name(t)
	var parties []redissontest.Party
	for ci := range 2 {
		c := relocktest.Client(t)
		for o := range 2 {
			owner := fmt.Sprintf("c%d-o%d", ci, o)
			octx := func(ctx context.Context) context.Context { return rlock.WithOwner(ctx, owner) }
			parties = append(parties, redissontest.Party{Side: redissontest.SideRelock, Name: "relock " + owner,
				Lock:   func(ctx context.Context) error { return c.GetLock(name).Lock(octx(ctx)) },
				Unlock: func(ctx context.Context) error { return c.GetLock(name).Unlock(octx(ctx)) }})
		}
		j := redissontest.New(t, relocktest.Raw(t))
		jl := j.Lock(name)
		for tid := range int64(2) {
			parties = append(parties, redissontest.Party{Side: redissontest.SideRedisson, Name: fmt.Sprintf("redisson j%d-t%d", ci, tid),
				Lock:   func(ctx context.Context) error { return jl.Lock(ctx, tid, 0) },
				Unlock: func(ctx context.Context) error { return jl.Unlock(ctx, tid) }})
		}
	}
	redissontest.Contend(t, &redissontest.Section{}, parties, 8, 2*time.Millisecond)
}

// TestInteropWatchdogs: each side's watchdog keeps its hold past its
// watchdog timeout, and the other side stays out meanwhile.
func TestInteropWatchdogs(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(timeout))
	j := redissontest.New(t, relocktest.Raw(t), redissontest.WithWatchdogTimeout(timeout))
	name := relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	l, jl := c.GetLock(name), j.Lock(name)

	require.NoError(t, jl.Lock(t.Context(), 1, 0))
	// The loops' sleeps are the scenario, not waits: each side tries
	// every sixth of a lease, for four leases, and must stay out.
	for start := time.Now(); time.Since(start) < 4*timeout; time.Sleep(timeout / 6) {
		ok, err := l.TryLock(a, 0, 0)
		require.NoError(t, err)
		require.False(t, ok, "relock took the lock %v into Redisson's renewed hold", time.Since(start))
	}
	require.NoError(t, jl.Unlock(t.Context(), 1))

	require.NoError(t, l.Lock(a))
	for start := time.Now(); time.Since(start) < 4*timeout; time.Sleep(timeout / 6) {
		ok, err := jl.TryLockOnce(t.Context(), 1)
		require.NoError(t, err)
		require.False(t, ok, "Redisson took the lock %v into relock's renewed hold", time.Since(start))
	}
	require.NoError(t, l.Unlock(a))
}

// TestInteropFencedTokens: relock's and Redisson's fenced locks share
// the counter redisson_lock_token:{name}: tokens handed out alternately by
// the two sides strictly increase (a Redisson re-entry takes a token too,
// and relock's next token is above it), and each side keeps the other out.
func TestInteropFencedTokens(t *testing.T) {
	c := relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	ctx := t.Context()
	a := rlock.WithOwner(ctx, "a")
	l, jl := c.GetFencedLock(name), j.FencedLock(name)

	var last int64
	next := func(token int64, who string) {
		t.Helper()
		assert.Greater(t, token, last, "%s's token after %d", who, last)
		last = token
	}
	for range 3 {
		token, err := l.LockAndGetToken(a)
		require.NoError(t, err)
		next(token, "relock")
		ok, err := jl.TryLockOnce(ctx, 1)
		require.NoError(t, err)
		assert.False(t, ok, "Redisson beside relock's fenced hold")
		require.NoError(t, l.Unlock(a))

		token, err = jl.LockAndGetToken(ctx, 1)
		require.NoError(t, err)
		next(token, "Redisson")
		// lock() re-enters and moves the counter without a token.
		require.NoError(t, jl.Lock(ctx, 1, 0))
		counter, err := jl.Token(ctx)
		require.NoError(t, err)
		next(counter, "Redisson's re-entry")
		_, ok, err = l.TryLockAndGetToken(a, 0, 0)
		require.NoError(t, err)
		assert.False(t, ok, "relock beside Redisson's fenced hold")
		require.NoError(t, jl.Unlock(ctx, 1))
		require.NoError(t, jl.Unlock(ctx, 1))
	}
	token, err := l.LockAndGetToken(a)
	require.NoError(t, err)
	next(token, "relock")
	held, err := l.Token(a)
	require.NoError(t, err)
	assert.Equal(t, token, held, "relock's Token of its hold")
	require.NoError(t, l.Unlock(a))
}

// TestInteropFencedContention: a mixed contention run on a fenced lock;
// the tokens seen inside the critical section strictly increase in the
// order the holders entered, whichever side they are on.
func TestInteropFencedContention(t *testing.T) {
	name := relocktest.Name(t)
	var (
		mu   sync.Mutex
		last int64
		bad  []string
	)
	record := func(who string, token int64) {
		mu.Lock()
		defer mu.Unlock()
		if token <= last {
			bad = append(bad, fmt.Sprintf("%s entered with token %d after %d", who, token, last))
		}
		last = token
	}
	var parties []redissontest.Party
	c := relocktest.Client(t)
	for o := range 3 {
		owner := fmt.Sprintf("o%d", o)
		parties = append(parties, redissontest.Party{Side: redissontest.SideRelock, Name: "relock " + owner,
			Lock: func(ctx context.Context) error {
				token, err := c.GetFencedLock(name).LockAndGetToken(rlock.WithOwner(ctx, owner))
				if err == nil {
					record(owner, token)
				}
				return err
			},
			Unlock: func(ctx context.Context) error { return c.GetFencedLock(name).Unlock(rlock.WithOwner(ctx, owner)) }})
	}
	j := redissontest.New(t, relocktest.Raw(t))
	jl := j.FencedLock(name)
	for tid := range int64(3) {
		who := fmt.Sprintf("redisson t%d", tid)
		parties = append(parties, redissontest.Party{Side: redissontest.SideRedisson, Name: who,
			Lock: func(ctx context.Context) error {
				token, ok, err := jl.TryLockAndGetToken(ctx, tid, 10*time.Second, 0)
				if err == nil && !ok {
					err = fmt.Errorf("no lock within 10s")
				}
				if err == nil {
					record(who, token)
				}
				return err
			},
			Unlock: func(ctx context.Context) error { return jl.Unlock(ctx, tid) }})
	}
	redissontest.Contend(t, &redissontest.Section{}, parties, 6, 2*time.Millisecond)
	assert.Empty(t, bad, "tokens out of order")
}
