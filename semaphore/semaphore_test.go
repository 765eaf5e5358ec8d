package semaphore_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
	"github.com/relock-go/relock/semaphore"
)

// handoff bounds a wake-up that a notification brings: far under the
// 30s lease a waiter would otherwise sleep for.
const handoff = 5 * time.Second

func available(t *testing.T, s *semaphore.Semaphore) int {
	t.Helper()
	n, err := s.AvailablePermits(t.Context())
	require.NoError(t, err)
	return n
}

// availableNow is AvailablePermits for conditions of relocktest.Eventually:
// -1 when it cannot be read.
func availableNow(s *semaphore.Semaphore) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := s.AvailablePermits(ctx)
	if err != nil {
		return -1
	}
	return n
}

func setPermits(t *testing.T, s *semaphore.Semaphore, n int) {
	t.Helper()
	ok, err := s.TrySetPermits(t.Context(), n)
	require.NoError(t, err, "TrySetPermits(%d)", n)
	require.True(t, ok, "TrySetPermits(%d)", n)
}

// leases returns the lease sorted set: raw permit ID -> end of lease.
func leases(t *testing.T, raw rueidis.Client, name string) map[string]float64 {
	t.Helper()
	m, err := leaseEnds(raw, name)
	require.NoError(t, err)
	return m
}

// leaseEnds is leases for conditions of relocktest.Eventually, which must
// not fail the test.
func leaseEnds(raw rueidis.Client, name string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	zs, err := raw.Do(ctx, raw.B().Zrange().Key(semaphore.KeysOf(name).Leases).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		return nil, err
	}
	m := make(map[string]float64, len(zs))
	for _, z := range zs {
		m[z.Member] = z.Score
	}
	return m, nil
}

func serverMillis(t *testing.T, raw rueidis.Client) float64 {
	t.Helper()
	now, err := raw.Do(t.Context(), raw.B().Time().Build()).AsIntSlice()
	require.NoError(t, err, "TIME")
	require.Len(t, now, 2, "TIME")
	return float64(now[0]*1000 + now[1]/1000)
}

func unhex(t *testing.T, id string) string {
	t.Helper()
	b, err := hex.DecodeString(id)
	require.NoError(t, err, "permit ID %q is not hex", id)
	require.Len(t, b, 16, "permit ID %q", id)
	return string(b)
}

func acquireAsync(ctx context.Context, s *semaphore.Semaphore, lease time.Duration) <-chan string {
	got := make(chan string, 1)
	go func() {
		id, err := s.Acquire(ctx, lease)
		if err != nil {
			id = "error: " + err.Error()
		}
		got <- id
	}()
	return got
}

func within(t *testing.T, got <-chan string, d time.Duration, what string) string {
	t.Helper()
	id := relocktest.Receive(t, got, d, what+" to get a permit")
	require.Len(t, id, 32, "%s: want a permit ID", what)
	return id
}

// sleeping counts the acquire scripts c's Client sends: a waiter sleeps
// after two of them (before and after subscribing).
func countingClient(t *testing.T, opts ...rlock.Option) (*rlock.Client, *relocktest.Rule) {
	t.Helper()
	faulty := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	attempts := faulty.Inject(&relocktest.Rule{SHA1s: []string{lua.SemAcquire.SHA1}, N: -1, Run: true, Keep: true})
	c, err := rlock.New(faulty, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, attempts
}

func TestRedissonLayout(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	k := semaphore.KeysOf(name)
	require.Equal(t, "{"+name+"}:timeout", k.Leases, "the leases key")
	require.Equal(t, "redisson_sc:{"+name+"}", k.Channel, "the channel")
	tagged := semaphore.KeysOf("jobs:{user:7}")
	assert.Equal(t, "jobs:{user:7}:timeout", tagged.Leases, "the leases key of a name with a hash tag")
	assert.Equal(t, "redisson_sc:jobs:{user:7}", tagged.Channel, "the channel of a name with a hash tag")
	assert.Zero(t, available(t, s), "AvailablePermits of an unset semaphore")
	setPermits(t, s, 3)
	ok, err := s.TrySetPermits(t.Context(), 5)
	require.NoError(t, err)
	assert.False(t, ok, "second TrySetPermits")
	before := serverMillis(t, raw)
	id, err := s.Acquire(t.Context(), 10*time.Second)
	require.NoError(t, err)
	v, err := raw.Do(t.Context(), raw.B().Get().Key(name).Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "2", v, "the available count")
	ls := leases(t, raw, name)
	require.Len(t, ls, 1, "leases")
	end, ok := ls[unhex(t, id)]
	require.True(t, ok, "leases = %v, want the raw bytes of %s", ls, id)
	assert.InDelta(t, before+10_000, end, 1_000, "the end of the 10s lease (server ms)")
	require.NoError(t, s.Release(t.Context(), id))
	assert.Equal(t, 3, available(t, s), "AvailablePermits after Release")
	assert.Empty(t, leases(t, raw, name), "leases after Release")
	require.NoError(t, s.AddPermits(t.Context(), -5))
	assert.Equal(t, -2, available(t, s), "AvailablePermits after AddPermits(-5)")
	_, ok, err = s.TryAcquire(t.Context(), 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "TryAcquire below 0")
	ok, err = s.Delete(t.Context())
	require.NoError(t, err)
	assert.True(t, ok, "Delete")
	keys, err := raw.Do(t.Context(), raw.B().Keys().Pattern("*"+name+"*").Build()).AsStrSlice()
	require.NoError(t, err)
	assert.Empty(t, keys, "keys left after Delete")
	ok, err = s.Delete(t.Context())
	require.NoError(t, err)
	assert.False(t, ok, "second Delete")
}

// TestNeverOverCommitted: goroutines of three Clients take and give back
// permits; no more than the permits ever hold one at once, and every
// permit is back at the end.
func TestNeverOverCommitted(t *testing.T) {
	const permits, perClient, rounds = 3, 6, 25
	name := relocktest.Name(t)
	raw := relocktest.Raw(t)
	clients := []*rlock.Client{relocktest.Client(t), relocktest.Client(t), relocktest.Client(t)}
	setPermits(t, clients[0].GetSemaphore(name), permits)
	// The run takes well under a second; a waiter that a release does not
	// wake gives up at this deadline and fails the test.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var (
		held, most atomic.Int64
		wg         sync.WaitGroup
	)
	for ci, c := range clients {
		for g := range perClient {
			wg.Go(func() {
				s := c.GetSemaphore(name)
				for r := range rounds {
					lease := time.Duration(0)
					if (ci+g+r)%2 == 1 {
						lease = 10 * time.Second
					}
					id, err := s.Acquire(ctx, lease)
					if !assert.NoError(t, err, "Acquire, round %d", r) {
						return
					}
					n := held.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(100 * time.Microsecond) // the scenario: the permit's work
					held.Add(-1)
					if !assert.NoError(t, s.Release(ctx, id), "Release, round %d", r) {
						return
					}
				}
			})
		}
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int64(permits), "permits held at once")
	assert.Equal(t, permits, available(t, clients[0].GetSemaphore(name)), "AvailablePermits at the end")
	assert.Empty(t, leases(t, raw, name), "leases left")
}

// TestPermitRenewedUntilRelease: a permit taken with lease 0 is renewed by
// the watchdog through many leases, and renewing stops at Release.
func TestPermitRenewedUntilRelease(t *testing.T) {
	const lease = 300 * time.Millisecond
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(lease))
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 1)
	id, err := s.Acquire(t.Context(), 0)
	require.NoError(t, err)
	member := unhex(t, id)
	start := time.Now()
	last := leases(t, raw, name)[member]
	for i := range 5 {
		ended := false
		relocktest.Eventually(t, 5*lease, fmt.Sprint("renewal ", i), func() bool {
			ls, err := leaseEnds(raw, name)
			if err != nil {
				return false
			}
			end, ok := ls[member]
			if !ok {
				ended = true // fails below: the condition must not fail the test
				return true
			}
			if end > last {
				last = end
				return true
			}
			return false
		})
		require.False(t, ended, "the permit's lease ended before renewal %d", i)
	}
	require.GreaterOrEqual(t, time.Since(start), lease, "time 5 renewals took: at least one lease")
	require.NoError(t, s.Release(t.Context(), id))
	assert.Equal(t, 1, available(t, s), "AvailablePermits after Release")
}

// TestLeasedPermitComesBackAfterClose: a Client that closes without
// releasing stops renewing its permit; the permit comes back when its
// lease ends, and a waiter of another Client gets it then.
func TestLeasedPermitComesBackAfterClose(t *testing.T) {
	const lease = 300 * time.Millisecond
	c1 := relocktest.Client(t)
	c2, err := rlock.NewClient(redistest.Shared(t).ClientOption(), rlock.WithWatchdogTimeout(lease))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	name := relocktest.Name(t)
	setPermits(t, c1.GetSemaphore(name), 1)
	_, err = c2.GetSemaphore(name).Acquire(t.Context(), 0)
	require.NoError(t, err)
	got := acquireAsync(t.Context(), c1.GetSemaphore(name), 10*time.Second)
	require.NoError(t, c2.Close())
	closed := time.Now()
	within(t, got, handoff, "the waiter after the closed Client's lease ended")
	assert.LessOrEqual(t, time.Since(closed), lease+2*time.Second, "time from Close until the permit came back: about the %v lease", lease)
}

func TestStalePermit(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 2)
	id, err := s.Acquire(t.Context(), time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Release(t.Context(), id))
	assert.ErrorIs(t, s.Release(t.Context(), id), semaphore.ErrNotHeld, "second Release")
	assert.ErrorIs(t, s.Release(t.Context(), "0123456789abcdef0123456789abcdef"), semaphore.ErrNotHeld, "Release of an unknown permit")
	short, err := s.Acquire(t.Context(), 50*time.Millisecond)
	require.NoError(t, err)
	relocktest.Eventually(t, handoff, "the short lease to end", func() bool { return availableNow(s) == 2 })
	assert.ErrorIs(t, s.Release(t.Context(), short), semaphore.ErrNotHeld, "Release of an expired permit")
	assert.Equal(t, 2, available(t, s), "AvailablePermits: an expired permit comes back once")
	assert.Empty(t, leases(t, raw, name), "leases left")
}

// TestReleaseWakesWaiterPromptly: a waiter sleeps on the channel, not on
// the holder's lease, and a release hands the permit over at once.
func TestReleaseWakesWaiterPromptly(t *testing.T) {
	// The queue timers out of the way: only the release's message can
	// wake the waiter within the hand-off (the permit's lease is 30s).
	semaphore.SetTiming(t, time.Minute, time.Minute)
	c1 := relocktest.Client(t)
	c2, attempts := countingClient(t)
	name := relocktest.Name(t)
	s := c1.GetSemaphore(name)
	setPermits(t, s, 1)
	id, err := s.Acquire(t.Context(), 0)
	require.NoError(t, err)
	got := acquireAsync(t.Context(), c2.GetSemaphore(name), 0)
	relocktest.Eventually(t, handoff, "the waiter to sleep", func() bool { return attempts.Hits() >= 2 })
	start := time.Now()
	require.NoError(t, s.Release(t.Context(), id))
	within(t, got, handoff, "the waiter")
	assert.LessOrEqual(t, time.Since(start), time.Second, "time the hand-off took: want at once, not a lease")
}

// TestReleaseWakesOneWaiterPerPermit: permits that come free wake as many
// of a Client's waiters as there are permits, not all of them. (The queue
// timers are set out of the way, so that every attempt counted is one a
// wake-up made.)
func TestReleaseWakesOneWaiterPerPermit(t *testing.T) {
	semaphore.SetTiming(t, time.Hour, time.Hour)
	c1 := relocktest.Client(t)
	c2, attempts := countingClient(t)
	name := relocktest.Name(t)
	setPermits(t, c1.GetSemaphore(name), 0)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const waiters = 6
	got := make(chan string, waiters)
	// One at a time, so that each is asleep before the next comes: the
	// first attempts, subscribes and attempts again; the others find the
	// channel subscribed and attempt once.
	for i := range waiters {
		go func() {
			id, _ := c2.GetSemaphore(name).Acquire(ctx, 0)
			got <- id
		}()
		relocktest.Eventually(t, handoff, "the waiter to sleep", func() bool { return attempts.Hits() == int64(i+2) })
	}
	base := attempts.Hits()
	require.NoError(t, c1.GetSemaphore(name).AddPermits(t.Context(), 1))
	within(t, got, handoff, "a waiter after AddPermits(1)")
	assert.Equal(t, base+1, attempts.Hits(), "attempts after one permit came free: one waiter woken")
	require.NoError(t, c1.GetSemaphore(name).AddPermits(t.Context(), 2))
	within(t, got, handoff, "a waiter after AddPermits(2)")
	within(t, got, handoff, "a second waiter after AddPermits(2)")
	// The first woken passed its wake-up on (a permit was left), the
	// second found none left: one more attempt each, and a third waiter
	// is woken by neither.
	relocktest.Eventually(t, handoff, "the last attempt", func() bool { return attempts.Hits() >= base+3 })
	assert.Equal(t, base+3, attempts.Hits(), "attempts after two more permits")
	cancel()
	for range waiters - 3 {
		id := relocktest.Receive(t, got, handoff, "a cancelled waiter to return")
		assert.Empty(t, id, "the permit a cancelled waiter got")
	}
}

// TestNoStarvationUnderChurn: holders of two Clients take permits back as
// soon as they release them, and a newcomer sits behind a link 20ms slower
// than theirs, so its attempts come too late for any permit a release
// frees (the holders' waiters are there first) and competing alone, it
// would win only when a permit happened to be free for that long. Once it
// has waited QueueAfter it joins the queue: then a permit that comes free
// is kept for it, however late its attempt comes. Each of its waits must
// end with a permit, well within the test's bound, while the churn goes on.
func TestNoStarvationUnderChurn(t *testing.T) {
	const permits, churners, waits = 2, 6, 5
	c1, c2 := relocktest.Client(t), relocktest.Client(t)
	slow := relocktest.NewFaulty(redistest.Shared(t).Client(t))
	slow.Inject(&relocktest.Rule{SHA1s: []string{lua.SemAcquire.SHA1}, N: -1, Run: true, Keep: true,
		Before: func([]string) { time.Sleep(20 * time.Millisecond) }}) // the scenario: the slow link
	c3, err := rlock.New(slow)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c3.Close() })
	name := relocktest.Name(t)
	setPermits(t, c1.GetSemaphore(name), permits)
	// The churners stop when the test is done with them: their context
	// ends, which also ends a wait they are in.
	churnCtx, stop := context.WithCancel(t.Context())
	var (
		wg    sync.WaitGroup
		churn atomic.Int64
	)
	for i := range churners {
		c := []*rlock.Client{c1, c2}[i%2]
		wg.Go(func() {
			s := c.GetSemaphore(name)
			for churnCtx.Err() == nil {
				id, err := s.Acquire(churnCtx, 10*time.Second)
				if churnCtx.Err() != nil {
					if err == nil {
						_ = s.Release(context.WithoutCancel(churnCtx), id)
					}
					return
				}
				if !assert.NoError(t, err, "a churner's Acquire") {
					return
				}
				churn.Add(1)
				time.Sleep(2 * time.Millisecond) // the scenario: the permit's work
				if !assert.NoError(t, s.Release(context.WithoutCancel(churnCtx), id), "a churner's Release") {
					return
				}
			}
		})
	}
	defer func() {
		stop()
		wg.Wait()
	}()
	relocktest.Eventually(t, handoff, "the churn to start", func() bool { return churn.Load() > 100 })
	s := c3.GetSemaphore(name)
	for i := range waits {
		from := churn.Load()
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		id, err := s.Acquire(ctx, 10*time.Second)
		cancel()
		require.NoError(t, err, "wait %d starved after %v, while the churners took %d permits", i, time.Since(start), churn.Load()-from)
		t.Logf("wait %d: a permit after %v, while the churners took %d", i, time.Since(start).Round(time.Millisecond), churn.Load()-from)
		require.NoError(t, s.Release(t.Context(), id))
	}
}

func TestCloseEndsWait(t *testing.T) {
	c1 := relocktest.Client(t)
	c2, attempts := countingClient(t)
	name := relocktest.Name(t)
	setPermits(t, c1.GetSemaphore(name), 0)
	got := make(chan error, 2)
	// The first waiter attempts, subscribes and attempts again; the
	// second finds the channel subscribed and attempts once. (The queue
	// timers are set out of the way: no attempt joins the queue.)
	semaphore.SetTiming(t, time.Hour, time.Hour)
	go func() { _, err := c2.GetSemaphore(name).Acquire(t.Context(), 0); got <- err }()
	relocktest.Eventually(t, handoff, "the first waiter to sleep", func() bool { return attempts.Hits() == 2 })
	go func() {
		_, _, err := c2.GetSemaphore(name).TryAcquire(t.Context(), time.Minute, time.Second)
		got <- err
	}()
	relocktest.Eventually(t, handoff, "the second waiter to sleep", func() bool { return attempts.Hits() == 3 })
	require.NoError(t, c2.Close())
	for range 2 {
		err := relocktest.Receive(t, got, handoff, "Close to end the wait")
		assert.ErrorIs(t, err, semaphore.ErrNotAcquired, "wait ended by Close")
		assert.ErrorIs(t, err, semaphore.ErrClosed, "wait ended by Close")
	}
	_, err := c2.GetSemaphore(name).Acquire(t.Context(), 0)
	assert.ErrorIs(t, err, semaphore.ErrClosed, "Acquire after Close")
}

// TestContextEndsWait: a waiter whose context ends leaves nothing behind,
// also after it joined the queue.
func TestContextEndsWait(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	s := c.GetSemaphore(name)
	setPermits(t, s, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 3*semaphore.QueueAfter)
	defer cancel()
	_, err := s.Acquire(ctx, 0)
	assert.ErrorIs(t, err, semaphore.ErrNotAcquired, "Acquire until the deadline")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Acquire until the deadline")
	id, ok, err := s.TryAcquire(t.Context(), 2*semaphore.QueueAfter, 0)
	require.NoError(t, err, "TryAcquire with a wait")
	assert.False(t, ok, "TryAcquire with a wait")
	assert.Empty(t, id, "TryAcquire with a wait")
	k := semaphore.KeysOf(name)
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(k.Leases, k.Queue, k.QueueDeadlines).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the semaphore's keys left after the waits ended")
}

func TestBadInputWritesNothing(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	ctx := t.Context()
	s := c.GetSemaphore(name)
	bad := []struct {
		what string
		call func() error
	}{
		{"empty name", func() error { _, err := c.GetSemaphore("").Acquire(ctx, 0); return err }},
		{"broken hash tag", func() error { return c.GetSemaphore("a}b").AddPermits(ctx, 1) }},
		{"negative permits", func() error { _, err := s.TrySetPermits(ctx, -1); return err }},
		{"lease under 1ms", func() error { _, err := s.Acquire(ctx, time.Microsecond); return err }},
		{"negative lease", func() error { _, _, err := s.TryAcquire(ctx, 0, -time.Second); return err }},
		{"negative wait", func() error { _, _, err := s.TryAcquire(ctx, -time.Second, 0); return err }},
		{"short permit ID", func() error { return s.Release(ctx, "abc") }},
		{"upper-case permit ID", func() error { return s.Release(ctx, "0123456789ABCDEF0123456789ABCDEF") }},
		{"not hex", func() error { return s.Release(ctx, "0123456789abcdef0123456789abcdeg") }},
	}
	for _, b := range bad {
		assert.ErrorIs(t, b.call(), semaphore.ErrInvalidArgument, b.what)
	}
	keys, err := raw.Do(ctx, raw.B().Keys().Pattern("*"+name+"*").Build()).AsStrSlice()
	require.NoError(t, err)
	assert.Empty(t, keys, "keys the bad calls wrote")
}
