package rlock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestGrantRedissonWaiterNotStarved: goroutines of one Client take a lock
// in turn again and again (each release could grant the lock to the
// next of them), while a Redisson waiter waits for it: the waiter is
// subscribed to the lock's channel, so no release grants the lock in
// Redis to the Client's own waiters, every release publishes, and the
// Redisson waiter gets the lock.
func TestGrantRedissonWaiterNotStarved(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	jl := j.Lock(name)
	l := c.GetLock(name)
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	turns := 0
	for i := range 3 {
		wg.Go(func() {
			o := rlock.WithOwner(ctx, "w"+strconv.Itoa(i))
			for ctx.Err() == nil {
				if err := l.Lock(o); err != nil {
					return
				}
				mu.Lock()
				turns++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				_ = l.Unlock(o)
			}
		})
	}
	relocktest.Eventually(t, 10*time.Second, "the Client's goroutines to take turns", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return turns >= 20
	})
	jctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := jl.Lock(jctx, 1, 0)
	stop()
	wg.Wait()
	require.NoError(t, err, "Redisson's waiter did not get the lock while the Client's goroutines took turns")
	require.NoError(t, jl.Unlock(t.Context(), 1))
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(name, layout.Token(name)).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "the lock is free")
}
