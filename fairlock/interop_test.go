package fairlock_test

import (
	"context"
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// These tests put relock's fair lock beside a stand-in for a Redisson
// client (internal/redissontest) that runs RedissonFairLock's scripts
// with its arguments: the Client's wall clock, the 5-minute thread wait
// time, waiters on their own channels redisson_lock__channel:{name}:<field>.

// TestInteropFairExclusion: a Redisson hold keeps relock out and a relock
// hold keeps Redisson out; attempts that give up leave the queue empty.
func TestInteropFairExclusion(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	ctx := t.Context()
	a := rlock.WithOwner(ctx, "a")
	l, jl := c.GetFairLock(name), j.FairLock(name)

	require.NoError(t, jl.Lock(ctx, 1, 0))
	require.NoError(t, jl.Lock(ctx, 1, 0), "Redisson re-entry")
	ok, err := l.TryLock(a, 0, 0)
	require.NoError(t, err)
	assert.False(t, ok, "relock TryLock beside a Redisson hold")
	ok, err = l.TryLock(a, 50*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok, "relock TryLock(50ms) beside a Redisson hold")
	assert.Empty(t, queue(t, raw, name), "queue after relock gave up")
	require.NoError(t, jl.Unlock(ctx, 1))
	require.NoError(t, jl.Unlock(ctx, 1))

	require.NoError(t, l.Lock(a))
	ok, err = jl.TryLockOnce(ctx, 2)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson tryLock() beside a relock hold")
	ok, err = jl.TryLock(ctx, 2, 50*time.Millisecond, 0)
	require.NoError(t, err)
	assert.False(t, ok, "Redisson tryLock(50ms) beside a relock hold")
	assert.Empty(t, queue(t, raw, name), "queue after Redisson gave up")
	require.NoError(t, l.Unlock(a))
	ok, err = jl.TryLockOnce(ctx, 2)
	require.NoError(t, err)
	assert.True(t, ok, "Redisson tryLock() on the free lock")
	require.NoError(t, jl.Unlock(ctx, 2))
}

// TestInteropFairWakes: with one waiter queued, a release on either side
// wakes it within the hand-off bound. A Redisson release tells the head
// on its own channel, where relock's waiter listens; relock's release
// does the same for Redisson's waiter, whose fallback is the holder's 30s
// TTL.
func TestInteropFairWakes(t *testing.T) {
	t.Run("redisson release wakes relock", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		jl := j.FairLock(name)
		require.NoError(t, jl.Lock(t.Context(), 1, 0))
		a := rlock.WithOwner(t.Context(), "a")
		field := c.ID() + ":a"
		head := redissontest.Listen(t, raw, layout.Channel(name)+":"+field)
		got := redissontest.Async(func() error { return c.GetFairLock(name).Lock(a) })
		redissontest.WaitSubscribers(t, raw, layout.Channel(name)+":"+field, 2)
		require.Equal(t, []string{field}, queue(t, raw, name))
		start := time.Now()
		require.NoError(t, jl.Unlock(t.Context(), 1))
		redissontest.Message(t, head, "0", "Redisson's release, on the head's channel,")
		redissontest.Handoff(t, got, start, "relock's waiter")
		require.NoError(t, c.GetFairLock(name).Unlock(a))
	})
	t.Run("relock release wakes redisson", func(t *testing.T) {
		c := relocktest.Client(t)
		raw := relocktest.Raw(t)
		j := redissontest.New(t, relocktest.Raw(t))
		name := relocktest.Name(t)
		a := rlock.WithOwner(t.Context(), "a")
		require.NoError(t, c.GetFairLock(name).Lock(a))
		jl := j.FairLock(name)
		got := redissontest.Async(func() error { return jl.Lock(t.Context(), 1, 0) })
		redissontest.WaitSubscribers(t, raw, jl.Channel(1), 1)
		redissontest.WaitSleeping(t, j, jl.Channel(1), 1)
		require.Equal(t, []string{jl.Field(1)}, queue(t, raw, name))
		start := time.Now()
		require.NoError(t, c.GetFairLock(name).Unlock(a))
		redissontest.Handoff(t, got, start, "Redisson's waiter")
		require.NoError(t, jl.Unlock(t.Context(), 1))
	})
}

// TestInteropFairContention: relock owners and Redisson threads take one
// fair lock in turn; every party finishes, and no two hold it at once.
func TestInteropFairContention(t *testing.T) {
	name := relocktest.Name(t)
	var parties []redissontest.Party
	c := relocktest.Client(t)
	for o := range 3 {
		owner := fmt.Sprintf("o%d", o)
		octx := func(ctx context.Context) context.Context { return rlock.WithOwner(ctx, owner) }
		parties = append(parties, redissontest.Party{Side: redissontest.SideRelock, Name: "relock " + owner,
			Lock:   func(ctx context.Context) error { return c.GetFairLock(name).Lock(octx(ctx)) },
			Unlock: func(ctx context.Context) error { return c.GetFairLock(name).Unlock(octx(ctx)) }})
	}
	j := redissontest.New(t, relocktest.Raw(t))
	jl := j.FairLock(name)
	for tid := range int64(3) {
		parties = append(parties, redissontest.Party{Side: redissontest.SideRedisson, Name: fmt.Sprintf("redisson t%d", tid),
			Lock:   func(ctx context.Context) error { return jl.Lock(ctx, tid, 0) },
			Unlock: func(ctx context.Context) error { return jl.Unlock(ctx, tid) }})
	}
	redissontest.Contend(t, &redissontest.Section{}, parties, 6, 5*time.Millisecond)
}

// TestInteropFairMixedQueue: a relock holder; six waiters join one fair
// lock about 100ms apart, alternating Redisson (lock(), with the Client's
// wall clock and the 5-minute thread wait time) and relock: R0 G1 R2 G3
// R4 G5. Released in turn, they acquire in arrival order, each hand-off
// within the bound, none stalled.
func TestInteropFairMixedQueue(t *testing.T) {
	const (
		waiters = 6
		spacing = 100 * time.Millisecond
		hold    = 50 * time.Millisecond
	)
	holderClient := relocktest.Client(t)
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	jl := j.FairLock(name)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holderClient.GetFairLock(name).Lock(h))

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	type grant struct {
		i  int
		at time.Time
	}
	granted := make(chan grant, waiters)
	failed := make(chan error, waiters)
	release := make([]chan struct{}, waiters)
	var fields, names []string
	for i := range waiters {
		release[i] = make(chan struct{})
		var lock, unlock func() error
		if i%2 == 0 {
			tid := int64(i)
			names = append(names, fmt.Sprintf("R%d", i))
			fields = append(fields, jl.Field(tid))
			lock = func() error { return jl.Lock(ctx, tid, 0) }
			unlock = func() error { return jl.Unlock(context.WithoutCancel(ctx), tid) }
		} else {
			owner := rlock.WithOwner(ctx, fmt.Sprintf("g%d", i))
			names = append(names, fmt.Sprintf("G%d", i))
			fields = append(fields, c.ID()+fmt.Sprintf(":g%d", i))
			lock = func() error { return c.GetFairLock(name).Lock(owner) }
			unlock = func() error { return c.GetFairLock(name).Unlock(context.WithoutCancel(owner)) }
		}
		joined := time.Now()
		wg.Go(func() {
			if err := lock(); err != nil {
				failed <- fmt.Errorf("%s: %w", names[i], err)
				return
			}
			granted <- grant{i: i, at: time.Now()}
			select {
			case <-release[i]:
			case <-ctx.Done():
			}
			if err := unlock(); err != nil {
				failed <- fmt.Errorf("%s: unlock: %w", names[i], err)
			}
		})
		relocktest.Eventually(t, 5*time.Second, names[i]+" queued", func() bool {
			return slices.Contains(queue(t, raw, name), fields[i])
		})
		time.Sleep(time.Until(joined.Add(spacing)))
	}
	require.Equal(t, fields, queue(t, raw, name), "the queue in arrival order %v", names)

	released := time.Now()
	require.NoError(t, holderClient.GetFairLock(name).Unlock(h))
	var order []string
	for want := range waiters {
		select {
		case g := <-granted:
			order = append(order, names[g.i])
			require.Equal(t, want, g.i, "acquired out of arrival order: %v so far", order)
			assert.LessOrEqual(t, g.at.Sub(released), redissontest.HandoffBound, "hand-off to %s", names[g.i])
		case err := <-failed:
			t.Fatalf("waiter failed: %v (order so far %v)", err, order)
		case <-time.After(5 * time.Second):
			q := queue(t, raw, name)
			t.Fatalf("no waiter acquired 5s after %s released (order so far %v, queue %v)", previous(names, want), order, q)
		}
		time.Sleep(hold)
		released = time.Now()
		close(release[want])
	}
	wg.Wait()
	select {
	case err := <-failed:
		t.Fatal(err)
	default:
	}
	assert.Empty(t, queue(t, raw, name), "queue after every waiter held the lock")
}

func previous(names []string, i int) string {
	if i == 0 {
		return "the holder"
	}
	return names[i-1]
}

// TestInteropFairDeadRedissonWaiter: a Redisson waiter that died while
// queued (its thread made one attempt of lock(), which queued it, and
// never another) holds up the queue until its deadline, and no longer,
// as it does in Redisson itself: relock's scripts drop a Redisson waiter
// by Redisson's rule only, so a relock waiter queued behind it takes the
// lock when a Redisson waiter would. Both sides run with a 1s thread wait
// time here; the deadline is the lock's remaining lease when the dead
// waiter joined plus that.
func TestInteropFairDeadRedissonWaiter(t *testing.T) {
	const wait = time.Second
	for _, behind := range []string{redissontest.SideRelock, redissontest.SideRedisson} {
		t.Run(behind+" waiter behind", func(t *testing.T) {
			c := relocktest.Client(t, rlock.WithFairLockWaitTimeout(wait))
			raw := relocktest.Raw(t)
			j := redissontest.New(t, relocktest.Raw(t), redissontest.WithFairLockWaitTimeout(wait))
			name := relocktest.Name(t)
			jl := j.FairLock(name)
			h := rlock.WithOwner(t.Context(), "h")
			require.NoError(t, c.GetFairLock(name).LockLease(h, 300*time.Millisecond))

			taken, _, err := jl.Attempt(t.Context(), 1, 0)
			require.NoError(t, err)
			require.False(t, taken)
			deadline := time.UnixMilli(score(t, raw, jl.Timeouts(), jl.Field(1)))

			var got <-chan redissontest.Result
			var field string
			if behind == redissontest.SideRelock {
				g := rlock.WithOwner(t.Context(), "g")
				field = c.ID() + ":g"
				got = redissontest.Async(func() error {
					if err := c.GetFairLock(name).Lock(g); err != nil {
						return err
					}
					return c.GetFairLock(name).Unlock(g)
				})
			} else {
				field = jl.Field(2)
				got = redissontest.Async(func() error {
					if err := jl.Lock(t.Context(), 2, 0); err != nil {
						return err
					}
					return jl.Unlock(t.Context(), 2)
				})
			}
			relocktest.Eventually(t, 5*time.Second, "the live waiter queued", func() bool {
				return slices.Equal(queue(t, raw, name), []string{jl.Field(1), field})
			})
			require.NoError(t, c.GetFairLock(name).Unlock(h))

			select {
			case r := <-got:
				require.NoError(t, r.Err)
				// The server and the stand-in read the same clock; allow
				// for the millisecond it rounds to.
				assert.False(t, r.At.Before(deadline.Add(-5*time.Millisecond)),
					"the live waiter acquired %v before the dead waiter's deadline", deadline.Sub(r.At))
				late := r.At.Sub(deadline)
				assert.LessOrEqual(t, late, fairlock.RefreshInterval+250*time.Millisecond,
					"the live waiter acquired %v after the dead waiter's deadline", late)
				t.Logf("the %s waiter behind went on %v after the dead Redisson waiter's deadline", behind, late.Round(time.Millisecond))
			case <-time.After(5 * time.Second):
				t.Fatalf("the live waiter still waits 5s after the release (queue %v)", queue(t, raw, name))
			}
			assert.Empty(t, queue(t, raw, name), "queue at the end")
		})
	}
}

// TestInteropFairDeadRelockWaiter: a relock waiter that died at the head
// of a mixed queue costs it about a second when a live relock waiter is
// queued behind it: that one's refresh drops it and wakes the Redisson
// waiter that heads the queue then, which goes on before the relock
// waiter, in arrival order. (With Redisson waiters only behind it, it
// costs what a dead Redisson waiter costs: Redisson's scripts know no
// heartbeats.)
func TestInteropFairDeadRelockWaiter(t *testing.T) {
	holderClient := relocktest.Client(t)
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	jl := j.FairLock(name)
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holderClient.GetFairLock(name).Lock(h))
	d := startDoomed(t, name)
	relocktest.Eventually(t, 5*time.Second, "the doomed waiter queued", func() bool { return len(queue(t, raw, name)) == 1 })
	type grant struct {
		who string
		at  time.Time
	}
	granted := make(chan grant, 2)
	failed := make(chan error, 2)
	go func() {
		if err := jl.Lock(t.Context(), 1, 0); err != nil {
			failed <- fmt.Errorf("redisson waiter: %w", err)
			return
		}
		granted <- grant{"redisson", time.Now()}
		if err := jl.Unlock(context.WithoutCancel(t.Context()), 1); err != nil {
			failed <- fmt.Errorf("redisson waiter: unlock: %w", err)
		}
	}()
	relocktest.Eventually(t, 5*time.Second, "the Redisson waiter queued", func() bool { return len(queue(t, raw, name)) == 2 })
	g := rlock.WithOwner(t.Context(), "g")
	go func() {
		if err := c.GetFairLock(name).Lock(g); err != nil {
			failed <- fmt.Errorf("relock waiter: %w", err)
			return
		}
		granted <- grant{"relock", time.Now()}
		if err := c.GetFairLock(name).Unlock(context.WithoutCancel(g)); err != nil {
			failed <- fmt.Errorf("relock waiter: unlock: %w", err)
		}
	}()
	relocktest.Eventually(t, 5*time.Second, "the relock waiter queued", func() bool { return len(queue(t, raw, name)) == 3 })
	require.Equal(t, []string{d.field, jl.Field(1), c.ID() + ":g"}, queue(t, raw, name))

	d.kill()
	released := time.Now()
	require.NoError(t, holderClient.GetFairLock(name).Unlock(h))
	var order []string
	for range 2 {
		select {
		case gr := <-granted:
			order = append(order, gr.who)
			if len(order) == 1 {
				cost := gr.at.Sub(released)
				assert.LessOrEqual(t, cost, deadBound, "the Redisson waiter went on %v after the release", cost)
				t.Logf("a dead relock waiter at the head cost the mixed queue %v (bound %v)", cost.Round(time.Millisecond), deadBound)
			}
		case err := <-failed:
			t.Fatal(err)
		case <-time.After(5 * time.Second):
			t.Fatalf("no waiter acquired 5s after the release (order so far %v, queue %v)", order, queue(t, raw, name))
		}
	}
	assert.Equal(t, []string{"redisson", "relock"}, order, "acquisition order")
	assert.Empty(t, queue(t, raw, name), "queue at the end")
}

// score is member's score in the sorted set key.
func score(t *testing.T, raw rueidis.Client, key, member string) int64 {
	t.Helper()
	s, err := raw.Do(t.Context(), raw.B().Zscore().Key(key).Member(member).Build()).AsFloat64()
	require.NoError(t, err, "ZSCORE %s %s", key, member)
	return int64(s)
}
