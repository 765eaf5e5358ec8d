package semaphore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
)

// These tests put relock's counting semaphore beside a stand-in for
// Redisson's RSemaphore (internal/redissontest): the count under the
// name, the channel redisson_sc:{name}. Redisson's release publishes the
// new count, whatever it is; relock's Release and AddPermits publish the
// new count when permits were given and it is above 0. A Redisson client
// lets min(n, its waiters) waiters try again for a message n; a relock
// Client wakes one waiter, which passes the wake-up on while permits are
// left.

// TestInteropCountingShared: one count, set, taken from, given back to,
// added to and drained from either side.
func TestInteropCountingShared(t *testing.T) {
	c := relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	ctx := t.Context()
	s, js := c.GetCountingSemaphore(name), j.CountingSemaphore(name)
	setCounting(t, s, 5)
	ok, err := js.TrySetPermits(ctx, 9)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson's trySetPermits over relock's count")

	ok, err = js.TryAcquireOnce(ctx, 2)
	require.NoError(t, err)
	require.True(t, ok, "Redisson's tryAcquire(2)")
	assert.Equal(t, 3, countOf(t, s), "relock's count after Redisson took 2")
	require.NoError(t, s.Acquire(ctx, 3))
	n, err := js.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "Redisson's count after relock took 3")
	ok, err = js.TryAcquireOnce(ctx, 1)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson's tryAcquire with nothing left")

	require.NoError(t, js.Release(ctx, 4), "Redisson gives back relock's permits and one of its own")
	ok, err = s.TryAcquire(ctx, 4, 0)
	require.NoError(t, err)
	assert.True(t, ok, "relock takes the 4 Redisson released")
	require.NoError(t, s.Release(ctx, 5))
	require.NoError(t, js.AddPermits(ctx, -1))
	assert.Equal(t, 4, countOf(t, s), "relock's count after Redisson's addPermits(-1)")
	n, err = js.DrainPermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n, "Redisson's drainPermits")
	require.NoError(t, s.AddPermits(ctx, 2))
	n, err = s.DrainPermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "relock's DrainPermits of what relock added")
	n, err = js.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "Redisson's count after both drained")
}

// TestInteropCountingWakes: a release on either side wakes a waiter on
// the other within the hand-off bound.
func TestInteropCountingWakes(t *testing.T) {
	t.Run("redisson release wakes relock", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		s, js := c.GetCountingSemaphore(name), j.CountingSemaphore(name)
		msgs := redissontest.Listen(t, raw, js.Channel())
		setCounting(t, s, 0)
		redissontest.Message(t, msgs, "0", "relock's TrySetPermits (the count)")
		got := redissontest.Async(func() error { return s.Acquire(t.Context(), 2) })
		redissontest.WaitSubscribers(t, raw, js.Channel(), 2)
		redissontest.Pending(t, got, "relock's waiter for two permits")
		require.NoError(t, js.Release(t.Context(), 1))
		redissontest.Message(t, msgs, "1", "Redisson's release of one (the new count)")
		redissontest.Pending(t, got, "relock's waiter for two permits beside one")
		start := time.Now()
		require.NoError(t, js.Release(t.Context(), 1))
		redissontest.Message(t, msgs, "2", "Redisson's second release (the new count)")
		redissontest.Handoff(t, got, start, "relock's waiter")
		assert.Equal(t, 0, countOf(t, s))
	})
	t.Run("relock release wakes redisson", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		s, js := c.GetCountingSemaphore(name), j.CountingSemaphore(name)
		setCounting(t, s, 1)
		require.NoError(t, s.Acquire(t.Context(), 1))
		msgs := redissontest.Listen(t, raw, js.Channel())
		got := redissontest.Async(func() error { return js.Acquire(t.Context(), 1) })
		redissontest.WaitSubscribers(t, raw, js.Channel(), 2)
		redissontest.WaitSleeping(t, j, js.Channel(), 1)
		redissontest.Pending(t, got, "Redisson's waiter beside relock's permit")
		start := time.Now()
		require.NoError(t, s.Release(t.Context(), 1))
		redissontest.Message(t, msgs, "1", "relock's release (the new count)")
		redissontest.Handoff(t, got, start, "Redisson's waiter")
		assert.Equal(t, 0, countOf(t, s))
	})
	t.Run("relock AddPermits wakes two redisson waiters", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		s, js := c.GetCountingSemaphore(name), j.CountingSemaphore(name)
		setCounting(t, s, 0)
		msgs := redissontest.Listen(t, raw, js.Channel())
		var waiters []<-chan redissontest.Result
		for range 2 {
			waiters = append(waiters, redissontest.Async(func() error { return js.Acquire(t.Context(), 1) }))
		}
		redissontest.WaitSubscribers(t, raw, js.Channel(), 2)
		redissontest.WaitSleeping(t, j, js.Channel(), 2)
		start := time.Now()
		require.NoError(t, s.AddPermits(t.Context(), 2))
		redissontest.Message(t, msgs, "2", "relock's AddPermits (the new count)")
		for i, w := range waiters {
			redissontest.Handoff(t, w, start, fmt.Sprint("Redisson waiter ", i))
		}
		assert.Equal(t, 0, countOf(t, s))
	})
}

// TestInteropCountingContention: relock callers and Redisson threads
// share two permits: every party finishes, and never more than two are
// out at once.
func TestInteropCountingContention(t *testing.T) {
	name := relocktest.Name(t)
	c := relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	s, js := c.GetCountingSemaphore(name), j.CountingSemaphore(name)
	setCounting(t, s, 2)
	var parties []redissontest.Party
	for i := range 3 {
		parties = append(parties, redissontest.Party{Side: redissontest.SideRelock, Name: fmt.Sprint("relock ", i),
			Lock:   func(ctx context.Context) error { return s.Acquire(ctx, 1) },
			Unlock: func(ctx context.Context) error { return s.Release(ctx, 1) }})
		parties = append(parties, redissontest.Party{Side: redissontest.SideRedisson, Name: fmt.Sprint("redisson ", i),
			Lock:   func(ctx context.Context) error { return js.Acquire(ctx, 1) },
			Unlock: func(ctx context.Context) error { return js.Release(ctx, 1) }})
	}
	sec := &redissontest.Section{Limit: 2}
	redissontest.Contend(t, sec, parties, 6, 5*time.Millisecond)
	assert.Equal(t, 2, countOf(t, s), "permits after the run")
	assert.Equal(t, 2, sec.MaxInside(), "most permits out at once")
}
