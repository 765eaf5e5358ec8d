package rlock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview35s6ShortDelayFirstLookFinds: with a deadlock detection delay
// shorter than lockcore.RecordAfter, a wait's record is written when its
// first look for a deadlock is due, and that look must see it (wait for
// the write's reply), not skip the look and find the cycle only one delay
// later. b waits for X (a holds it), recorded; then a waits for Y (b
// holds it) with a wait limit just under two delays: its first look, a
// delay into its wait, must end it with ErrDeadlock (a's is the younger
// wait). A look that skipped finds nothing before the limit (the next
// look would be two delays into the wait), and a's TryLock returns false
// without an error.
func TestReview35s6ShortDelayFirstLookFinds(t *testing.T) {
	const after = 90 * time.Millisecond
	raw := relocktest.Raw(t)
	c := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	x, y := relocktest.Name(t), relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	require.NoError(t, c.GetLock(x).Lock(a))
	require.NoError(t, c.GetLock(y).Lock(b))
	bGot := lockAsync(c.GetLock(x), b)
	awaitRecords(t, raw, c, x, 1)
	ok, err := c.GetLock(y).TryLock(a, 2*after-time.Millisecond, 0)
	require.False(t, ok)
	require.ErrorIs(t, err, rlock.ErrDeadlock, "the first look, a delay into the wait, found no cycle")
	require.NoError(t, c.GetLock(x).Unlock(a))
	require.NoError(t, relocktest.Receive(t, bGot, 5*time.Second, "b's Lock"))
	require.NoError(t, c.GetLock(x).Unlock(b))
	require.NoError(t, c.GetLock(y).Unlock(b))
	awaitNoRecords(t, raw, c)
}
