package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview35DoPanicGranted: Do waits for a lock, is granted it, and its
// fn panics: the panic goes on, and the granted hold is released (the
// lock is free at once, and the Client records no hold).
func TestReview35DoPanicGranted(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetLock(name)
	a := rlock.WithOwner(t.Context(), "a")
	for round := range 30 {
		require.NoError(t, l.Lock(a))
		res := make(chan any, 1)
		ran := make(chan struct{}, 1)
		go func() {
			defer func() { res <- recover() }()
			_ = l.Do(rlock.WithOwner(t.Context(), "b"), func(ctx context.Context) error {
				ran <- struct{}{}
				panic("boom")
			})
		}()
		time.Sleep(time.Duration(round+1) * 5 * time.Millisecond)
		g0 := lockcore.GrantsMade()
		require.NoError(t, l.Unlock(a))
		p := relocktest.Receive(t, res, 10*time.Second, "Do's panic")
		require.Equal(t, "boom", p)
		relocktest.Receive(t, ran, time.Second, "fn ran")
		n, err := raw.Do(t.Context(), raw.B().Exists().Key(name).Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, n, "fn panicked and the lock is still held: %v", relocktest.HGetAll(t, raw, name))
		held, err := l.IsHeldByOwner(rlock.WithOwner(t.Context(), "b"))
		require.NoError(t, err)
		require.False(t, held)
		if lockcore.GrantsMade() > g0 {
			return
		}
	}
	t.Fatal("no grant to Do")
}
