package rlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview35Fair16: one Client's 16 goroutines take a Lock in turn (1ms
// holds) while a second Client's waiter and a Redisson waiter wait for
// the same name: each gets the lock within 2s (they subscribe, and the
// releases stop granting while they wait).
func TestReview35Fair16(t *testing.T) {
	c := relocktest.Client(t)
	c2 := relocktest.Client(t)
	j := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	l := c.GetLock(name)
	_, stop := takeTurns(t, l, 16, 100)
	g0 := lockcore.GrantsMade()
	var ws sync.WaitGroup
	var otherTook, jTook time.Duration
	var otherErr, jErr error
	start := time.Now()
	ws.Go(func() {
		wctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		o := rlock.WithOwner(wctx, "other")
		otherErr = c2.GetLock(name).Lock(o)
		otherTook = time.Since(start)
		if otherErr == nil {
			time.Sleep(time.Millisecond)
			_ = c2.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "other"))
		}
	})
	ws.Go(func() {
		wctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		jl := j.Lock(name)
		jErr = jl.Lock(wctx, 7, 0)
		jTook = time.Since(start)
		if jErr == nil {
			time.Sleep(time.Millisecond)
			_ = jl.Unlock(t.Context(), 7)
		}
	})
	ws.Wait()
	stop()
	t.Logf("other Client: %v after %v; Redisson: %v after %v; grants meanwhile %d", otherErr, otherTook, jErr, jTook, lockcore.GrantsMade()-g0)
	require.NoError(t, otherErr, "the other Client's waiter")
	require.NoError(t, jErr, "the Redisson waiter")
}
