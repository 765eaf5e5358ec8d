package latch_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/rlock"
)

// These tests put relock's count-down latch beside a stand-in for a
// Redisson client (internal/redissontest) that runs
// RedissonCountDownLatch's scripts and waits as it does: its await()
// sleeps on a gate that "0" opens and "1" closes, with no time limit.
//
// Messages: both sides publish "1" when a count is set and "0" when the
// count reaches 0 (Redisson also publishes "1" when the latch is
// deleted). relock's waiters go on at "0" and ignore "1"; Redisson's open
// their gate at "0" and close it at "1".

// TestInteropLatchSharedCount: one count, set and counted down from
// either side.
func TestInteropLatchSharedCount(t *testing.T) {
	c := relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	ctx := t.Context()
	l, jl := c.GetCountDownLatch(name), j.CountDownLatch(name)

	ok, err := l.TrySetCount(ctx, 3)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = jl.TrySetCount(ctx, 5)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson trySetCount over relock's count")
	require.NoError(t, jl.CountDown(ctx))
	n, err := l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "relock's count after Redisson's countDown")
	require.NoError(t, l.CountDown(ctx))
	jn, err := jl.Count(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, jn, "Redisson's count after relock's CountDown")
	require.NoError(t, jl.CountDown(ctx))
	n, err = l.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "open")
	ok, err = jl.TrySetCount(ctx, 1)
	require.NoError(t, err)
	assert.True(t, ok, "Redisson sets an open latch again")
	ok, err = l.TrySetCount(ctx, 1)
	require.NoError(t, err)
	assert.False(t, ok, "relock TrySetCount over Redisson's count")
	require.NoError(t, l.CountDown(ctx))
}

// TestInteropLatchOpeningBeforeSubscription: the latch opens and is set
// again the moment relock's waiter has read the count for the first time,
// before it subscribes; the opening's "0" reaches nobody. relock's side,
// whichever it is, leaves its mark (relock's CountDown at 0, relock's
// TrySetCount where there was no count), and the waiter, which reads the
// new count once subscribed, finds the mark changed and goes on. When
// both are Redisson's, nothing is left: the waiter waits for the next
// opening.
func TestInteropLatchOpeningBeforeSubscription(t *testing.T) {
	type side struct {
		open func(l *latch.CountDownLatch, jl *redissontest.CountDownLatch) error
		set  func(l *latch.CountDownLatch, jl *redissontest.CountDownLatch) (bool, error)
	}
	relockOpens := func(l *latch.CountDownLatch, _ *redissontest.CountDownLatch) error {
		return l.CountDown(context.Background())
	}
	redissonOpens := func(_ *latch.CountDownLatch, jl *redissontest.CountDownLatch) error {
		return jl.CountDown(context.Background())
	}
	relockSets := func(l *latch.CountDownLatch, _ *redissontest.CountDownLatch) (bool, error) {
		return l.TrySetCount(context.Background(), 1)
	}
	redissonSets := func(_ *latch.CountDownLatch, jl *redissontest.CountDownLatch) (bool, error) {
		return jl.TrySetCount(context.Background(), 1)
	}
	for _, tc := range []struct {
		name   string
		s      side
		missed bool
	}{
		{"relock opens, redisson sets again", side{relockOpens, redissonSets}, false},
		{"redisson opens, relock sets again", side{redissonOpens, relockSets}, false},
		{"redisson opens, redisson sets again", side{redissonOpens, redissonSets}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := relocktest.Name(t)
			other := relocktest.Client(t)
			j := redissontest.New(t, relocktest.Raw(t))
			l, jl := other.GetCountDownLatch(name), j.CountDownLatch(name)
			ok, err := l.TrySetCount(t.Context(), 1)
			require.NoError(t, err)
			require.True(t, ok, "TrySetCount")
			c, reads := countingClient(t, name, func() {
				assert.NoError(t, tc.s.open(l, jl), "the opening")
				ok, err := tc.s.set(l, jl)
				assert.NoError(t, err, "the new count")
				assert.True(t, ok, "the new count")
			})
			ctx, cancel := context.WithTimeout(t.Context(), handoff)
			defer cancel()
			waiter := redissontest.Async(func() error { return c.GetCountDownLatch(name).Await(ctx) })
			if !tc.missed {
				got := relocktest.Receive(t, waiter, handoff, "the waiter to go on")
				assert.NoError(t, got.Err, "Await across an opening before its subscription")
				return
			}
			// The waiter reads, subscribes and reads again: then it sleeps
			// until the next opening.
			relocktest.Eventually(t, handoff, "the waiter to read twice", func() bool { return reads.Load() == 2 })
			redissontest.Pending(t, waiter, "the waiter, which no mark told of the opening")
			start := time.Now()
			require.NoError(t, jl.CountDown(t.Context()))
			redissontest.Handoff(t, waiter, start, "the waiter, at the next opening")
		})
	}
}

// TestInteropLatchWakes: the count reaching 0 on either side lets every
// waiter of the other side go on within the hand-off bound (Redisson's
// waiters have no other way to go on: await() sleeps without a limit).
func TestInteropLatchWakes(t *testing.T) {
	t.Run("relock opens, redisson goes on", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		l, jl := c.GetCountDownLatch(name), j.CountDownLatch(name)
		msgs := redissontest.Listen(t, raw, latch.Channel(name))
		ok, err := l.TrySetCount(t.Context(), 2)
		require.NoError(t, err)
		require.True(t, ok)
		redissontest.Message(t, msgs, "1", "relock's TrySetCount")
		var waiters []<-chan redissontest.Result
		for range 2 {
			waiters = append(waiters, redissontest.Async(func() error { return jl.Await(t.Context()) }))
		}
		redissontest.WaitSubscribers(t, raw, jl.Channel(), 2)
		require.NoError(t, l.CountDown(t.Context()))
		redissontest.NoMessage(t, msgs, "relock's CountDown to 1")
		for i, w := range waiters {
			redissontest.Pending(t, w, fmt.Sprint("Redisson waiter ", i, " at count 1"))
		}
		start := time.Now()
		require.NoError(t, l.CountDown(t.Context()))
		redissontest.Message(t, msgs, "0", "relock's CountDown to 0")
		for i, w := range waiters {
			redissontest.Handoff(t, w, start, fmt.Sprint("Redisson waiter ", i))
		}
	})
	t.Run("redisson opens, relock goes on", func(t *testing.T) {
		c1, c2 := relocktest.Client(t), relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		jl := j.CountDownLatch(name)
		msgs := redissontest.Listen(t, raw, latch.Channel(name))
		ok, err := jl.TrySetCount(t.Context(), 2)
		require.NoError(t, err)
		require.True(t, ok)
		redissontest.Message(t, msgs, "1", "Redisson's trySetCount")
		var waiters []<-chan redissontest.Result
		for _, c := range []*rlock.Client{c1, c1, c2} {
			waiters = append(waiters, redissontest.Async(func() error { return c.GetCountDownLatch(name).Await(t.Context()) }))
		}
		redissontest.WaitSubscribers(t, raw, latch.Channel(name), 3)
		require.NoError(t, jl.CountDown(t.Context()))
		for i, w := range waiters {
			redissontest.Pending(t, w, fmt.Sprint("relock waiter ", i, " at count 1"))
		}
		start := time.Now()
		require.NoError(t, jl.CountDown(t.Context()))
		redissontest.Message(t, msgs, "0", "Redisson's countDown to 0")
		for i, w := range waiters {
			redissontest.Handoff(t, w, start, fmt.Sprint("relock waiter ", i))
		}
	})
	t.Run("each side's new-count message", func(t *testing.T) {
		// Redisson's delete publishes "1" and leaves no count: relock's
		// waiter ignores it (as Redisson's own waiter does: its gate is
		// closed) and both go on only at the next "0". relock's
		// TrySetCount publishes "1" too, which closes Redisson's gate.
		//
		// Both waiters must have read the count before the delete (a
		// waiter that reads a deleted latch reads 0 and goes on, on
		// either side): relock's reads it again once subscribed, and
		// Redisson's sleeps on its gate after its last read.
		raw := relocktest.Raw(t)
		name := relocktest.Name(t)
		var reads atomic.Int32
		tap := relocktest.NewTap(relocktest.Raw(t), func(args []string) func(rueidis.RedisResult) {
			if len(args) == 2 && args[0] == "GET" && args[1] == name {
				return func(rueidis.RedisResult) { reads.Add(1) }
			}
			return nil
		})
		c, err := rlock.New(tap)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		j := redissontest.New(t, relocktest.Raw(t))
		l, jl := c.GetCountDownLatch(name), j.CountDownLatch(name)
		msgs := redissontest.Listen(t, raw, latch.Channel(name))
		ok, err := jl.TrySetCount(t.Context(), 1)
		require.NoError(t, err)
		require.True(t, ok)
		redissontest.Message(t, msgs, "1", "Redisson's trySetCount")
		relockWaiter := redissontest.Async(func() error { return l.Await(t.Context()) })
		redisWaiter := redissontest.Async(func() error { return jl.Await(t.Context()) })
		redissontest.WaitSubscribers(t, raw, latch.Channel(name), 3)
		relocktest.Eventually(t, 5*time.Second, "relock's waiter to read the count after subscribing",
			func() bool { return reads.Load() >= 2 })
		redissontest.WaitSleeping(t, j, latch.Channel(name), 1)
		deleted, err := jl.Delete(t.Context())
		require.NoError(t, err)
		require.True(t, deleted)
		redissontest.Message(t, msgs, "1", "Redisson's delete")
		ok, err = l.TrySetCount(t.Context(), 1)
		require.NoError(t, err)
		require.True(t, ok, "relock sets the deleted latch again")
		redissontest.Message(t, msgs, "1", "relock's TrySetCount")
		redissontest.Pending(t, relockWaiter, "relock's waiter after two new-count messages")
		redissontest.Pending(t, redisWaiter, "Redisson's waiter after two new-count messages")
		start := time.Now()
		require.NoError(t, l.CountDown(t.Context()))
		redissontest.Handoff(t, relockWaiter, start, "relock's waiter")
		redissontest.Handoff(t, redisWaiter, start, "Redisson's waiter")
		assert.Zero(t, j.Undecodable(), "messages Redisson could not decode")
	})
}

// TestInteropLatchMixedRun: rounds of one latch, set alternately by each
// side, counted down by relock and Redisson counters at once, awaited by
// waiters of both sides: no waiter goes on before the last count-down
// began, and every waiter goes on within the hand-off bound of it.
func TestInteropLatchMixedRun(t *testing.T) {
	const (
		rounds   = 3
		counters = 6
	)
	name := relocktest.Name(t)
	raw := relocktest.Raw(t)
	cs := []*rlock.Client{relocktest.Client(t), relocktest.Client(t)}
	js := []*redissontest.Client{redissontest.New(t, relocktest.Raw(t)), redissontest.New(t, relocktest.Raw(t))}
	for round := range rounds {
		if round%2 == 0 {
			ok, err := cs[0].GetCountDownLatch(name).TrySetCount(t.Context(), counters)
			require.NoError(t, err)
			require.True(t, ok)
		} else {
			ok, err := js[0].CountDownLatch(name).TrySetCount(t.Context(), counters)
			require.NoError(t, err)
			require.True(t, ok)
		}
		var (
			started atomic.Int64 // count-downs begun
			lastAt  atomic.Int64 // when the last one began (unix ns)
			wg      sync.WaitGroup
		)
		type done struct {
			who   string
			early bool
			at    time.Time
			err   error
		}
		results := make(chan done, 8)
		await := func(who string, fn func(ctx context.Context) error) {
			wg.Go(func() {
				err := fn(t.Context())
				results <- done{who: who, early: started.Load() < counters, at: time.Now(), err: err}
			})
		}
		for i, c := range cs {
			for k := range 2 {
				await(fmt.Sprintf("relock c%d w%d", i, k), c.GetCountDownLatch(name).Await)
			}
		}
		for i, j := range js {
			for k := range 2 {
				await(fmt.Sprintf("redisson j%d w%d", i, k), j.CountDownLatch(name).Await)
			}
		}
		redissontest.WaitSubscribers(t, raw, latch.Channel(name), 4)
		for k := range counters {
			var down func(ctx context.Context) error
			if k%2 == 0 {
				down = cs[k/2%2].GetCountDownLatch(name).CountDown
			} else {
				down = js[k/2%2].CountDownLatch(name).CountDown
			}
			wg.Go(func() {
				// The scenario: the count-downs spread over 35ms, so that
				// a waiter woken before the last one would show it.
				time.Sleep(time.Duration(k*7) * time.Millisecond)
				lastAt.Store(time.Now().UnixNano())
				started.Add(1)
				assert.NoError(t, down(t.Context()))
			})
		}
		for range 8 {
			r := relocktest.Receive(t, results, 5*time.Second, fmt.Sprintf("round %d: every waiter to go on", round))
			require.NoError(t, r.err, r.who)
			assert.False(t, r.early, "round %d: %s went on before the last count-down", round, r.who)
			d := r.at.Sub(time.Unix(0, lastAt.Load()))
			assert.LessOrEqual(t, d, redissontest.HandoffBound, "round %d: %s went on %v after the last count-down", round, r.who, d)
		}
		wg.Wait()
		n, err := cs[1].GetCountDownLatch(name).Count(t.Context())
		require.NoError(t, err)
		require.Zero(t, n, "round %d: count after every count-down", round)
	}
	for _, j := range js {
		assert.Zero(t, j.Undecodable(), "messages Redisson could not decode")
	}
}
