package semaphore_test

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

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

func setCounting(t *testing.T, s *semaphore.Counting, n int) {
	t.Helper()
	ok, err := s.TrySetPermits(t.Context(), n)
	require.NoError(t, err, "TrySetPermits(%d)", n)
	require.True(t, ok, "TrySetPermits(%d)", n)
}

func countOf(t *testing.T, s *semaphore.Counting) int {
	t.Helper()
	n, err := s.AvailablePermits(t.Context())
	require.NoError(t, err)
	return n
}

// rawCount is the count key as Redis holds it ("" when there is none).
func rawCount(t *testing.T, raw rueidis.Client, name string) string {
	t.Helper()
	v, err := raw.Do(t.Context(), raw.B().Get().Key(name).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// grants is the number of grants the counting semaphore name remembers.
func grants(t *testing.T, raw rueidis.Client, name string) int64 {
	t.Helper()
	n, err := raw.Do(t.Context(), raw.B().Zcard().Key(layout.CountingSemaphore(name).Grants).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// TestCountingPermits: the count is set once, taken n at a time (all or
// none), given back, added to and taken away from, and drained.
func TestCountingPermits(t *testing.T) {
	c := relocktest.Client(t)
	ctx := t.Context()
	s := c.GetCountingSemaphore(relocktest.Name(t))
	ok, err := s.TryAcquire(ctx, 1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "TryAcquire before the count is set")
	assert.Equal(t, 0, countOf(t, s), "AvailablePermits before the count is set")

	setCounting(t, s, 3)
	ok, err = s.TrySetPermits(ctx, 10)
	require.NoError(t, err)
	assert.False(t, ok, "TrySetPermits on a count already set")
	assert.Equal(t, 3, countOf(t, s))

	ok, err = s.TryAcquire(ctx, 2, 0)
	require.NoError(t, err)
	require.True(t, ok, "TryAcquire(2) of 3")
	assert.Equal(t, 1, countOf(t, s))
	ok, err = s.TryAcquire(ctx, 2, 0)
	require.NoError(t, err)
	assert.False(t, ok, "TryAcquire(2) with 1 available: all or none")
	assert.Equal(t, 1, countOf(t, s), "a refused TryAcquire takes nothing")
	require.NoError(t, s.Acquire(ctx, 1))
	assert.Equal(t, 0, countOf(t, s))

	require.NoError(t, s.Release(ctx, 3))
	assert.Equal(t, 3, countOf(t, s))
	require.NoError(t, s.AddPermits(ctx, -4))
	assert.Equal(t, -1, countOf(t, s), "more taken away than available")
	n, err := s.DrainPermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "DrainPermits of a count below 0")
	assert.Equal(t, -1, countOf(t, s), "DrainPermits leaves a count below 0 as it is")
	ok, err = s.TryAcquire(ctx, 1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "TryAcquire of a count below 0")
	require.NoError(t, s.AddPermits(ctx, 5))
	require.NoError(t, s.AddPermits(ctx, 0))
	n, err = s.DrainPermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n, "DrainPermits")
	assert.Equal(t, 0, countOf(t, s), "after DrainPermits")
	n, err = s.DrainPermits(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "DrainPermits of nothing")
}

// TestCountingInvalidArguments: bad input gets ErrInvalidArgument and
// changes nothing in Redis.
func TestCountingInvalidArguments(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	ctx := t.Context()
	name := relocktest.Name(t)
	s := c.GetCountingSemaphore(name)
	setCounting(t, s, 2)
	empty := c.GetCountingSemaphore("")
	tests := []struct {
		what string
		call func() error
	}{
		{"Acquire(0)", func() error { return s.Acquire(ctx, 0) }},
		{"Acquire(-1)", func() error { return s.Acquire(ctx, -1) }},
		{"TryAcquire(0)", func() error { _, err := s.TryAcquire(ctx, 0, 0); return err }},
		{"TryAcquire(-2)", func() error { _, err := s.TryAcquire(ctx, -2, time.Second); return err }},
		{"TryAcquire negative wait", func() error { _, err := s.TryAcquire(ctx, 1, -time.Second); return err }},
		{"Release(0)", func() error { return s.Release(ctx, 0) }},
		{"Release(-3)", func() error { return s.Release(ctx, -3) }},
		{"TrySetPermits(-1)", func() error { _, err := s.TrySetPermits(ctx, -1); return err }},
		{"empty name Acquire", func() error { return empty.Acquire(ctx, 1) }},
		{"empty name TryAcquire", func() error { _, err := empty.TryAcquire(ctx, 1, 0); return err }},
		{"empty name Release", func() error { return empty.Release(ctx, 1) }},
		{"empty name AddPermits", func() error { return empty.AddPermits(ctx, 1) }},
		{"empty name TrySetPermits", func() error { _, err := empty.TrySetPermits(ctx, 1); return err }},
		{"empty name AvailablePermits", func() error { _, err := empty.AvailablePermits(ctx); return err }},
		{"empty name DrainPermits", func() error { _, err := empty.DrainPermits(ctx); return err }},
	}
	before := relocktest.DBSize(t, raw)
	for _, tt := range tests {
		assert.ErrorIs(t, tt.call(), semaphore.ErrInvalidArgument, tt.what)
		assert.Equal(t, "2", rawCount(t, raw, name), "%s: the count", tt.what)
		assert.Zero(t, grants(t, raw, name), "%s: grants", tt.what)
		assert.Equal(t, before, relocktest.DBSize(t, raw), "%s: keys on the server", tt.what)
	}
}

// countingAttempts returns a Client whose counting-semaphore acquisitions
// are counted in n once answered (a NOSCRIPT reply, which the script's
// body follows, is not counted).
func countingAttempts(t *testing.T, n *atomic.Int64) *rlock.Client {
	t.Helper()
	tap := relocktest.NewTap(redistest.Shared(t).Client(t), func(args []string) func(rueidis.RedisResult) {
		if relocktest.ScriptSHA1(args) != lua.CountingAcquire.SHA1 {
			return nil
		}
		return func(res rueidis.RedisResult) {
			if re, ok := rueidis.IsRedisErr(res.Error()); !ok || !re.IsNoScript() {
				n.Add(1)
			}
		}
	})
	c, err := rlock.New(tap)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestCountingReleaseWakesWaiter: a waiter for two permits sleeps on the
// channel (it tries once, subscribes, tries again, and makes no other
// attempt until a message), a release of one permit leaves it waiting,
// and the release of the second lets it go on within the hand-off bound.
func TestCountingReleaseWakesWaiter(t *testing.T) {
	var attempts atomic.Int64
	c := countingAttempts(t, &attempts)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetCountingSemaphore(name)
	other := relocktest.Client(t).GetCountingSemaphore(name)
	setCounting(t, s, 0)
	got := redissontest.Async(func() error { return s.Acquire(t.Context(), 2) })
	redissontest.WaitSubscribers(t, raw, layout.CountingSemaphore(name).Channel, 1)
	relocktest.Eventually(t, 5*time.Second, "the attempt after subscribing", func() bool { return attempts.Load() == 2 })
	require.NoError(t, other.Release(t.Context(), 1))
	relocktest.Eventually(t, 5*time.Second, "the attempt at the first release", func() bool { return attempts.Load() == 3 })
	redissontest.Pending(t, got, "the waiter for two permits beside one")
	start := time.Now()
	require.NoError(t, other.Release(t.Context(), 1))
	redissontest.Handoff(t, got, start, "the waiter")
	assert.EqualValues(t, 4, attempts.Load(), "attempts: first, after subscribing, one per release (no polling)")
	assert.Equal(t, 0, countOf(t, s))
}

// TestCountingWakesAsManyAsFreed: a release of two permits lets two of
// three waiters of one Client go on (the message wakes one, which passes
// it on), and the third goes on at the next release.
func TestCountingWakesAsManyAsFreed(t *testing.T) {
	var attempts atomic.Int64
	c := countingAttempts(t, &attempts)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetCountingSemaphore(name)
	setCounting(t, s, 0)
	done := make(chan int, 3)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range 3 {
		wg.Go(func() {
			if s.Acquire(ctx, 1) == nil {
				done <- i
			}
		})
		// The first waiter tries, subscribes and tries again; the others
		// find the channel subscribed and try once.
		relocktest.Eventually(t, 5*time.Second, fmt.Sprint("waiter ", i, " asleep"), func() bool {
			return relocktest.Subscribers(raw, layout.CountingSemaphore(name).Channel) == 1 && attempts.Load() == int64(2+i)
		})
	}
	require.NoError(t, relocktest.Client(t).GetCountingSemaphore(name).Release(t.Context(), 2))
	for range 2 {
		relocktest.Receive(t, done, redissontest.HandoffBound, "a waiter to go on")
	}
	assert.Equal(t, 0, countOf(t, s))
	select {
	case i := <-done:
		t.Fatalf("waiter %d went on with no permit left", i)
	default:
	}
	require.NoError(t, s.Release(t.Context(), 1))
	relocktest.Receive(t, done, redissontest.HandoffBound, "the third waiter to go on")
}

// TestCountingPassOnToSmallerRequest: the oldest waiter of a Client wants
// three permits; a release of one wakes it, it is refused, and it passes
// the wake-up on to a newer waiter that wants one, which goes on.
func TestCountingPassOnToSmallerRequest(t *testing.T) {
	var attempts atomic.Int64
	c := countingAttempts(t, &attempts)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetCountingSemaphore(name)
	setCounting(t, s, 0)
	big := redissontest.Async(func() error { return s.Acquire(t.Context(), 3) })
	relocktest.Eventually(t, 5*time.Second, "the big waiter asleep", func() bool {
		return relocktest.Subscribers(raw, layout.CountingSemaphore(name).Channel) == 1 && attempts.Load() == 2
	})
	small := redissontest.Async(func() error { return s.Acquire(t.Context(), 1) })
	relocktest.Eventually(t, 5*time.Second, "the small waiter asleep", func() bool { return attempts.Load() == 3 })
	start := time.Now()
	require.NoError(t, relocktest.Client(t).GetCountingSemaphore(name).Release(t.Context(), 1))
	redissontest.Handoff(t, small, start, "the waiter for one permit")
	redissontest.Pending(t, big, "the waiter for three permits")
	start = time.Now()
	require.NoError(t, s.AddPermits(t.Context(), 3))
	redissontest.Handoff(t, big, start, "the waiter for three permits")
}

// TestCountingNeverBeyondCount: callers of two Clients take one or two
// permits of three at a time; never more than three are out, and every
// caller finishes.
func TestCountingNeverBeyondCount(t *testing.T) {
	name := relocktest.Name(t)
	sems := []*semaphore.Counting{relocktest.Client(t).GetCountingSemaphore(name), relocktest.Client(t).GetCountingSemaphore(name)}
	setCounting(t, sems[0], 3)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out, most atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		s, n := sems[i%2], 1+i%2
		wg.Go(func() {
			for range 15 {
				if err := s.Acquire(ctx, n); err != nil {
					errs <- fmt.Errorf("caller %d: %w", i, err)
					return
				}
				now := out.Add(int64(n))
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				time.Sleep(time.Millisecond) // the holder's work
				out.Add(-int64(n))
				if err := s.Release(ctx, n); err != nil {
					errs <- fmt.Errorf("caller %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.LessOrEqual(t, most.Load(), int64(3), "most permits out at once")
	assert.Equal(t, 3, countOf(t, sems[0]), "permits after the run")
}

// TestCountingLostReply: an attempt whose reply was lost (the script ran)
// fails, and the call gives the permits back; a waiting call whose
// attempt's reply was lost tries again and takes its permits once.
func TestCountingLostReply(t *testing.T) {
	f := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	c, err := rlock.New(f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetCountingSemaphore(name)
	setCounting(t, s, 3)

	f.Inject(&relocktest.Rule{SHA1s: []string{lua.CountingAcquire.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply()})
	ok, err := s.TryAcquire(t.Context(), 2, 0)
	require.Error(t, err, "TryAcquire with its reply lost")
	assert.False(t, ok)
	assert.Equal(t, 3, countOf(t, s), "the permits taken unseen were not given back")
	assert.Zero(t, grants(t, raw, name), "grants after the give-back")

	r := f.Inject(&relocktest.Rule{SHA1s: []string{lua.CountingAcquire.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply()})
	ok, err = s.TryAcquire(t.Context(), 2, 5*time.Second)
	require.NoError(t, err, "a waiting TryAcquire through a lost reply")
	assert.True(t, ok)
	assert.EqualValues(t, 1, r.Hits())
	assert.Equal(t, 1, countOf(t, s), "permits taken by a resent attempt")
}

// TestCountingWaitEnds: a waiter whose context ends returns an error
// matching ErrNotAcquired and the context's, and takes nothing; one whose
// wait runs out returns (false, nil).
func TestCountingWaitEnds(t *testing.T) {
	c := relocktest.Client(t)
	s := c.GetCountingSemaphore(relocktest.Name(t))
	setCounting(t, s, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := s.Acquire(ctx, 2)
	assert.ErrorIs(t, err, semaphore.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	ok, err := s.TryAcquire(t.Context(), 2, 50*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, ok, "TryAcquire(2) of 1")
	assert.Equal(t, 1, countOf(t, s))
}
