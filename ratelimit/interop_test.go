package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
)

// These tests put relock's rate limiter beside a stand-in for Redisson's
// RRateLimiter (internal/redissontest): the configuration hash, the
// value {name}:value and the grants {name}:permits, each grant packed as
// Redisson packs it. Redisson scores its grants on its client's clock
// (here the test machine's, which the server shares), relock on the
// server's.

// TestInteropRateOneWindow: grants of both sides count in one window,
// whoever set the rate; each side's count of what is left includes the
// other's grants, and a full window refuses both.
func TestInteropRateOneWindow(t *testing.T) {
	for _, javaSets := range []bool{true, false} {
		name := map[bool]string{true: "redisson sets the rate", false: "relock sets the rate"}[javaSets]
		t.Run(name, func(t *testing.T) {
			c := relocktest.Client(t)
			j := redissontest.New(t, relocktest.Raw(t))
			ctx := t.Context()
			n := relocktest.Name(t)
			l, jl := c.GetRateLimiter(n), j.RateLimiter(n)
			if javaSets {
				ok, err := jl.TrySetRate(ctx, redissontest.Overall, 5, time.Minute)
				require.NoError(t, err)
				require.True(t, ok)
				ok, err = l.TrySetRate(ctx, 9, time.Second)
				require.NoError(t, err)
				assert.False(t, ok, "relock's TrySetRate over Redisson's rate")
			} else {
				setRate(t, l, 5, time.Minute)
				ok, err := jl.TrySetRate(ctx, redissontest.Overall, 9, time.Second)
				require.NoError(t, err)
				assert.False(t, ok, "Redisson's trySetRate over relock's rate")
			}
			ok, err := jl.TryAcquireOnce(ctx, 2)
			require.NoError(t, err)
			require.True(t, ok, "Redisson takes 2 of 5")
			assert.Equal(t, 3, available(t, l), "relock's count after Redisson's grant")
			require.NoError(t, l.Acquire(ctx, 2))
			left, err := jl.AvailablePermits(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, left, "Redisson's count after relock's grant")
			ok, err = jl.TryAcquireOnce(ctx, 2)
			require.NoError(t, err)
			assert.False(t, ok, "Redisson asks 2 of the 1 left")
			ok, err = l.TryAcquire(ctx, 2, 0)
			require.NoError(t, err)
			assert.False(t, ok, "relock asks 2 of the 1 left")
			ok, err = jl.TryAcquireOnce(ctx, 1)
			require.NoError(t, err)
			require.True(t, ok, "Redisson takes the last one")
			ok, err = l.TryAcquire(ctx, 1, 0)
			require.NoError(t, err)
			assert.False(t, ok, "relock beside a full window")
		})
	}
}

// TestInteropRateGrantsLeave: each side's waiter goes on when the other
// side's grants leave the window, no sooner.
func TestInteropRateGrantsLeave(t *testing.T) {
	const interval = 400 * time.Millisecond
	t.Run("relock waits for redisson's grant", func(t *testing.T) {
		c := relocktest.Client(t)
		j := redissontest.New(t, relocktest.Raw(t))
		n := relocktest.Name(t)
		l, jl := c.GetRateLimiter(n), j.RateLimiter(n)
		setRate(t, l, 1, interval)
		start := time.Now()
		ok, err := jl.TryAcquireOnce(t.Context(), 1)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, l.Acquire(t.Context(), 1))
		waited := time.Since(start)
		// Redisson scored its grant before sending it, at or after start.
		assert.GreaterOrEqual(t, waited, interval-5*time.Millisecond, "relock went on before Redisson's grant left the window")
		assert.Less(t, waited, interval+redissontest.HandoffBound, "relock went on long after Redisson's grant left the window")
	})
	t.Run("redisson waits for relock's grant", func(t *testing.T) {
		c := relocktest.Client(t)
		j := redissontest.New(t, relocktest.Raw(t))
		n := relocktest.Name(t)
		l, jl := c.GetRateLimiter(n), j.RateLimiter(n)
		setRate(t, l, 1, interval)
		start := time.Now()
		require.NoError(t, l.Acquire(t.Context(), 1))
		ok, err := jl.TryAcquire(t.Context(), 1, 5*time.Second)
		require.NoError(t, err)
		require.True(t, ok)
		waited := time.Since(start)
		assert.GreaterOrEqual(t, waited, interval-5*time.Millisecond, "Redisson went on before relock's grant left the window")
		assert.Less(t, waited, interval+redissontest.HandoffBound, "Redisson went on long after relock's grant left the window")
	})
}

// TestInteropRateContention: relock callers and Redisson threads take
// permits of a window of 6 per 2s for 1s, many times more often than
// that: exactly 6 are granted, both sides together.
func TestInteropRateContention(t *testing.T) {
	c := relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	n := relocktest.Name(t)
	l, jl := c.GetRateLimiter(n), j.RateLimiter(n)
	setRate(t, l, 6, 2*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	var relockGot, redissonGot, relockTried, redissonTried atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				ok, err := l.TryAcquire(ctx, 1, 0)
				if err != nil || ctx.Err() != nil {
					return
				}
				relockTried.Add(1)
				if ok {
					relockGot.Add(1)
				}
			}
		})
		wg.Go(func() {
			for {
				ok, err := jl.TryAcquireOnce(ctx, 1)
				if err != nil || ctx.Err() != nil {
					return
				}
				redissonTried.Add(1)
				if ok {
					redissonGot.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 6, relockGot.Load()+redissonGot.Load(), "permits granted in one window (relock %d, Redisson %d)",
		relockGot.Load(), redissonGot.Load())
	assert.Greater(t, relockTried.Load(), int64(6), "relock's attempts")
	assert.Greater(t, redissonTried.Load(), int64(6), "Redisson's attempts")
}

// TestInteropRatePerClient: a rate of type PER_CLIENT, set by Redisson,
// gives each client a window of its own: relock's Client counts in its
// own keys.
func TestInteropRatePerClient(t *testing.T) {
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	n := relocktest.Name(t)
	jl := j.RateLimiter(n)
	ok, err := jl.TrySetRate(t.Context(), redissontest.PerClient, 2, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	for _, l := range []interface {
		TryAcquire(context.Context, int, time.Duration) (bool, error)
	}{c1.GetRateLimiter(n), c2.GetRateLimiter(n)} {
		ok, err := l.TryAcquire(t.Context(), 2, 0)
		require.NoError(t, err)
		assert.True(t, ok, "a client's own window")
		ok, err = l.TryAcquire(t.Context(), 1, 0)
		require.NoError(t, err)
		assert.False(t, ok, "a client's own window, full")
	}
	ok, err = jl.TryAcquireOnce(t.Context(), 2)
	require.NoError(t, err)
	assert.True(t, ok, "Redisson's own window")
}
