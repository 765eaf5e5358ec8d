package rlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestTryDo: TryDo runs fn only when the lock is taken within its wait,
// reports whether it ran, and otherwise behaves as Do.
func TestTryDo(t *testing.T) {
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	l := c.GetLock(name)
	holder := rlock.WithOwner(t.Context(), "holder")
	require.NoError(t, l.Lock(holder))

	ran, err := l.TryDo(t.Context(), 0, func(context.Context) error {
		assert.Fail(t, "fn ran while the lock was held")
		return nil
	})
	assert.NoError(t, err)
	assert.False(t, ran, "TryDo of a held lock")

	// Released while TryDo waits: fn runs, with the lock held.
	type result struct {
		ran bool
		err error
	}
	res := make(chan result, 1)
	go func() {
		ran, err := l.TryDo(t.Context(), 5*time.Second, func(ctx context.Context) error {
			held, err := l.IsHeldByOwner(ctx)
			assert.NoError(t, err)
			assert.True(t, held, "fn's context carries the owner that holds the lock")
			return errors.New("fn's error")
		})
		res <- result{ran, err}
	}()
	raw := relocktest.Raw(t)
	relocktest.Eventually(t, 5*time.Second, "TryDo to wait", func() bool { return numsub(raw, layout.Channel(name)) == 1 })
	require.NoError(t, l.Unlock(holder))
	r := relocktest.Receive(t, res, 10*time.Second, "TryDo to return after the release")
	assert.True(t, r.ran)
	assert.EqualError(t, r.err, "fn's error")
	locked, err := l.IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "the lock after TryDo")

	// A loss cancels fn's context, and TryDo's error says so.
	ran, err = l.TryDo(t.Context(), 0, func(ctx context.Context) error {
		_, _ = l.ForceUnlock(context.Background())
		relocktest.Receive(t, ctx.Done(), 5*time.Second, "fn's context to end after a force-unlock")
		return context.Cause(ctx)
	})
	assert.True(t, ran)
	assert.ErrorIs(t, err, rlock.ErrLockLost)

	// A panic in fn releases the lock and goes on.
	assert.PanicsWithValue(t, "boom", func() {
		_, _ = l.TryDo(t.Context(), 0, func(context.Context) error { panic("boom") })
	})
	locked, err = l.IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "the lock after a panic in fn")

	_, err = l.TryDo(t.Context(), -time.Second, func(context.Context) error { return nil })
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "negative wait")
	_, err = l.TryDo(t.Context(), 0, nil)
	assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "nil fn")
}
