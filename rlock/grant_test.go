package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
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
	_, stop := takeTurns(t, l, 3, 20)
	jctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := jl.Lock(jctx, 1, 0)
	stop()
	require.NoError(t, err, "Redisson's waiter did not get the lock while the Client's goroutines took turns")
	require.NoError(t, jl.Unlock(t.Context(), 1))
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(name, layout.Token(name)).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "the lock is free")
}
