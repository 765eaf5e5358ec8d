package fairlock_test

import (
	"context"
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	t.Skip("fails until the fair lock keeps Redisson's deadlines: a Redisson acquisition takes the 5-minute wait time " +
		"off every queued deadline, so a Redisson waiter queued behind a relock waiter (whose deadline is the " +
		"server's now + 750ms) ends up with a deadline about a second away; relock's pruning then drops it at the " +
		"head while it lives, nobody tells it, and it sleeps through the free lock until the TTL it last read (up to 30s)")
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
	t.Skip("fails until the fair lock keeps Redisson's deadlines: when R0 acquires it takes the 5-minute wait time " +
		"off G1's deadline (the server's now + 750ms), the next prune drops G1 and R2 is served before it (order R0 R2 ...); " +
		"R2 and R4, whose deadlines were built on relock's, are then dropped while they live and can sleep through a free lock")
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
