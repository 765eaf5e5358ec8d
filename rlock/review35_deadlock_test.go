package rlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview35DeadlockAfterGrant: b's wait for L1 ends with a grant; then
// b releases L1, a takes L1 again, b takes L2, and a waits for L2. The
// only real wait is a's (for b): a stale record of b's granted wait for
// L1 (now a's) would close a false cycle and end a's wait with
// ErrDeadlock. a's wait must end only by its own limit (or b's Unlock).
func TestReview35DeadlockAfterGrant(t *testing.T) {
	c := relocktest.Client(t, rlock.WithDeadlockDetection(50*time.Millisecond))
	n1, n2 := relocktest.Name(t), relocktest.Name(t)
	l1, l2 := c.GetLock(n1), c.GetLock(n2)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	granted := false
	for round := range 30 {
		require.NoError(t, l1.Lock(a))
		res := make(chan error, 1)
		go func() { res <- l1.Lock(b) }()
		time.Sleep(time.Duration(round+1) * 5 * time.Millisecond)
		g0 := lockcore.GrantsMade()
		require.NoError(t, l1.Unlock(a))
		require.NoError(t, relocktest.Receive(t, res, 10*time.Second, "b's Lock"))
		granted = lockcore.GrantsMade() > g0
		if granted {
			break
		}
		require.NoError(t, l1.Unlock(b))
	}
	require.True(t, granted, "no grant to b")
	require.NoError(t, l1.Unlock(b))
	require.NoError(t, l1.Lock(a))
	require.NoError(t, l2.Lock(b))
	ok, err := l2.TryLock(a, 500*time.Millisecond, 0)
	require.False(t, ok)
	require.False(t, errors.Is(err, relock.ErrDeadlock), "a's wait ended with a false deadlock: %v", err)
	require.NoError(t, l2.Unlock(b))
	require.NoError(t, l1.Unlock(a))
}
