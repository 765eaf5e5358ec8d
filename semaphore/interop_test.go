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
	"github.com/relock-go/relock/semaphore"
)

// These tests put relock's semaphore beside a stand-in for a Redisson
// client (internal/redissontest) that runs
// RedissonPermitExpirableSemaphore's scripts and waits as it does: the
// available count, the lease sorted set whose members are the permits'
// 16 raw bytes (scores: the lease's end in wall-clock ms, or
// 922337203685477 for none), the channel redisson_sc:{name} carrying
// counts.
//
// Messages: Redisson's release(id) publishes the new available count, its
// release of several permits in one call (tryRelease(ids)) the number
// released, addPermits the number added, and a permit whose lease ended
// brings the new count; relock publishes the new available count on a
// release and the number added by AddPermits. A Redisson client lets
// min(n, its waiters) waiters go on for a message n; relock lets one
// waiter go on, which passes the wake-up on while permits are left. Each
// side's waiters go on at the other's messages.

func acquireResult(ctx context.Context, s *semaphore.Semaphore, ids chan<- string) <-chan redissontest.Result {
	return redissontest.Async(func() error {
		id, err := s.Acquire(ctx, 0)
		if err == nil {
			ids <- id
		}
		return err
	})
}

// TestInteropSharedPermits: both sides take from and give back to one
// available count; permits taken on one side are counted on the other,
// and each side can release the other's permit by its ID.
func TestInteropSharedPermits(t *testing.T) {
	c := relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	ctx := t.Context()
	s, js := c.GetSemaphore(name), j.Semaphore(name)
	setPermits(t, s, 3)
	ok, err := js.TrySetPermits(ctx, 5)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson trySetPermits over relock's count")

	forever, ok, err := js.TryAcquireOnce(ctx)
	require.NoError(t, err)
	require.True(t, ok, "Redisson permit without a lease")
	leased, ok, err := js.TryAcquire(ctx, 0, time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "Redisson permit with a lease")
	mine, err := s.Acquire(ctx, 0)
	require.NoError(t, err, "relock permit")
	assert.Equal(t, 0, available(t, s))
	n, err := js.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "Redisson's count")
	_, ok, err = s.TryAcquire(ctx, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "relock beside three permits of three")
	_, ok, err = js.TryAcquireOnce(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson beside three permits of three")

	require.NoError(t, s.Release(ctx, forever), "relock releases Redisson's permit")
	assert.ErrorIs(t, js.Release(ctx, forever), redissontest.ErrPermitNotHeld, "Redisson releases it again")
	require.NoError(t, js.Release(ctx, mine), "Redisson releases relock's permit")
	assert.ErrorIs(t, s.Release(ctx, mine), semaphore.ErrNotHeld, "relock releases it again")
	require.NoError(t, s.AddPermits(ctx, 2))
	n, err = js.AvailablePermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n, "Redisson's count after relock's AddPermits")
	require.NoError(t, js.Release(ctx, leased))
	assert.Equal(t, 5, available(t, s))
}

// TestInteropSemaphoreWakes: a release on either side wakes a waiter on
// the other within the hand-off bound.
func TestInteropSemaphoreWakes(t *testing.T) {
	t.Run("redisson release wakes relock", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		s, js := c.GetSemaphore(name), j.Semaphore(name)
		msgs := redissontest.Listen(t, raw, js.Channel())
		setPermits(t, s, 1)
		redissontest.Message(t, msgs, "1", "relock's TrySetPermits (the count)")
		held, err := js.Acquire(t.Context(), 0)
		require.NoError(t, err)
		ids := make(chan string, 1)
		got := acquireResult(t.Context(), s, ids)
		redissontest.WaitSubscribers(t, raw, js.Channel(), 2)
		redissontest.Pending(t, got, "relock's waiter beside Redisson's permit")
		start := time.Now()
		require.NoError(t, js.Release(t.Context(), held))
		redissontest.Message(t, msgs, "1", "Redisson's release (the new count)")
		redissontest.Handoff(t, got, start, "relock's waiter")
		// relock's permit is in Redisson's form: Redisson can release it.
		id := <-ids
		require.NoError(t, js.Release(t.Context(), id))
		assert.ErrorIs(t, s.Release(t.Context(), id), semaphore.ErrNotHeld)
		assert.Equal(t, 1, available(t, s))
	})
	t.Run("redisson release of two wakes two relock waiters", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		s, js := c.GetSemaphore(name), j.Semaphore(name)
		setPermits(t, s, 2)
		held, err := js.AcquireN(t.Context(), 2, 0)
		require.NoError(t, err)
		msgs := redissontest.Listen(t, raw, js.Channel())
		ids := make(chan string, 2)
		a, b := acquireResult(t.Context(), s, ids), acquireResult(t.Context(), s, ids)
		redissontest.WaitSubscribers(t, raw, js.Channel(), 2)
		start := time.Now()
		n, err := js.TryReleaseAll(t.Context(), held)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		redissontest.Message(t, msgs, "2", "Redisson's release of two (the number released)")
		redissontest.Handoff(t, a, start, "relock's first waiter")
		redissontest.Handoff(t, b, start, "relock's second waiter")
		for range 2 {
			require.NoError(t, s.Release(t.Context(), <-ids))
		}
	})
	t.Run("relock release wakes redisson", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		s, js := c.GetSemaphore(name), j.Semaphore(name)
		setPermits(t, s, 1)
		held, err := s.Acquire(t.Context(), 0)
		require.NoError(t, err)
		msgs := redissontest.Listen(t, raw, js.Channel())
		ids := make(chan string, 1)
		got := redissontest.Async(func() error {
			id, err := js.Acquire(t.Context(), 0)
			ids <- id
			return err
		})
		redissontest.WaitSubscribers(t, raw, js.Channel(), 2)
		redissontest.WaitSleeping(t, j, js.Channel(), 1)
		redissontest.Pending(t, got, "Redisson's waiter beside relock's permit")
		start := time.Now()
		require.NoError(t, s.Release(t.Context(), held))
		redissontest.Message(t, msgs, "1", "relock's release (the new count)")
		redissontest.Handoff(t, got, start, "Redisson's waiter")
		require.NoError(t, s.Release(t.Context(), <-ids), "relock releases Redisson's permit")
	})
	t.Run("relock AddPermits wakes two redisson waiters", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		s, js := c.GetSemaphore(name), j.Semaphore(name)
		setPermits(t, s, 0)
		msgs := redissontest.Listen(t, raw, js.Channel())
		ids := make(chan string, 2)
		var waiters []<-chan redissontest.Result
		for range 2 {
			waiters = append(waiters, redissontest.Async(func() error {
				id, err := js.Acquire(t.Context(), 0)
				ids <- id
				return err
			}))
		}
		redissontest.WaitSubscribers(t, raw, js.Channel(), 2)
		redissontest.WaitSleeping(t, j, js.Channel(), 2)
		start := time.Now()
		require.NoError(t, s.AddPermits(t.Context(), 2))
		redissontest.Message(t, msgs, "2", "relock's AddPermits (the number added)")
		for i, w := range waiters {
			redissontest.Handoff(t, w, start, fmt.Sprint("Redisson waiter ", i))
		}
		for range 2 {
			require.NoError(t, js.Release(t.Context(), <-ids))
		}
	})
}

// TestInteropSemaphoreContention: relock owners and Redisson threads
// share two permits: every party finishes, and never more than two hold
// one at once.
func TestInteropSemaphoreContention(t *testing.T) {
	name := relocktest.Name(t)
	c := relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	s, js := c.GetSemaphore(name), j.Semaphore(name)
	setPermits(t, s, 2)
	var parties []redissontest.Party
	for i := range 3 {
		var id string
		parties = append(parties, redissontest.Party{Side: redissontest.SideRelock, Name: fmt.Sprint("relock ", i),
			Lock: func(ctx context.Context) (err error) {
				id, err = s.Acquire(ctx, 0)
				return err
			},
			Unlock: func(ctx context.Context) error { return s.Release(ctx, id) }})
	}
	for i := range 3 {
		var id string
		lease := time.Duration(0)
		if i%2 == 1 {
			lease = 30 * time.Second
		}
		parties = append(parties, redissontest.Party{Side: redissontest.SideRedisson, Name: fmt.Sprint("redisson ", i),
			Lock: func(ctx context.Context) (err error) {
				id, err = js.Acquire(ctx, lease)
				return err
			},
			Unlock: func(ctx context.Context) error { return js.Release(ctx, id) }})
	}
	sec := &redissontest.Section{Limit: 2}
	redissontest.Contend(t, sec, parties, 6, 5*time.Millisecond)
	assert.Equal(t, 2, available(t, s), "permits after the run")
	assert.Equal(t, 2, sec.MaxInside(), "most permits held at once")
}
